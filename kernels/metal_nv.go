package kernels

import (
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/ingot-llm/ingot/kernels/cpu"
	"github.com/ingot-llm/ingot/metal"
)

// kernelShape says which shape of the hot kernels a [Metal] backend runs where
// Apple's and NVIDIA's GPUs want different ones (STYLE §15): both live in
// shaders/ under names that say so and both run on the interpreter in CI.
type kernelShape uint8

const (
	shapeApple  kernelShape = iota // Apple GPUs and the interpreter
	shapeNVIDIA                    // NVIDIA GPUs (the cuda device); tests force it on the interpreter
)

// shapeOf returns the kernel shape for dev: NVIDIA's for the cuda device
// (Kind "cuda"), Apple's for the rest.
func shapeOf(dev metal.Device) kernelShape {
	if k, ok := dev.(interface{ Kind() string }); ok && k.Kind() == "cuda" {
		return shapeNVIDIA
	}
	return shapeApple
}

// The decode mat-vec (MatMul and MatMuls at L = 1) by kernel shape and weight:
//
//	weight                          shapeApple                 shapeNVIDIA
//	q4, q8; groups of 32, 64, 128   matvec_<w>_f32, per weight  matvec_<w>_f32_nv_<sb>sb[_xs], up to 4 weights a launch
//	any other                       matvec_<w>_f32, per weight  matvec_<w>_f32, per weight
//
// <sb> is the type of the (scale, bias) pairs Upload made for the NVIDIA
// kernel: bf16 or f16 where every scale and bias is exact in it (MLX stores
// them so; the loader widened them to f32), else f32. _xs: x staged in
// threadgroup memory first (K ≤ 6144, see nvStageBytes). _glu: gate and up
// of a gated MLP in one launch, with the activation (MatMulGLU). Prefill (L > 1) is
// matmul_<w>_f32_nv's (kernels/metal_nv_matmul.go). nvGeom holds the NVIDIA
// kernel's geometry.
var matvecNVNames = [2][2][2][3]string{ // [GLU][staged x][q4, q8][pair type]
	{
		{
			{"matvec_q4_f32_nv_bf16sb", "matvec_q4_f32_nv_f16sb", "matvec_q4_f32_nv_f32sb"},
			{"matvec_q8_f32_nv_bf16sb", "matvec_q8_f32_nv_f16sb", "matvec_q8_f32_nv_f32sb"},
		},
		{
			{"matvec_q4_f32_nv_bf16sb_xs", "matvec_q4_f32_nv_f16sb_xs", "matvec_q4_f32_nv_f32sb_xs"},
			{"matvec_q8_f32_nv_bf16sb_xs", "matvec_q8_f32_nv_f16sb_xs", "matvec_q8_f32_nv_f32sb_xs"},
		},
	},
	{
		{
			{"matvec_q4_f32_nv_bf16sb_glu", "matvec_q4_f32_nv_f16sb_glu", "matvec_q4_f32_nv_f32sb_glu"},
			{"matvec_q8_f32_nv_bf16sb_glu", "matvec_q8_f32_nv_f16sb_glu", "matvec_q8_f32_nv_f32sb_glu"},
		},
		{
			{"matvec_q4_f32_nv_bf16sb_xs_glu", "matvec_q4_f32_nv_f16sb_xs_glu", "matvec_q4_f32_nv_f32sb_xs_glu"},
			{"matvec_q8_f32_nv_bf16sb_xs_glu", "matvec_q8_f32_nv_f16sb_xs_glu", "matvec_q8_f32_nv_f32sb_xs_glu"},
		},
	},
}

