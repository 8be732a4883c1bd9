//go:build unix

// Package mmap maps files read-only for the weight loaders (model's
// safetensors, gguf): mmap where the system has it, a plain read elsewhere.
package mmap

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Map maps path read-only. An empty file maps to an empty slice.
func Map(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, fmt.Errorf("%s: too large to map", path)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return b, nil
}

// Unmap releases a mapping Map returned.
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}

// Release drops the whole pages inside b, part of a read-only file mapping,
// from the process's memory.
func Release(b []byte) {
	pg := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((pg - p%pg) % pg)
	hi := len(b) - int((p+uintptr(len(b)))%pg)
	if hi > lo {
		_ = unix.Madvise(b[lo:hi], unix.MADV_DONTNEED) // advice: an error only keeps the pages
	}
}
