//go:build !unix

// Package mmap maps files read-only for the weight loaders (model's
// safetensors, gguf): mmap where the system has it, a plain read elsewhere.
package mmap

import "os"

// Map reads path into memory where mmap is unavailable.
func Map(path string) ([]byte, error) { return os.ReadFile(path) }

// Unmap does nothing: Map read the file.
func Unmap([]byte) error { return nil }

// Release does nothing where files are read, not mapped: the weights a
// backend copies stay in memory with the file's other bytes.
func Release([]byte) {}