// matvecNVINames are the integer-dot mat-vecs (matvec_nv.metal's _nvi
// kernels), [GLU][q4, q8][pair type]: x quantized once per call by
// quantx_<w>_f32 into three byte planes per 16-byte piece of codes (2⁻²⁴ of
// the piece's absmax, f32 grade), then dp4a. Where they run is nvIntMode's.
var matvecNVINames = [2][2][3]string{
	{
		{"matvec_q4_f32_nvi_bf16sb", "matvec_q4_f32_nvi_f16sb", "matvec_q4_f32_nvi_f32sb"},
		{"matvec_q8_f32_nvi_bf16sb", "matvec_q8_f32_nvi_f16sb", "matvec_q8_f32_nvi_f32sb"},
	},
	{
		{"matvec_q4_f32_nvi_bf16sb_glu", "matvec_q4_f32_nvi_f16sb_glu", "matvec_q4_f32_nvi_f32sb_glu"},
		{"matvec_q8_f32_nvi_bf16sb_glu", "matvec_q8_f32_nvi_f16sb_glu", "matvec_q8_f32_nvi_f32sb_glu"},
	},
}

// nvIntMode says where the NVIDIA-shaped backend runs the _nvi mat-vecs
// instead of the float ones.
//
// On an H100 (2026-11-27, docs/perf/cuda.md) they took the same GPU time as
// the float kernels wherever those stage x in threadgroup memory (q/k/v, o,
// gate/up: the mat-vecs wait on memory, not on instructions) but 17.5 against
// 26.7 µs on the 8B shape's q4 down projection, whose x (K = 14336) the float
// kernel reads from device memory, one L1 wavefront per lane of a row; the
// quantx launch before each costs ~2.5–5 µs, and q8 was slower in every
// shape. So by default (nvIntAuto) they run q4 weights whose x is not staged.
type nvIntMode uint8

const (
	nvIntAuto   nvIntMode = iota // q4 weights whose x the float kernels cannot stage
	nvIntAlways                  // INGOT_NV_INT=1: every weight matvec_*_nv takes
	nvIntNever                   // INGOT_NV_INT=0: the float kernels only
)

// nvIntFromEnv maps INGOT_NV_INT's value to a mode (anything else: auto).
func nvIntFromEnv(v string) nvIntMode {
	switch v {
	case "1":
		return nvIntAlways
	case "0":
		return nvIntNever
	}
	return nvIntAuto
}

// quantXBytes is the size of quantx's output for K columns of bits-wide codes
// (matvec_nv.metal: pieces of P = 128/bits columns in quads of NC = 3·P/16
// 64-byte lines, then a float4 a piece) and the metadata's offset in it.
func quantXBytes(K, bits int) (total, metaOff int) {
	P := 128 / bits
	np := K / P
	metaOff = (np + 3) / 4 * (3 * P / 16) * 64
	return metaOff + 16*np, metaOff
}

// quantX encodes quantx_<q4|q8>_f32 (q: 0, 1) of x (1, K) into the backend's
// scratch buffer and returns it and the metadata's offset, or nil after
// recording an error. The buffer is reused by the next call: dispatches are
// ordered by the hazard tracking (the next quantx writes what this mat-vec
// reads).
func (m *Metal) quantX(x *Tensor, K, q int) (metal.Buffer, int) {
	bits := 4 << q
	n, metaOff := quantXBytes(K, bits)
	if m.nvQX == nil || m.nvQX.Len() < n {
		if m.nvQX != nil {
			m.pending = append(m.pending, m.nvQX) // in use until the next Sync
		}
		b, err := m.newBuffer(max(n, 256<<10)) // 64k columns at 4 bits: no regrowth in a model
		if err != nil {
			m.fail(err)
			return nil, 0
		}
		m.nvQX = b
	}
	m.begin([2]string{"quantx_q4_f32", "quantx_q8_f32"}[q])
	setArgs(m, uint32(K))
	m.in(1, x)
	m.bind(2, m.nvQX, 0, true)
	m.bind(3, m.nvQX, metaOff, true)
	m.run(metal.Size{W: (K + 255) / 256, H: 1, D: 1}, metal.Size{W: 256, H: 1, D: 1})
	return m.nvQX, metaOff
}

// nvStageBytes bounds the threadgroup memory of a _xs kernel's staged x:
// K + K/8 floats, so K up to 6144 (every 4096-wide input of an 8B model, all
// of a 1B's but the down projection's) — under Metal's 32 kB with the
// simdgroups' partial sums, and under CUDA's 48 kB without opting in.
const nvStageBytes = 28 << 10

