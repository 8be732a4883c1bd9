//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package model

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// lockQuantTemp creates dir's marker, quantTempMarker, holding an exclusive flock on
// it, and returns the open marker: the lock lasts until it is closed or the process
// dies, however it dies. The marker is locked under a scratch name and renamed into
// place, so a cleaner never sees an unlocked marker of a live writer.
func lockQuantTemp(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".lock-")
	if err != nil {
		return nil, err
	}
	ok, err := tryLock(f)
	if err == nil && !ok {
		err = errors.New("new lock file is locked by another process")
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, quantTempMarker))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// removeIfStale removes dir if its marker is a regular file that nobody holds
// locked, that is, if the QuantizeDir that wrote it has ended without cleaning up.
// It reports whether dir was removed. A directory without a marker (one being set
// up, one being renamed into place, or anything not made by QuantizeDir) is left.
func removeIfStale(dir string) (bool, error) {
	marker := filepath.Join(dir, quantTempMarker)
	f, err := os.OpenFile(marker, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false, nil
	}
	if ok, err := tryLock(f); !ok || err != nil {
		return false, nil
	}
	// A cleaner running at the same time may have removed the directory after we
	// opened the marker; then the path no longer names the file we locked.
	if cur, err := os.Lstat(marker); err != nil || !os.SameFile(fi, cur) {
		return false, nil
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return false, nil
	}
	return true, os.RemoveAll(dir)
}

// tryLock takes an exclusive flock on f without waiting. It reports false, nil when
// another open file holds the lock. flock locks belong to the open file, not the
// process, so two opens in one process exclude each other too.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case syscall.EWOULDBLOCK:
			return false, nil
		case syscall.EINTR:
			continue
		}
		return false, err
	}
}
