package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"unsafe"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// quantConfig is mlx-lm's "quantization" block: a default and per-module overrides
// keyed by module path (e.g. "model.layers.0.mlp.down_proj"), where false means
// "not quantized".
type quantConfig struct {
	Bits, GroupSize int
	Mode            string                  // "" or "affine" (MLX affine), or "mxfp4" (see checkQuantMode)
	override        map[string]*quantConfig // nil entry: module left unquantized
}

// parseQuant reads "quantization" (or "quantization_config" when the former is
// absent). It returns nil when the model is not quantized.
func parseQuant(c *Config) (*quantConfig, error) {
	field, raw := "quantization", c.Quantization
	if len(raw) == 0 || string(raw) == "null" {
		field, raw = "quantization_config", c.QuantizationConfig
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("model: config.json: %s: %v", field, err)
	}
	q := &quantConfig{override: map[string]*quantConfig{}}
	for k, v := range m {
		var err error
		switch k {
		case "bits":
			err = json.Unmarshal(v, &q.Bits)
		case "group_size":
			err = json.Unmarshal(v, &q.GroupSize)
		case "mode":
			err = json.Unmarshal(v, &q.Mode)
		case "quant_method":
			var qm string
			_ = json.Unmarshal(v, &qm)
			if qm != "mxfp4" {
				return nil, fmt.Errorf("model: config.json: %s.quant_method %q is not supported (ingot loads MLX affine quantization and mxfp4)", field, qm)
			}
			q.Mode, q.Bits, q.GroupSize = "mxfp4", 4, 32 // Hugging Face's gpt-oss: the experts' _blocks and _scales
		default:
			if string(v) == "false" {
				q.override[k] = nil
				continue
			}
			var o quantConfig
			if err = json.Unmarshal(v, &struct {
				Bits      *int    `json:"bits"`
				GroupSize *int    `json:"group_size"`
				Mode      *string `json:"mode"`
			}{&o.Bits, &o.GroupSize, &o.Mode}); err != nil || string(v) == "true" {
				continue // other keys mlx-lm may add in future: not module overrides
			}
			q.override[k] = &o
		}
		if err != nil {
			return nil, fmt.Errorf("model: config.json: %s.%s: %v", field, k, err)
		}
	}
	if err := checkQuantMode(field, q); err != nil {
		return nil, err
	}
	if _, ok := kernels.QuantDType(q.Bits); !ok {
		return nil, fmt.Errorf("model: config.json: %s.bits (%d) must be 2, 3, 4, 5, 6 or 8", field, q.Bits)
	}
	if q.GroupSize != 32 && q.GroupSize != 64 && q.GroupSize != 128 {
		return nil, fmt.Errorf("model: config.json: %s.group_size (%d) must be 32, 64 or 128", field, q.GroupSize)
	}
	for k, o := range q.override {
		if o == nil {
			continue
		}
		if o.Bits == 0 {
			o.Bits = q.Bits
		}
		if o.GroupSize == 0 {
			o.GroupSize = q.GroupSize
		}
		if err := checkQuantMode(fmt.Sprintf("%s[%q]", field, k), o); err != nil {
			return nil, err
		}
		if _, ok := kernels.QuantDType(o.Bits); !ok || (o.GroupSize != 32 && o.GroupSize != 64 && o.GroupSize != 128) {
			return nil, fmt.Errorf("model: config.json: %s[%q]: bits %d / group_size %d not supported", field, k, o.Bits, o.GroupSize)
		}
	}
	return q, nil
}

// forModule returns the quantization of one module, nil if it is stored unquantized.
func (q *quantConfig) forModule(module string) *quantConfig {
	if q == nil {
		return nil
	}
	if o, ok := q.override[module]; ok {
		return o
	}
	return q
}

// loader turns safetensors entries into uploaded tensors, checking names, dtypes
// and shapes against the config. Errors name the HF tensor.
type loader struct {
	files   *weightFiles
	b       kernels.Backend
	quant   *quantConfig
	prefix  string       // "" or e.g. "language_model." (sanitized checkpoints)
	inner   string       // "" or "language_model.", after "model." (Qwen3.5's multimodal checkpoints)
	toQ     *quantConfig // quantize float matrices on load (Options.Quant); nil: keep them
	synth   *synthetic   // make random weights instead of reading files (benchmarks)
	used    map[string]bool
	bytes   int64                  // weight bytes uploaded
	fuse    map[string]*loraModule // an adapter to merge by module, removed as merged (Options.Fuse); nil: none
	folded  bool                   // norm weights are stored as applied (GGUF Gemma: the converter added the 1): vector adds none
	threads int                    // goroutines for quantizing on load
	ctx     context.Context        // the load's: quantizing on load stops when it is done
	par     *loadGroup             // where matrix runs the loads; nil: in line
	mu      sync.Mutex             // guards bytes
}

