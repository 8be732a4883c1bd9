package metal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCacheKey: every input of the compiled code changes the key.
func TestCacheKey(t *testing.T) {
	base := cacheKey("kernel void k() {}", "24A335", "Apple M2", "3.2 relaxed")
	if len(base) != 32 || base != cacheKey("kernel void k() {}", "24A335", "Apple M2", "3.2 relaxed") {
		t.Fatalf("key %q: want 32 hex digits, the same for the same inputs", base)
	}
	seen := map[string]string{base: "base"}
	for name, k := range map[string]string{
		"source":   cacheKey("kernel void k() { }", "24A335", "Apple M2", "3.2 relaxed"),
		"os":       cacheKey("kernel void k() {}", "24B83", "Apple M2", "3.2 relaxed"),
		"gpu":      cacheKey("kernel void k() {}", "24A335", "Apple M3", "3.2 relaxed"),
		"settings": cacheKey("kernel void k() {}", "24A335", "Apple M2", "3.1 relaxed"),
		"boundary": cacheKey("kernel void k() {}", "24A33", "5Apple M2", "3.2 relaxed"), // fields are length-prefixed
	} {
		if other, dup := seen[k]; dup {
			t.Errorf("changing the %s gives the key of %s", name, other)
		}
		seen[k] = name
	}
}

func TestCacheDir(t *testing.T) {
	for _, v := range []string{"", "off", "0"} {
		t.Setenv(CacheDirEnv, v)
		if d := cacheDir(); d != "" {
			t.Errorf("%s=%q: dir %q, want none", CacheDirEnv, v, d)
		}
	}
	t.Setenv(CacheDirEnv, "/x/y")
	if d := cacheDir(); d != "/x/y" {
		t.Errorf("%s=/x/y: dir %q", CacheDirEnv, d)
	}
	t.Setenv(CacheDirEnv, "on")
	if d, err := os.UserCacheDir(); err == nil && cacheDir() != filepath.Join(d, "ingot") {
		t.Errorf("%s=on: dir %q, want %s/ingot", CacheDirEnv, cacheDir(), d)
	}
}

// writeTmp writes data as Metal's serializeToURL would: a file in dir.
func writeTmp(t *testing.T, dir string, data []byte) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "metal-*.archive.tmp")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data)
	f.Close()
	return f.Name()
}

// TestCacheStoreLoad: a stored archive is found under its key only, byte for
// byte; storing again replaces it.
func TestCacheStoreLoad(t *testing.T) {
	dir := t.TempDir()
	key, other := cacheKey("a", "b", "c", "d"), cacheKey("a", "b", "c", "e")
	if _, err := cachedArchive(dir, key); !errors.Is(err, errNoEntry) {
		t.Fatalf("empty cache: %v, want errNoEntry", err)
	}
	data := bytes.Repeat([]byte("archive"), 1000)
	if err := storeArchive(dir, key, writeTmp(t, dir, data)); err != nil {
		t.Fatal(err)
	}
	path, err := cachedArchive(dir, key)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Error("the cached archive differs from the stored one")
	}
	if _, err := cachedArchive(dir, other); !errors.Is(err, errNoEntry) {
		t.Errorf("another key: %v, want errNoEntry", err)
	}
	if err := storeArchive(dir, key, writeTmp(t, dir, []byte("v2"))); err != nil {
		t.Fatal(err)
	}
	if path, err := cachedArchive(dir, key); err != nil {
		t.Fatal(err)
	} else if got, _ := os.ReadFile(path); string(got) != "v2" {
		t.Errorf("after a second store: %q, want v2", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestCacheDamage: a damaged entry is a miss that removes it, so the next
// start rebuilds it; never a panic, never the damaged bytes.
func TestCacheDamage(t *testing.T) {
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 512)
	for _, tc := range []struct {
		name   string
		damage func(dir, key string)
		want   string
	}{
		{"flipped byte", func(dir, key string) { flip(t, archivePath(dir, key), 100) }, "SHA-256"},
		{"truncated archive", func(dir, key string) { os.Truncate(archivePath(dir, key), 10) }, "10 bytes"},
		{"longer archive", func(dir, key string) { appendTo(t, archivePath(dir, key), []byte("x")) }, "bytes"},
		{"no archive", func(dir, key string) { os.Remove(archivePath(dir, key)) }, "no such file"},
		{"empty sum", func(dir, key string) { os.WriteFile(sumPath(dir, key), nil, 0o644) }, "format"},
		{"old format", func(dir, key string) { replaceIn(t, sumPath(dir, key), cacheFormat, "ingot-metal-archive-0") }, "format"},
		{"sum of another key", func(dir, key string) { replaceIn(t, sumPath(dir, key), key, strings.Repeat("0", 32)) }, "for key"},
		{"bad length", func(dir, key string) { replaceIn(t, sumPath(dir, key), " 4096 ", " -1 ") }, "length"},
		{"huge length", func(dir, key string) { replaceIn(t, sumPath(dir, key), " 4096 ", " 99999999999 ") }, "length"},
		{"bad hash", func(dir, key string) { replaceIn(t, sumPath(dir, key), "\n", "zz\n") }, "hash"},
		{"garbage sum", func(dir, key string) {
			g := make([]byte, 300)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range g {
				g[i] = byte(r.Uint32())
			}
			os.WriteFile(sumPath(dir, key), g, 0o644)
		}, "format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := cacheKey(tc.name, "os", "gpu", "")
			if err := storeArchive(dir, key, writeTmp(t, dir, data)); err != nil {
				t.Fatal(err)
			}
			tc.damage(dir, key)
			_, err := cachedArchive(dir, key)
			if err == nil || errors.Is(err, errNoEntry) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("damaged entry: %v, want an error saying %q", err, tc.want)
			}
			if _, err := cachedArchive(dir, key); !errors.Is(err, errNoEntry) {
				t.Errorf("after the damage was found: %v, want errNoEntry (the entry removed)", err)
			}
			if err := storeArchive(dir, key, writeTmp(t, dir, data)); err != nil { // the rebuild
				t.Fatal(err)
			}
			if _, err := cachedArchive(dir, key); err != nil {
				t.Errorf("rebuilt entry: %v", err)
			}
		})
	}
}

// TestCacheStoreFails: a store that cannot complete leaves no entry.
func TestCacheStoreFails(t *testing.T) {
	dir := t.TempDir()
	key := cacheKey("x", "", "", "")
	if err := storeArchive(dir, key, filepath.Join(dir, "missing.tmp")); err == nil {
		t.Error("store of a missing file succeeded")
	}
	if err := storeArchive(dir, key, writeTmp(t, dir, nil)); err == nil {
		t.Error("store of an empty archive succeeded")
	}
	if _, err := cachedArchive(dir, key); !errors.Is(err, errNoEntry) {
		t.Errorf("after failed stores: %v, want errNoEntry", err)
	}
}

func flip(t *testing.T, path string, i int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[i] ^= 0xff
	os.WriteFile(path, b, 0o644)
}

func appendTo(t *testing.T, path string, extra []byte) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, append(b, extra...), 0o644)
}

func replaceIn(t *testing.T, path, old, new string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s lacks %q: %q", path, old, b)
	}
	os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
}