// Types of the (scale, bias) pairs of matvec_*_nv.
const (
	sbBF16 = iota // one word: scale in the low half, bias in the high half
	sbF16         // half2 (scale, bias)
	sbF32         // float2 (scale, bias)
)

var sbBytes = [...]int{sbBF16: 4, sbF16: 4, sbF32: 8}

// nvQuant reports whether matvec_*_nv runs t: a 2-D q4 or q8 matrix with
// groups of 32, 64 or 128 (each lane's 16 bytes of codes lie in one group).
func nvQuant(t *Tensor) bool {
	return (t.DType == DTypeQ4 || t.DType == DTypeQ8) && len(t.Shape) == 2 &&
		(t.GroupSize == 32 || t.GroupSize == 64 || t.GroupSize == 128)
}

// matvecNVArgs mirrors struct matvec_nv_args in shaders/common.h.
type matvecNVArgs struct {
	K, GroupShift, LaneShift uint32
	N0, N1, N2, N3           uint32
	TG1, TG2, TG3            uint32
	Act                      uint32 // _glu kernels
}

// Constants of shaders/matvec_nv.metal.
const nvRowsPerThread = 2 // MVNV_RT

// nvGeom is the geometry of a matvec_*_nv launch over rows rows (all its
// matrices) of K columns, chosen from the design note's H100 figures and the
// L1's costs before this kernel ran on one,
//
//   - lanes per row: 4. A row's 16-byte pieces go to 4 consecutive lanes (64
//     contiguous bytes per load instruction, a 128-byte line per iteration for
//     q4), so a simdgroup has 8 row slots of 2 rows each, 16 rows: an x float4
//     load serves 2 rows in registers and 8 row slots by one L1 access (x is
//     re-read from L1 per 16 rows, never from memory per row);
//   - simdgroups per threadgroup, 1 … 8: they split K, so that a matrix of few
//     rows still has about 2048 simdgroups in flight (the H100 keeps ~20 per
//     SM at ~100 registers a thread), each at least one iteration.
//
// except for q4 matrices of 8192 rows or more: 2 lanes per row, 4
// simdgroups. On an H100 (2026-11-27, 32 calls per command buffer, GPU µs a
// call) that took the 8B shape's 14336×4096 from 37.1 to 29.6 µs and its
// 128256×4096 lm_head from 206.8 to 158.9, where the 4096-row matrices were
// fastest as above (q 14.7 µs against 22.7, down 32.2 against 57.2); every
// other geometry of 2, 4, 8 lanes and 1, 2, 4 simdgroups was slower on all
// shapes, and 4 rows a thread (MVNV_RT) slower still.
//
// Both are run-time arguments of one kernel: retuning them needs no new PTX
// (TestMetalMatVecNVGeometry runs 1 … 32 lanes per row, 1 … 8 simdgroups).
func nvGeom(dt DType, rows, K int) (laneShift, nsg int) {
	// Columns an iteration at 2 lanes a row (lanes × loads in flight × codes
	// a load): each of the 4 simdgroups gets an iteration at least.
	const wideStep = 2 * 2 * 32
	if dt == DTypeQ4 && rows >= 8192 && K >= 4*wideStep {
		return 1, 4
	}
	laneShift = 2
	lanes := 1 << laneShift
	cpl, u := 32, 2 // codes per 16-byte load, loads in flight (MVNV U)
	if dt == DTypeQ8 {
		cpl, u = 16, 4
	}
	step := lanes * u * cpl // columns per iteration
	groups := (rows + nvRowsPerTG(laneShift) - 1) / nvRowsPerTG(laneShift)
	nsg = 1
	for nsg < 8 && groups*nsg < 2048 && K >= 2*nsg*step {
		nsg *= 2
	}
	return laneShift, nsg
}

// nvGeomFromEnv returns a fixed geometry for INGOT_NV_GEOM="lanes,simdgroups"
// (lanes a row 1 … 32, a power of two; simdgroups 1 … 8), for retuning
// nvGeom on a GPU without a new build, or nil (unset or malformed: nvGeom).
func nvGeomFromEnv(v string) func(DType, int, int) (int, int) {
	var lanes, nsg int
	if _, err := fmt.Sscanf(v, "%d,%d", &lanes, &nsg); err != nil || lanes < 1 || lanes > 32 || lanes&(lanes-1) != 0 || nsg < 1 || nsg > 8 {
		return nil
	}
	shift := bits.TrailingZeros(uint(lanes))
	return func(DType, int, int) (int, int) { return shift, nsg }
}