// releaseFile drops the pages of b from memory where b views a mapped weight
// file (see weightFiles.release).
func (l *loader) releaseFile(b []byte) {
	if l.files != nil {
		l.files.release(b)
	}
}

// full is the stored name of tensor name: with the checkpoint's prefix, or
// model.X as model.<inner>X.
func (l *loader) full(name string) string {
	if l.inner != "" && strings.HasPrefix(name, "model.") {
		return "model." + l.inner + name[len("model."):]
	}
	return l.prefix + name
}

func (l *loader) get(name string) (*stTensor, bool) {
	t, ok := l.files.tensors[l.full(name)]
	if ok {
		l.used[l.full(name)] = true
	}
	return t, ok
}

func (l *loader) has(name string) bool {
	if l.synth != nil {
		return l.synth.has(name)
	}
	_, ok := l.files.tensors[l.full(name)]
	return ok
}

// matrix loads the (rows, cols) weight of a linear module or embedding, given its
// module path ("model.layers.0.self_attn.q_proj"), as f32/f16/bf16 or MLX affine.
// It checks the stored tensor at once; with l.par set the rest (quantizing on
// load, the backend's upload) runs on l.par, and the tensor returned is filled
// in by the time l.wait returns, which also returns that work's error.
func (l *loader) matrix(module string, rows, cols int) (*kernels.Tensor, error) {
	host, err := l.matrixSource(module, rows, cols)
	if err != nil {
		return nil, err
	}
	name := module + ".weight"
	if l.par == nil {
		t, err := host()
		if err != nil {
			return nil, err
		}
		return l.upload(name, t)
	}
	dst := &kernels.Tensor{DType: kernels.DTypeF32, Shape: []int{rows, cols}} // filled in by the load
	err = l.par.run(func() error {
		t, err := host()
		if err == nil {
			t, err = l.upload(name, t)
		}
		if err == nil {
			*dst = *t
		}
		return err
	})
	return dst, err
}

// wait waits for the matrices loading on l.par and returns the first error
// one of them met.
func (l *loader) wait() error {
	if l.par == nil {
		return nil
	}
	return l.par.wait()
}

// loadGroup runs matrix loads on at most n goroutines at a time, so that as
// many matrices are in memory half-made as there are threads.
type loadGroup struct {
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

func newLoadGroup(n int) *loadGroup { return &loadGroup{slots: make(chan struct{}, max(n, 1))} }

// run starts f once a slot is free, unless a load has failed: then it returns
// that error and starts nothing.
func (g *loadGroup) run(f func() error) error {
	g.slots <- struct{}{}
	g.mu.Lock()
	err := g.err
	g.mu.Unlock()
	if err != nil {
		<-g.slots
		return err
	}
	g.wg.Go(func() {
		defer func() { <-g.slots }()
		if err := f(); err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.mu.Unlock()
		}
	})
	return nil
}

func (g *loadGroup) wait() error {
	g.wg.Wait()
	return g.err
}

// upload uploads t to the backend under name (the HF tensor's, for errors),
// counts its bytes and lets a mapped file's pages it read leave memory when the
// backend made its own copy. Safe for concurrent use.
func (l *loader) upload(name string, t *kernels.Tensor) (*kernels.Tensor, error) {
	u, err := l.b.Upload(t)
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	l.mu.Lock()
	l.bytes += int64(kernels.WeightBytes(u))
	l.mu.Unlock()
	if u != t && l.files != nil {
		l.files.release(t.Data) // the backend keeps its own copy
		if t.Scales != nil {
			l.files.release(t.Scales.Data)
			l.files.release(t.Biases.Data)
		}
	}
	return u, nil
}

// hostMatrix returns the host tensor of a module's weight without uploading it.
func (l *loader) hostMatrix(module string, rows, cols int) (*kernels.Tensor, error) {
	host, err := l.matrixSource(module, rows, cols)
	if err != nil {
		return nil, err
	}
	return host()
}

// ready returns a host function that returns t.
func ready(t *kernels.Tensor) func() (*kernels.Tensor, error) {
	return func() (*kernels.Tensor, error) { return t, nil }
}

