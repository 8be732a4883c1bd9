//go:build !unix

package model

import "os"

// mapFile reads path into memory where mmap is unavailable.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) error { return nil }

// releasePages does nothing where files are read, not mapped: the weights a
// backend copies stay in memory with the file's other bytes.
func releasePages([]byte) {}