// nvRowsPerTG is the rows of a matvec_*_nv threadgroup.
func nvRowsPerTG(laneShift int) int { return (32 >> laneShift) * nvRowsPerThread }

// nvPairs is the (scale, bias) pairs of one uploaded quantized weight: the
// f32 scales in bytes [off, end) of their buffer have pairs (of kind) in buf,
// row for row.
type nvPairs struct {
	off, end int
	buf      metal.Buffer
	kind     uint8
}

// nvTable finds the pairs of a weight by its scales; a [Metal] and its streams
// share one (weights are uploaded once, through the first).
type nvTable struct {
	mu sync.RWMutex
	by map[metal.Buffer][]nvPairs // by the scales' buffer
}

// makePairs makes the (scale, bias) pairs of the quantized host weight t
// (scales and biases f32, f16 or bf16), uploaded as d, and records them for d
// (and its row views; pairsOf takes d's scales to be f32, as Upload leaves
// them on NVIDIA-shaped backends).
func (m *Metal) makePairs(d, t *Tensor) error {
	s, b := t.Scales.ToF32(), t.Biases.ToF32()
	kind := sbKind(s, b)
	host := make([]byte, len(s)*sbBytes[kind])
	for i := range s {
		switch kind {
		case sbBF16:
			putU32(host[4*i:], math.Float32bits(s[i])>>16|math.Float32bits(b[i])&0xffff0000)
		case sbF16:
			putU32(host[4*i:], uint32(cpu.F32ToF16(s[i]))|uint32(cpu.F32ToF16(b[i]))<<16)
		default:
			putU32(host[8*i:], math.Float32bits(s[i]))
			putU32(host[8*i+4:], math.Float32bits(b[i]))
		}
	}
	buf, err := m.upload(host)
	if err != nil {
		return err
	}
	m.stats.CopiedBytes += int64(len(host))
	sc := bufOf("Upload", d.Scales)
	m.nv.mu.Lock()
	m.nv.by[sc] = append(m.nv.by[sc], nvPairs{off: d.Scales.Off, end: d.Scales.Off + len(s)*d.Scales.DType.Bits()/8, buf: buf, kind: kind})
	m.nv.mu.Unlock()
	return nil
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// sbKind returns the narrowest pair type that holds every scale and bias
// exactly (as the CPU backend's blocked layout chooses).
func sbKind(s, b []float32) uint8 {
	bf, f16 := true, true
	for _, x := range [2][]float32{s, b} {
		for _, v := range x {
			bf = bf && math.Float32bits(v)&0xffff == 0
			f16 = f16 && cpu.F16ToF32(cpu.F32ToF16(v)) == v
		}
	}
	switch {
	case bf:
		return sbBF16
	case f16:
		return sbF16
	}
	return sbF32
}

// pairsOf returns the buffer, byte offset and kind of the pairs of w, a
// quantized weight this backend (or the one it is a stream of) uploaded, or
// false.
func (m *Metal) pairsOf(w *Tensor) (metal.Buffer, int, uint8, bool) {
	if !nvQuant(w) || w.Scales == nil {
		return nil, 0, 0, false
	}
	sc, ok := w.Scales.Buf.(metal.Buffer)
	if !ok {
		return nil, 0, 0, false
	}
	m.nv.mu.RLock()
	defer m.nv.mu.RUnlock()
	for _, p := range m.nv.by[sc] {
		if w.Scales.Off >= p.off && w.Scales.Off < p.end {
			return p.buf, (w.Scales.Off - p.off) / 4 * sbBytes[p.kind], p.kind, true
		}
	}
	return nil, 0, 0, false
}

// matvecNV runs dst[i] (1, N_i) = x (1, K) · w[i]ᵀ as one matvec_*_nv launch
// and reports true, or does nothing and reports false unless every weight has
// pairs of one kind and they share dtype, K and group size (≤ 4 weights). The
// caller has checked the shapes. glu: w is {gate, up} of one shape and
// dst[0] = act(x·gateᵀ)·(x·upᵀ) (matvec_*_nv_*_glu).
func (m *Metal) matvecNV(dst []*Tensor, x *Tensor, w []*Tensor, glu bool, act Act) bool {
	if len(w) == 0 || len(w) > 4 || glu && (len(w) != 2 || w[0].Shape[0] != w[1].Shape[0]) {
		return false
	}
	var (
		pb   [4]metal.Buffer
		po   [4]int
		kind uint8
	)
	w0 := w[0]
	for i, wi := range w {
		b, off, k, ok := m.pairsOf(wi)
		if !ok || wi.DType != w0.DType || wi.Cols() != w0.Cols() || wi.GroupSize != w0.GroupSize || i > 0 && k != kind {
			return false
		}
		pb[i], po[i], kind = b, off, k
	}
	K := w0.Cols()
	a := matvecNVArgs{K: uint32(K), GroupShift: uint32(bits.TrailingZeros(uint(w0.GroupSize))),
		TG1: math.MaxUint32, TG2: math.MaxUint32, TG3: math.MaxUint32}
	rows := 0
	for _, wi := range w {
		rows += wi.Shape[0]
	}
	geom := nvGeom
	if m.nvGeom != nil {
		geom = m.nvGeom
	}
	laneShift, nsg := geom(w0.DType, rows, K)
	a.LaneShift = uint32(laneShift)
	per := nvRowsPerTG(laneShift)
	nw := len(w)
	if glu { // one output of N rows, each a gate row and an up row
		per /= nvRowsPerThread
		nw = 1
		a.Act = uint32(act)
	}
	ns := [4]*uint32{&a.N0, &a.N1, &a.N2, &a.N3}
	tgs := [4]*uint32{nil, &a.TG1, &a.TG2, &a.TG3}
	groups := 0
	for i, wi := range w[:nw] {
		if i > 0 {
			*tgs[i] = uint32(groups)
		}
		*ns[i] = uint32(wi.Shape[0])
		groups += (wi.Shape[0] + per - 1) / per
	}
	if groups == 0 {
		return true
	}
	q := 0 // q4
	if w0.DType == DTypeQ8 {
		q = 1
	}
	g := 0
	if glu {
		g = 1
	}
	xsBytes := 4 * (K + K/32*4)
	stage := x.Off%16 == 0 && xsBytes <= nvStageBytes && !m.nvNoStage
	var qx metal.Buffer // the _nvi kernels' quantized x: planes, then metadata at metaOff
	metaOff := 0
	if m.nvInt == nvIntAlways || m.nvInt == nvIntAuto && q == 0 && !stage {
		qx, metaOff = m.quantX(x, K, q)
		if qx == nil {
			return true // the error is recorded
		}
		stage = false
		m.begin(matvecNVINames[g][q][kind])
	} else {
		xs := 0
		if stage {
			xs = 1
		}
		m.begin(matvecNVNames[g][xs][q][kind])
	}
	setArgs(m, a)
	if qx != nil {
		m.bind(1, qx, 0, false)
		m.bind(14, qx, metaOff, false)
	} else {
		m.in(1, x)
		m.in(14, x) // bound, unused
	}
	for i := range 4 { // unused slots repeat the first matrix: bound, never read
		j := i
		if j >= len(w) {
			j = 0
		}
		m.in(2+i, w[j])
		m.bind(6+i, pb[j], po[j], false)
		if j >= len(dst) {
			j = 0
		}
		m.out(10+i, dst[j])
	}
	m.tgmem(0, 4*nsg*nvRowsPerTG(laneShift))
	if stage {
		m.tgmem(1, xsBytes)
	} else {
		m.tgmem(1, 16) // bound, unused
	}
	m.run(metal.Size{W: groups, H: 1, D: 1}, metal.Size{W: 32 * nsg, H: 1, D: 1})
	for _, wi := range w {
		m.stats.WeightBytes += int64(wi.Shape[0]) * int64(wi.DType.RowBytes(K)+K/wi.GroupSize*sbBytes[kind])
	}
	return true
}