// matrixSource finds and checks a module's weight and returns the function
// that makes its host tensor: at once where the tensor is a view of the file
// or already made, and quantizing on load (Options.Quant) when called. The
// function is safe to call on another goroutine.
func (l *loader) matrixSource(module string, rows, cols int) (func() (*kernels.Tensor, error), error) {
	if l.synth != nil {
		return ready(l.synth.matrix(rows, cols)), nil
	}
	name := module + ".weight"
	st, ok := l.get(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", l.full(name))
	}
	if md := l.fuse[module]; md != nil {
		var err error
		if st, err = l.fused(module, st, md, rows, cols); err != nil {
			return nil, err
		}
	}
	if dt, ok := ggufBlockDType(st.DType); ok {
		t, err := ggufBlockMatrix(st, dt, rows, cols)
		return ready(t), err
	}
	if st.DType == "U32" {
		t, err := l.quantized(module, st, rows, cols)
		return ready(t), err
	}
	if !isMatrix(st.Shape, rows, cols) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies [%d %d]", st.Name, st.Shape, rows, cols)
	}
	dt, err := floatDType(st)
	if err != nil {
		return nil, err
	}
	if q := l.toQ; q != nil && cols%q.GroupSize == 0 {
		// mlx-lm quantizes every Linear and Embedding whose input width is a whole
		// number of groups; so does ingot. The stored floats are read a block
		// of rows at a time, and a mapped file's pages of each block leave
		// memory once it is quantized.
		return func() (*kernels.Tensor, error) {
			codes, sb, bb, err := quantizeStored(l.ctx, st, rows, cols, q.Bits, q.GroupSize, l.threads, l.releaseFile)
			if err != nil {
				return nil, err
			}
			qdt, _ := kernels.QuantDType(q.Bits)
			g := cols / q.GroupSize
			return &kernels.Tensor{DType: qdt, Shape: []int{rows, cols}, Data: bytesOf(codes), GroupSize: q.GroupSize,
				Scales: bf16Tensor(sb, rows, g), Biases: bf16Tensor(bb, rows, g)}, nil
		}, nil
	}
	return ready(&kernels.Tensor{DType: dt, Shape: []int{rows, cols}, Data: aligned(st.Data, 4)}), nil
}

// bf16Tensor wraps bf16 values as a host (rows, cols) bf16 tensor (no copy).
func bf16Tensor(x []uint16, rows, cols int) *kernels.Tensor {
	return &kernels.Tensor{DType: kernels.DTypeBF16, Shape: []int{rows, cols}, Data: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 2*len(x))}
}

func widenBF16(x []uint16) []float32 {
	f := make([]float32, len(x))
	for i, v := range x {
		f[i] = cpu.BF16ToF32(v)
	}
	return f
}

