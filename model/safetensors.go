package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/ingot-llm/ingot/internal/mmap"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"github.com/ingot-llm/ingot/kernels"
)

// maxHeader bounds the JSON header of a safetensors file (the format's own limit is
// 100 MB); a larger length is corruption, not a model.
const maxHeader = 100 << 20

// stInfo is one tensor's entry in a safetensors header.
type stInfo struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// stTensor is a validated tensor: its dtype, shape and bytes (a view of the file).
type stTensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
	File  string
}

// stDTypeSize gives the element size of every safetensors dtype.
var stDTypeSize = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"U16": 2, "I16": 2, "F16": 2, "BF16": 2,
	"U32": 4, "I32": 4, "F32": 4,
	"U64": 8, "I64": 8, "F64": 8,
}

// parseSafetensors validates a whole safetensors file held in b and returns its
// tensors (views of b) and metadata. name is used in errors only.
func parseSafetensors(name string, b []byte) (map[string]*stTensor, map[string]string, error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("model: %s: %d bytes is too short for a safetensors file", name, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, nil, fmt.Errorf("model: %s: header length %d runs past the end of the %d-byte file", name, n, len(b))
	}
	hdr, data := b[8:8+n], b[8+n:]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimRight(hdr, " "), &raw); err != nil {
		return nil, nil, fmt.Errorf("model: %s: header: %v", name, err)
	}
	var meta map[string]string
	tensors := make(map[string]*stTensor, len(raw))
	type span struct {
		lo, hi int64
		name   string
	}
	var spans []span
	for k, v := range raw {
		if k == "__metadata__" {
			if err := json.Unmarshal(v, &meta); err != nil {
				return nil, nil, fmt.Errorf("model: %s: __metadata__: %v", name, err)
			}
			continue
		}
		var ti stInfo
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ti); err != nil {
			return nil, nil, fmt.Errorf("model: %s: tensor %q: %v", name, k, err)
		}
		size, ok := stDTypeSize[ti.DType]
		if !ok {
			return nil, nil, fmt.Errorf("model: %s: tensor %q: unknown dtype %q", name, k, ti.DType)
		}
		if len(ti.Offsets) != 2 {
			return nil, nil, fmt.Errorf("model: %s: tensor %q: data_offsets has %d entries, want 2", name, k, len(ti.Offsets))
		}
		lo, hi := ti.Offsets[0], ti.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) {
			return nil, nil, fmt.Errorf("model: %s: tensor %q: data_offsets [%d, %d] out of range (data is %d bytes)", name, k, lo, hi, len(data))
		}
		elems := int64(1)
		shape := make([]int, len(ti.Shape))
		for i, d := range ti.Shape {
			if d < 0 || (d > 0 && elems > (1<<50)/d) {
				return nil, nil, fmt.Errorf("model: %s: tensor %q: bad shape %v", name, k, ti.Shape)
			}
			elems *= d
			shape[i] = int(d)
		}
		if elems*int64(size) != hi-lo {
			return nil, nil, fmt.Errorf("model: %s: tensor %q: shape %v of %s needs %d bytes, data_offsets give %d", name, k, ti.Shape, ti.DType, elems*int64(size), hi-lo)
		}
		tensors[k] = &stTensor{Name: k, DType: ti.DType, Shape: shape, Data: data[lo:hi:hi], File: name}
		spans = append(spans, span{lo, hi, k})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return nil, nil, fmt.Errorf("model: %s: tensors %q and %q overlap", name, spans[i-1].name, spans[i].name)
		}
	}
	return tensors, meta, nil
}

// shardIndex is model.safetensors.index.json.
type shardIndex struct {
	WeightMap map[string]string `json:"weight_map"`
}

// parseShardIndex validates an index file's contents: every file it names must be
// a plain file name inside the model directory.
func parseShardIndex(name string, b []byte) (map[string]string, error) {
	var idx shardIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("model: %s: %v", name, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("model: %s: weight_map is empty", name)
	}
	for t, f := range idx.WeightMap {
		if f == "" || f != filepath.Base(f) || strings.HasPrefix(f, ".") {
			return nil, fmt.Errorf("model: %s: weight_map[%q] = %q is not a file name in the model directory", name, t, f)
		}
	}
	return idx.WeightMap, nil
}

