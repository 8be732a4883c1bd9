package gguf

import (
	"errors"
	"fmt"
	"github.com/ingot-llm/ingot/internal/mmap"
	"regexp"
	"strconv"
)

// splitName matches the name llama-gguf-split gives each part:
// <prefix>-00001-of-00003.gguf.
var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// maxSplits bounds the parts of a split file (llama.cpp's names have five digits).
const maxSplits = 99999

// Open maps a GGUF file read-only and parses it. A part of a split file
// (name-0000i-of-0000N.gguf) opens all N parts: the metadata is the first
// part's and the tensors are every part's. Close releases the mapping.
func Open(path string) (*File, error) {
	parts := []string{path}
	if m := splitName.FindStringSubmatch(path); m != nil {
		n, _ := strconv.Atoi(m[3])
		if n < 1 || n > maxSplits {
			return nil, fmt.Errorf("gguf: %s: split count %d out of range", path, n)
		}
		parts = parts[:0]
		for i := 1; i <= n; i++ {
			parts = append(parts, fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], i, n))
		}
	}
	var f *File
	for i, p := range parts {
		b, err := mmap.Map(p)
		if err != nil {
			if f != nil {
				f.Close()
			}
			return nil, fmt.Errorf("gguf: %w", err)
		}
		part, err := parse(b, i)
		if err != nil {
			mmap.Unmap(b)
			if f != nil {
				f.Close()
			}
			return nil, fmt.Errorf("gguf: %s: %w", p, err)
		}
		if f == nil {
			f = part
			f.unmap = mmap.Unmap
		} else if err := f.merge(part, i, p); err != nil {
			mmap.Unmap(b)
			f.Close()
			return nil, err
		}
		f.maps = append(f.maps, b)
	}
	if err := f.checkSplit(len(parts), parts[0]); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// merge adds the tensors of part i (the file at path) to f.
func (f *File) merge(part *File, i int, path string) error {
	if v, _, err := part.Uint("split.no"); err != nil || int(v) != i {
		return fmt.Errorf("gguf: %s: key %q is %d, want %d", path, "split.no", v, i)
	}
	for _, t := range part.Tensors {
		if _, dup := f.tensors[t.Name]; dup {
			return fmt.Errorf("gguf: %s: tensor %q is also in an earlier part", path, t.Name)
		}
		f.tensors[t.Name] = t
		f.Tensors = append(f.Tensors, t)
	}
	return nil
}

// checkSplit checks split.count and split.tensors.count against what was read.
func (f *File) checkSplit(parts int, path string) error {
	n, ok, err := f.Uint("split.count")
	if err != nil {
		return err
	}
	if ok && int(n) != parts || !ok && parts > 1 {
		return fmt.Errorf("gguf: %s: key %q is %d, but %d parts were found by name", path, "split.count", n, parts)
	}
	if nt, ok, err := f.Uint("split.tensors.count"); err != nil {
		return err
	} else if ok && int(nt) != len(f.Tensors) {
		return fmt.Errorf("gguf: %s: key %q is %d, but the parts hold %d tensors", path, "split.tensors.count", nt, len(f.Tensors))
	}
	return nil
}

// Close unmaps the file. Tensor data must no longer be used.
func (f *File) Close() error {
	var err error
	if f.unmap != nil {
		for _, b := range f.maps {
			err = errors.Join(err, f.unmap(b))
		}
	}
	f.maps = nil
	return err
}

// Size returns the bytes of the file (every part of a split file).
func (f *File) Size() int64 {
	var n int64
	for _, b := range f.maps {
		n += int64(len(b))
	}
	return n
}

// Maps returns the mapped bytes of each part, for a backend that can use host
// memory as device memory. They are read-only.
func (f *File) Maps() [][]byte { return f.maps }