// bytesOf views a []uint32 as little-endian bytes (no copy).
func bytesOf(x []uint32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

func floatDType(st *stTensor) (kernels.DType, error) {
	switch st.DType {
	case "F32":
		return kernels.DTypeF32, nil
	case "F16":
		return kernels.DTypeF16, nil
	case "BF16":
		return kernels.DTypeBF16, nil
	}
	return 0, fmt.Errorf("model: tensor %q has dtype %s (want F32, F16, BF16, or U32 with scales and biases)", st.Name, st.DType)
}

// isMatrix reports whether a stored shape is the (rows, cols) matrix: 2-D, or
// more dimensions whose leading ones multiply to rows (mlx-lm stacks a
// mixture of experts' matrices as [E, rows/E, cols]).
func isMatrix(shape []int, rows, cols int) bool {
	if len(shape) < 2 || shape[len(shape)-1] != cols {
		return false
	}
	n := 1
	for _, d := range shape[:len(shape)-1] {
		if d <= 0 || n > rows {
			return false
		}
		n *= d
	}
	return n == rows
}

// quantized loads an MLX affine module: weight U32 (rows, cols·bits/32), scales and
// biases (rows, cols/group) in any float dtype, kept as stored (viewing the file,
// so a backend may bind them in place; both widened to f32 where their dtypes
// differ); or an MLX mxfp4 one (see mxfp4Matrix).
func (l *loader) quantized(module string, st *stTensor, rows, cols int) (*kernels.Tensor, error) {
	q := l.quant.forModule(module)
	if q == nil {
		return nil, fmt.Errorf("model: tensor %q is U32 (quantized) but config.json has no quantization for %s", st.Name, module)
	}
	if q.Mode == "mxfp4" {
		return l.mxfp4Matrix(module, st, rows, cols)
	}
	dt, _ := kernels.QuantDType(q.Bits)
	if cols%q.GroupSize != 0 || cols*q.Bits%32 != 0 {
		return nil, fmt.Errorf("model: tensor %q: %d columns are not a whole number of %d-element groups", st.Name, cols, q.GroupSize)
	}
	if !isMatrix(st.Shape, rows, cols*q.Bits/32) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies [%d %d] for %d-bit codes of [%d %d]",
			st.Name, st.Shape, rows, cols*q.Bits/32, q.Bits, rows, cols)
	}
	groups := cols / q.GroupSize
	var sb [2]*kernels.Tensor
	for i, part := range []string{"scales", "biases"} {
		ps, ok := l.get(module + "." + part)
		if !ok {
			return nil, fmt.Errorf("model: missing tensor %q", l.full(module+"."+part))
		}
		if !isMatrix(ps.Shape, rows, groups) {
			return nil, fmt.Errorf("model: tensor %q has shape %v, want [%d %d]", ps.Name, ps.Shape, rows, groups)
		}
		dt, err := floatDType(ps)
		if err != nil {
			return nil, err
		}
		sb[i] = &kernels.Tensor{DType: dt, Shape: []int{rows, groups}, Data: aligned(ps.Data, dt.Bits()/8)}
	}
	if sb[0].DType != sb[1].DType {
		for i, t := range sb {
			sb[i] = kernels.FromF32(t.ToF32(), rows, groups)
		}
	}
	return &kernels.Tensor{DType: dt, Shape: []int{rows, cols}, Data: aligned(st.Data, 4), Scales: sb[0], Biases: sb[1], GroupSize: q.GroupSize}, nil
}

// hostVector returns a 1-D tensor of n elements as f32 on the host (attention
// sinks: the kernels take them with the dispatch).
func (l *loader) hostVector(name string, n int) ([]float32, error) {
	if l.synth != nil {
		return l.synth.vector(name, n), nil
	}
	st, ok := l.get(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", l.full(name))
	}
	if len(st.Shape) != 1 || st.Shape[0] != n {
		return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies [%d]", st.Name, st.Shape, n)
	}
	return toF32(st)
}

// vector loads a 1-D tensor of n elements as f32 (norm weights, biases). With
// plusOne it adds 1 in float32, turning Gemma's stored (w) into the (1+w) it applies,
// unless the file holds (1+w) already (l.folded).
func (l *loader) vector(name string, n int, plusOne bool) (*kernels.Tensor, error) {
	if l.synth != nil {
		return l.upload(name, kernels.FromF32(l.synth.vector(name, n), n))
	}
	st, ok := l.get(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", l.full(name))
	}
	if len(st.Shape) != 1 || st.Shape[0] != n {
		return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies [%d]", st.Name, st.Shape, n)
	}
	f, err := toF32(st)
	if err != nil {
		return nil, err
	}
	if plusOne && !l.folded {
		for i := range f {
			f[i]++
		}
	}
	return l.upload(name, kernels.FromF32(f, n))
}

// toF32 converts a float tensor to a fresh []float32.
func toF32(st *stTensor) ([]float32, error) {
	dt, err := floatDType(st)
	if err != nil {
		return nil, err
	}
	n := len(st.Data) / (dt.Bits() / 8)
	out := make([]float32, n)
	for i := range out {
		switch dt {
		case kernels.DTypeF32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(st.Data[4*i:]))
		case kernels.DTypeF16:
			out[i] = cpu.F16ToF32(binary.LittleEndian.Uint16(st.Data[2*i:]))
		case kernels.DTypeBF16:
			out[i] = cpu.BF16ToF32(binary.LittleEndian.Uint16(st.Data[2*i:]))
		}
	}
	return out, nil
}

// aligned returns b, or a copy of it when it is not n-byte aligned (safetensors
// offsets are not guaranteed to be), so it can be viewed as n-byte elements.
func aligned(b []byte, n int) []byte {
	if kernels.Aligned(b, n) {
		return b
	}
	c := make([]byte, len(b), len(b)+n)
	copy(c, b)
	return c
}

// unused lists the tensors no module claimed, ignoring ones known to be redundant.
func (l *loader) unused() []string {
	var out []string
	for name := range l.files.tensors {
		if l.used[name] || strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue
		}
		out = append(out, name)
	}
	return out
}