// weightFiles holds every tensor of a model directory, memory-mapped.
type weightFiles struct {
	tensors map[string]*stTensor
	maps    [][]byte // to unmap on Close
	largest []int    // per map: bytes of its largest tensor
	unmaps  []func() error
	meta    map[string]string
}

// openWeights maps model.safetensors, or the shards listed by
// model.safetensors.index.json, or every *.safetensors file in dir.
func openWeights(dir string) (*weightFiles, error) {
	var files []string
	index := filepath.Join(dir, "model.safetensors.index.json")
	var wmap map[string]string
	if b, err := os.ReadFile(index); err == nil {
		if wmap, err = parseShardIndex(index, b); err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, f := range wmap {
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
		sort.Strings(files)
	} else if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		files = []string{"model.safetensors"}
	} else {
		m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
		for _, f := range m {
			files = append(files, filepath.Base(f))
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("model: no model.safetensors, model.safetensors.index.json or *.safetensors in %s", dir)
		}
	}
	w := &weightFiles{tensors: map[string]*stTensor{}}
	for _, f := range files {
		path := filepath.Join(dir, f)
		b, err := mmap.Map(path)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("model: %w", err)
		}
		w.maps = append(w.maps, b)
		ts, meta, err := parseSafetensors(path, b)
		if err != nil {
			w.Close()
			return nil, err
		}
		largest := 0
		for _, t := range ts {
			largest = max(largest, len(t.Data))
		}
		w.largest = append(w.largest, largest)
		if w.meta == nil {
			w.meta = meta
		}
		for name, t := range ts {
			if prev, dup := w.tensors[name]; dup {
				w.Close()
				return nil, fmt.Errorf("model: tensor %q is in both %s and %s", name, prev.File, path)
			}
			if wmap != nil && wmap[name] != f {
				continue // the index assigns it elsewhere (or not at all): ignore stray copies
			}
			w.tensors[name] = t
		}
	}
	for name, f := range wmap {
		if _, ok := w.tensors[name]; !ok {
			w.Close()
			return nil, fmt.Errorf("model: %s: tensor %q is not in %s", index, name, filepath.Join(dir, f))
		}
	}
	return w, nil
}

// mapInto offers each file to b when it can use host memory as device memory
// (kernels.Mapper), so that uploading tensors read straight from the files
// copies nothing. A backend that cannot wrap a file copies its tensors instead.
func (w *weightFiles) mapInto(b kernels.Backend, log *slog.Logger) {
	mp, ok := b.(kernels.Mapper)
	if !ok {
		return
	}
	for i, f := range w.maps {
		unmap, err := mp.Map(f, w.largest[i])
		if err != nil {
			log.Debug("model: weights will be copied to the device", "err", err)
			continue
		}
		w.unmaps = append(w.unmaps, unmap)
	}
}

// release tells the system that b, if it lies in one of the mapped files, will
// not be read again, so its pages leave the process's memory (they stay in the
// page cache, and a later read maps them back).
func (w *weightFiles) release(b []byte) {
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, m := range w.maps {
		if len(m) > 0 {
			if q := uintptr(unsafe.Pointer(unsafe.SliceData(m))); p >= q && p+uintptr(len(b)) <= q+uintptr(len(m)) {
				mmap.Release(b)
				return
			}
		}
	}
}

// Close releases the device's views of the files, then unmaps them. Tensors
// viewing them must no longer be used.
func (w *weightFiles) Close() error {
	var first error
	for _, unmap := range w.unmaps {
		if err := unmap(); err != nil && first == nil {
			first = err
		}
	}
	w.unmaps = nil
	for _, b := range w.maps {
		if err := mmap.Unmap(b); err != nil && first == nil {
			first = err
		}
	}
	w.maps = nil
	return first
}
