package msl

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// A File is one source file of the library: a .metal file with kernels, or a
// header (e.g. "common.h") that the .metal files #include by name.
type File struct {
	Name   string // base name: "rmsnorm.metal", "common.h"
	Source string
}

// Options configures [Open]. The zero value is a non-strict device that finds
// clang itself, caches in the user cache directory, runs fibers in order and
// uses every CPU.
type Options struct {
	// Strict makes divergent barriers, collectives not reached by every lane
	// of the simdgroup (including lanes that returned), and shuffles from
	// inactive lanes errors. Tests should set it (msltest does).
	Strict bool
	// Clang is the compiler to use; "" searches $INGOT_CLANG, clang-19,
	// clang-18, clang-17, clang-16 and clang, and takes the first ≥ 16.
	Clang string
	// CacheDir holds compiled libraries; "" means os.UserCacheDir()/ingot/msl.
	CacheDir string
	// Seed orders the fibers of each threadgroup: 0 runs them in thread order,
	// others shuffle the order each round. Correct kernels give bit-identical
	// results for every seed.
	Seed int64
	// Threads is the number of threadgroups run in parallel; 0 means
	// runtime.NumCPU().
	Threads int
	// MaxBufferLength is the largest buffer NewBuffer and BufferNoCopy
	// accept, in bytes; 0 means no limit. Tests set a small value to exercise
	// code that splits data the way a real device's maxBufferLength forces.
	MaxBufferLength int
}

// ErrUnsupported is returned by [Open] and [Available] where the interpreter
// does not run (it needs linux on amd64 or arm64).
var ErrUnsupported = errors.New("msl: interpreter unsupported on this platform (needs linux/amd64 or linux/arm64)")

// ErrNoCompiler is wrapped by errors saying no suitable clang was found.
var ErrNoCompiler = errors.New("msl: no clang ≥ 16 found (apt-get install clang-19)")

// ReadFiles returns the files in fsys matching the glob patterns (e.g.
// "*.metal", "*.h"), sorted by name, for [Open].
func ReadFiles(fsys fs.FS, patterns ...string) ([]File, error) {
	seen := map[string]bool{}
	var out []File
	for _, p := range patterns {
		names, err := fs.Glob(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("msl: read files: %w", err)
		}
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			b, err := fs.ReadFile(fsys, n)
			if err != nil {
				return nil, fmt.Errorf("msl: read files: %w", err)
			}
			out = append(out, File{Name: path.Base(n), Source: string(b)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
