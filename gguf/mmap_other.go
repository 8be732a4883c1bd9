//go:build !unix

package gguf

import "os"

// mapFile reads path into memory where mmap is unavailable.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) error { return nil }
