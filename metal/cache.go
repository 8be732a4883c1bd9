package metal

// The pipeline cache: Apple's device keeps the GPU code of its compiled
// pipelines in an MTLBinaryArchive on disk, so that a second start skips
// compiling them (metal_darwin.go, archive). This file is the part that runs
// everywhere: where the cache lives, the key that invalidates it, and the
// checks that make a damaged entry a rebuild, never a crash or a wrong
// program.
//
// An entry is two files in the cache directory: the archive as Metal
// serialized it (metal-KEY.archive) and a sum file (metal-KEY.sum) holding
// the key, the archive's length and its SHA-256. The sum is written last, by
// rename, so an entry without a valid sum (a crash mid-write, a truncated or
// edited file, a full disk) is removed and rebuilt.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cacheFormat changes whenever what an entry holds or how it is keyed does.
const cacheFormat = "ingot-metal-archive-1"

// CacheDirEnv names the environment variable that turns the pipeline cache
// on: "1" or "on" keeps it in os.UserCacheDir()/ingot, another value is the
// directory to use. Unset, "0" or "off": no cache (the default until the
// cache has run on a Mac).
const CacheDirEnv = "INGOT_METAL_CACHE"

// cacheDir returns the directory of the pipeline cache, or "" when it is
// off or no user cache directory is known.
func cacheDir() string {
	switch v := os.Getenv(CacheDirEnv); v {
	case "", "off", "0":
		return ""
	case "on", "1":
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(d, "ingot")
	default:
		return v
	}
}

// cacheKey names the entry for a library: the source's hash, the OS build
// (a new macOS may compile differently or reject old archives), the GPU, the
// compile settings (language version, math mode) and cacheFormat. Any change
// gives another key, so a stale entry is never read; old ones stay until
// removed with the directory.
func cacheKey(source, osBuild, gpu, settings string) string {
	h := sha256.New()
	for _, s := range []string{cacheFormat, osBuild, gpu, settings, source} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func archivePath(dir, key string) string { return filepath.Join(dir, "metal-"+key+".archive") }
func sumPath(dir, key string) string     { return filepath.Join(dir, "metal-"+key+".sum") }

// maxArchive bounds what a sum file may claim: a larger archive is damage.
const maxArchive = 1 << 30

// errNoEntry is a cache miss.
var errNoEntry = errors.New("no cache entry")

// cachedArchive returns the path of the valid archive for key in dir. A
// missing entry is errNoEntry; a damaged one (sum file unreadable, for
// another key, or not matching the archive's length and hash) is removed and
// reported as an error naming the damage, also a miss to the caller.
func cachedArchive(dir, key string) (string, error) {
	sum, err := os.ReadFile(sumPath(dir, key))
	if errors.Is(err, os.ErrNotExist) {
		return "", errNoEntry
	}
	if err != nil {
		return "", err
	}
	path := archivePath(dir, key)
	if err := checkSum(sum, key, path); err != nil {
		removeEntry(dir, key)
		return "", fmt.Errorf("metal: pipeline cache entry %s is damaged (removed, it will be rebuilt): %w", path, err)
	}
	return path, nil
}

// checkSum checks the sum file's contents against key and the archive.
func checkSum(sum []byte, key, path string) error {
	f := strings.Fields(string(sum))
	if len(f) != 4 || f[0] != cacheFormat {
		return errors.New("sum file is not in the current format")
	}
	if f[1] != key {
		return fmt.Errorf("sum file is for key %.40q", f[1])
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n <= 0 || n > maxArchive {
		return fmt.Errorf("sum file gives length %.40q", f[2])
	}
	want, err := hex.DecodeString(f[3])
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("sum file gives hash %.80q", f[3])
	}
	a, err := os.Open(path)
	if err != nil {
		return err
	}
	defer a.Close()
	h := sha256.New()
	got, err := io.Copy(h, io.LimitReader(a, maxArchive+1))
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("archive is %d bytes, the sum file says %d", got, n)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return errors.New("archive's SHA-256 does not match the sum file")
	}
	return nil
}

// storeArchive makes the file at tmp (an archive Metal wrote, in dir) the
// entry for key: it renames it into place and then writes the sum file,
// by rename too. On error the entry is removed and tmp with it.
func storeArchive(dir, key, tmp string) (err error) {
	defer func() {
		if err != nil {
			os.Remove(tmp)
			removeEntry(dir, key)
		}
	}()
	a, err := os.Open(tmp)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, a)
	a.Close()
	if err != nil {
		return err
	}
	if n <= 0 || n > maxArchive {
		return fmt.Errorf("metal: pipeline archive of %d bytes", n)
	}
	os.Remove(sumPath(dir, key)) // an old sum must never describe the new archive
	if err := os.Rename(tmp, archivePath(dir, key)); err != nil {
		return err
	}
	s, err := os.CreateTemp(dir, "metal-*.sum.tmp")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s, "%s %s %d %x\n", cacheFormat, key, n, h.Sum(nil))
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.Name(), sumPath(dir, key))
	}
	if err != nil {
		os.Remove(s.Name())
	}
	return err
}

// removeEntry removes key's entry, whatever state it is in.
func removeEntry(dir, key string) {
	os.Remove(sumPath(dir, key))
	os.Remove(archivePath(dir, key))
}
