package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// TestQuantizeMatchesReference quantizes tinycode-llama's bf16 weights and compares
// codes, scales and biases bit for bit with the MLX q4/q8 files of the reference.
func TestQuantizeMatchesReference(t *testing.T) {
	src := readSafetensors(t, filepath.Join(refDir, "tinycode-llama", "model.safetensors"))
	for _, bits := range []int{4, 8} {
		ref := readSafetensors(t, filepath.Join(refDir, map[int]string{4: "tinycode-llama-q4", 8: "tinycode-llama-q8"}[bits], "model.safetensors"))
		for _, name := range []string{"model.embed_tokens", "model.layers.0.self_attn.q_proj", "model.layers.3.mlp.down_proj"} {
			st := src[name+".weight"]
			w, _ := toF32(st)
			codes, scales, biases := quantizeRows(w, st.Shape[0], st.Shape[1], bits, 64)
			if got, want := u32s(codes), ref[name+".weight"].Data; !slices.Equal(got, want) {
				t.Errorf("q%d %s: codes differ from the reference", bits, name)
			}
			if got, want := u16s(scales), ref[name+".scales"].Data; !slices.Equal(got, want) {
				t.Errorf("q%d %s: scales differ from the reference", bits, name)
			}
			if got, want := u16s(biases), ref[name+".biases"].Data; !slices.Equal(got, want) {
				t.Errorf("q%d %s: biases differ from the reference", bits, name)
			}
		}
	}
}

// TestQuantizeRoundTrip packs random rows at every width and group size and checks
// that dequantizing gives back values within half a step of the input.
func TestQuantizeRoundTrip(t *testing.T) {
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, group := range []int{32, 64, 128} {
			rows, cols := 3, 2*group
			w := make([]float32, rows*cols)
			for i := range w {
				w[i] = float32((i*7919)%1000)/500 - 1
			}
			codes, sb, bb := quantizeRows(w, rows, cols, bits, group)
			q := &cpu.QMatrix{Bits: bits, GroupSize: group, W: codes, Scales: widenBF16(sb), Biases: widenBF16(bb)}
			row := make([]float32, cols)
			for r := range rows {
				q.DequantRow(row, r, cols)
				for k, v := range row {
					s := q.Scales[r*cols/group+k/group]
					if d := v - w[r*cols+k]; d > s*0.5+s*0.02+1e-2 || d < -(s*0.5+s*0.02+1e-2) {
						t.Fatalf("bits %d group %d: w[%d][%d] = %v dequantized to %v (scale %v)", bits, group, r, k, w[r*cols+k], v, s)
					}
				}
			}
		}
	}
}

func readSafetensors(t *testing.T, path string) map[string]*stTensor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := parseSafetensors(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func u32s(x []uint32) []byte {
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return b
}

func u16s(x []uint16) []byte {
	b := make([]byte, 0, 2*len(x))
	for _, v := range x {
		b = append(b, byte(v), byte(v>>8))
	}
	return b
}

// TestQuantizeOnLoad: -quant 8 of tinycode-llama (bf16) is the MLX q8 model: same
// greedy continuations as the reference q8 folder's (its quantizer is ours, bit
// for bit, see TestQuantizeMatchesReference).
func TestQuantizeOnLoad(t *testing.T) {
	for _, bits := range []int{4, 8} {
		dir := filepath.Join(refDir, map[int]string{4: "tinycode-llama-q4", 8: "tinycode-llama-q8"}[bits])
		var ref tinyRef
		b, _ := os.ReadFile(filepath.Join(dir, "ref.json"))
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		m := open(t, filepath.Join(refDir, "tinycode-llama"), Options{Threads: 2, Quant: bits}, SessionOptions{})
		logits, err := m.Forward(context.Background(), ref.Logits.InputIDs)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbs(logits, ref.Logits.LogitsLast); d > 1e-3 {
			t.Errorf("q%d on load: prompt 0 logits max-abs %g from the MLX q%d reference", bits, d, bits)
		}
	}
}

// TestQuantizeDirTensorsEqualMLX checks what ingot's quantized copy of
// tinycode-llama has in common with the reference MLX q4/q8 copies (mlx-lm's
// layout, see ../shared/testdata/ref/README.md): the same tensors (name, dtype,
// shape and bytes), the same safetensors metadata and the same config.json as
// JSON. The files themselves are not byte-identical: the safetensors header orders
// its keys and the tensors' data differently, and config.json formats numbers and
// orders the "quantization" keys differently.
func TestQuantizeDirTensorsEqualMLX(t *testing.T) {
	for _, bits := range []int{4, 8} {
		t.Run(fmt.Sprintf("bits=%d", bits), func(t *testing.T) {
			refQ := filepath.Join(refDir, fmt.Sprintf("tinycode-llama-q%d", bits))
			out := filepath.Join(t.TempDir(), "out")
			if err := QuantizeDir(context.Background(), filepath.Join(refDir, "tinycode-llama"), out, bits, 64, nil); err != nil {
				t.Fatal(err)
			}
			got, gotMeta := readSafetensorsMeta(t, filepath.Join(out, "model.safetensors"))
			want, wantMeta := readSafetensorsMeta(t, filepath.Join(refQ, "model.safetensors"))
			for _, name := range slices.Sorted(maps.Keys(want)) {
				g, w := got[name], want[name]
				switch {
				case g == nil:
					t.Errorf("%s: missing (reference: %s %v)", name, w.DType, w.Shape)
				case g.DType != w.DType || !slices.Equal(g.Shape, w.Shape):
					t.Errorf("%s: %s %v, reference %s %v", name, g.DType, g.Shape, w.DType, w.Shape)
				case !bytes.Equal(g.Data, w.Data):
					t.Errorf("%s: bytes differ from the reference's", name)
				}
			}
			for name := range got {
				if want[name] == nil {
					t.Errorf("%s: extra tensor, not in the reference file", name)
				}
			}
			if !maps.Equal(gotMeta, wantMeta) {
				t.Errorf("safetensors metadata %v, reference %v", gotMeta, wantMeta)
			}
			if g, w := readJSON(t, filepath.Join(out, "config.json")), readJSON(t, filepath.Join(refQ, "config.json")); !reflect.DeepEqual(g, w) {
				t.Errorf("config.json differs from the reference's as JSON:\n%v\nwant\n%v", g, w)
			}
		})
	}
}

func readSafetensorsMeta(t *testing.T, path string) (map[string]*stTensor, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, meta, err := parseSafetensors(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return ts, meta
}

func readJSON(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestQuantizeDir writes a q4 copy of tinycode-llama and checks that it carries the
// tokenizer files, loads to the same logits as quantize-on-load, and that
// QuantizeDir refuses to overwrite it.
func TestQuantizeDir(t *testing.T) {
	src := filepath.Join(refDir, "tinycode-llama")
	out := filepath.Join(t.TempDir(), "tiny-q4")
	var last int64
	if err := QuantizeDir(context.Background(), src, out, 4, 64, func(done, total int64) { last = total - done }); err != nil {
		t.Fatal(err)
	}
	if last != 0 {
		t.Errorf("progress ended %d bytes short of the total", last)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not copied: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, quantTempMarker)); err == nil {
		t.Errorf("%s left in the output", quantTempMarker)
	}
	a := open(t, out, Options{Threads: 1}, SessionOptions{})
	b := open(t, src, Options{Threads: 1, Quant: 4}, SessionOptions{})
	ids := []int32{4094, 1, 2, 3, 4, 5}
	la, _ := a.Forward(context.Background(), ids)
	la = slices.Clone(la)
	lb, _ := b.Forward(context.Background(), ids)
	if !slices.Equal(la, lb) {
		t.Errorf("written q4 model and quantize-on-load differ: max-abs %g", maxAbs(la, lb))
	}
	if err := QuantizeDir(context.Background(), src, out, 4, 64, nil); err == nil {
		t.Error("quantizing onto an existing directory succeeded")
	}
}

// TestQuantizeDirCancel cancels QuantizeDir before it starts and again after its
// first tensor is written: both runs return the context's error and leave nothing
// beside the output path.
func TestQuantizeDirCancel(t *testing.T) {
	src := filepath.Join(refDir, "tinycode-llama")
	for _, when := range []string{"before", "mid-write"} {
		t.Run(when, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if when == "before" {
				cancel()
			}
			var tmpSeen bool
			parent := t.TempDir()
			err := QuantizeDir(ctx, src, filepath.Join(parent, "x"), 8, 64, func(done, total int64) {
				if ctx.Err() == nil {
					m, _ := filepath.Glob(filepath.Join(parent, ".x.tmp-*", "model.safetensors"))
					tmpSeen = len(m) == 1
					cancel()
				}
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled quantize returned %v, want context.Canceled", err)
			}
			if when == "mid-write" && !tmpSeen {
				t.Error("no partial model.safetensors in a temporary directory when the run was cancelled")
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("cancelled quantize left %v", left)
			}
		})
	}
}

// TestQuantizeTensorCancel cancels the context while one large matrix is being
// quantized: quantizeTensor must stop before the matrix is done.
func TestQuantizeTensorCancel(t *testing.T) {
	const rows, cols = 4 * quantizeBlock, 64
	st := &stTensor{Name: "w.weight", DType: "BF16", Shape: []int{rows, cols}, Data: make([]byte, rows*cols*2)}
	ctx := &cancelAfter{Context: context.Background(), n: 2}
	if _, _, _, err := quantizeTensor(ctx, st, 4, 64); !errors.Is(err, context.Canceled) {
		t.Errorf("quantizeTensor with the context cancelled after its first block returned %v, want context.Canceled", err)
	}
	if _, _, _, err := quantizeTensor(context.Background(), st, 4, 64); err != nil {
		t.Error(err)
	}
}

// cancelAfter is a context whose Err reports context.Canceled from its nth call on.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

// quantizeRowsRef is quantizeRows as first written: one code at a time into
// the bitstream, the spec packCodes's fast paths must match.
func quantizeRowsRef(w []float32, rows, cols, bits, group int) (codes []uint32, scales, biases []uint16) {
	words := cols * bits / 32
	groups := cols / group
	codes = make([]uint32, rows*words)
	scales, biases = make([]uint16, rows*groups), make([]uint16, rows*groups)
	maxQ := float32(int(1)<<bits - 1)
	for r := range rows {
		row, out := w[r*cols:(r+1)*cols], codes[r*words:(r+1)*words]
		for g := range groups {
			x := row[g*group : (g+1)*group]
			lo, hi := x[0], x[0]
			for _, v := range x {
				lo, hi = min(lo, v), max(hi, v)
			}
			sb, bb := cpu.F32ToBF16((hi-lo)/maxQ), cpu.F32ToBF16(lo)
			scales[r*groups+g], biases[r*groups+g] = sb, bb
			s, b := cpu.BF16ToF32(sb), cpu.BF16ToF32(bb)
			for j, v := range x {
				var q float32
				if s != 0 {
					q = float32(math.RoundToEven(float64((v - b) / s)))
				}
				q = min(max(q, 0), maxQ)
				bit := (g*group + j) * bits
				out[bit/32] |= uint32(q) << (bit % 32)
				if bit%32+bits > 32 {
					out[bit/32+1] |= uint32(q) >> (32 - bit%32)
				}
			}
		}
	}
	return codes, scales, biases
}

// quantTestMatrix is rows × cols of N(0, 1)-ish values with a constant group
// (scale 0) and values on half steps (ties) in row 0.
func quantTestMatrix(rows, cols int) []float32 {
	r := rand.New(rand.NewPCG(5, 6))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	for j := range min(cols, 32) {
		w[j] = 0.25 // a constant group: scale 0
	}
	for j := 32; j < min(cols, 64); j++ {
		w[j] = float32(j%4) * 0.5 // codes on exact halves of a step
	}
	return w
}

// TestQuantizeRowsPacking checks quantizeRows (its 4- and 8-bit packing fast
// paths and the bitstream of the other widths) against quantizeRowsRef.
func TestQuantizeRowsPacking(t *testing.T) {
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, group := range []int{32, 64, 128} {
			rows, cols := 5, 3*group
			w := quantTestMatrix(rows, cols)
			c, s, b := quantizeRows(w, rows, cols, bits, group)
			rc, rs, rb := quantizeRowsRef(w, rows, cols, bits, group)
			if !slices.Equal(c, rc) || !slices.Equal(s, rs) || !slices.Equal(b, rb) {
				t.Errorf("bits %d group %d: codes, scales or biases differ from quantizeRowsRef", bits, group)
			}
		}
	}
}

// TestQuantizeStored quantizes stored f32, f16 and bf16 tensors (also at an odd
// offset, as safetensors allows) in blocks on three goroutines: the same bits
// as quantizeRows of the widened whole, and release is given every stored
// byte once.
func TestQuantizeStored(t *testing.T) {
	const rows, cols = 3*quantizeBlock + 5, 256
	w := quantTestMatrix(rows, cols)
	for _, dt := range []string{"F32", "F16", "BF16"} {
		for _, off := range []int{0, 1} {
			size := map[string]int{"F32": 4, "F16": 2, "BF16": 2}[dt]
			buf := make([]byte, off+rows*cols*size)
			data := buf[off:]
			for i, v := range w {
				switch dt {
				case "F32":
					binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
				case "F16":
					binary.LittleEndian.PutUint16(data[2*i:], cpu.F32ToF16(v))
				case "BF16":
					binary.LittleEndian.PutUint16(data[2*i:], cpu.F32ToBF16(v))
				}
			}
			st := &stTensor{Name: "w.weight", DType: dt, Shape: []int{rows, cols}, Data: data}
			x, _ := toF32(st)
			for _, bits := range []int{3, 4, 8} {
				var mu sync.Mutex
				released := 0
				c, s, b, err := quantizeStored(context.Background(), st, rows, cols, bits, 64, 3, func(p []byte) {
					mu.Lock()
					released += len(p)
					mu.Unlock()
				})
				if err != nil {
					t.Fatal(err)
				}
				rc, rs, rb := quantizeRows(x, rows, cols, bits, 64)
				if !slices.Equal(c, rc) || !slices.Equal(s, rs) || !slices.Equal(b, rb) {
					t.Errorf("%s at offset %d, %d bits: differs from quantizeRows of the whole", dt, off, bits)
				}
				if released != len(data) {
					t.Errorf("%s at offset %d, %d bits: released %d bytes, want %d", dt, off, bits, released, len(data))
				}
			}
		}
	}
}

// TestGroupRange checks groupRange against Go's min and max where they differ
// from plain comparisons: NaNs and zeros of either sign, anywhere in a group.
func TestGroupRange(t *testing.T) {
	nan, negNaN, negZero := float32(math.NaN()), math.Float32frombits(0xffc00000), float32(math.Copysign(0, -1))
	for _, x := range [][]float32{
		{1, 2, 3, -4}, {0, negZero, 1}, {negZero, 0, 1}, {-1, 0, negZero}, {-1, negZero, 0},
		{nan, 1, 2}, {1, nan, 2}, {1, 2, nan}, {1, negNaN, -2}, {float32(math.Inf(-1)), float32(math.Inf(1))},
		{0, 0}, {negZero}, {5}, {3, 1, 2, -7, 9, 0.5, -0.25},
	} {
		lo, hi := groupRange(x)
		wlo, whi := x[0], x[0]
		for _, v := range x {
			wlo, whi = min(wlo, v), max(whi, v)
		}
		if math.Float32bits(lo) != math.Float32bits(wlo) && !(lo != lo && wlo != wlo) ||
			math.Float32bits(hi) != math.Float32bits(whi) && !(hi != hi && whi != whi) {
			t.Errorf("groupRange(%v) = %v, %v; Go's min and max give %v, %v", x, lo, hi, wlo, whi)
		}
	}
}

// countdownCtx is a context whose Err reports context.Canceled from its nth
// call on, safe for the concurrent calls of a parallel load.
type countdownCtx struct {
	context.Context
	n atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestLoadQuantCancel cancels a load that quantizes on load once it has
// started quantizing: Load returns context.Canceled after the matrices in
// flight stop.
func TestLoadQuantCancel(t *testing.T) {
	ctx := &countdownCtx{Context: context.Background()}
	ctx.n.Store(3)
	m, err := Load(ctx, filepath.Join(refDir, "tinycode-llama"), Options{Threads: 2, Quant: 4})
	if !errors.Is(err, context.Canceled) {
		if m != nil {
			m.Close()
		}
		t.Fatalf("Load with the context cancelled while quantizing: %v, want context.Canceled", err)
	}
}

// TestLoadGroup: after a load fails, run starts nothing more and returns that
// error, and wait returns it once the loads running are done.
func TestLoadGroup(t *testing.T) {
	g := newLoadGroup(2)
	boom := errors.New("boom")
	var done atomic.Int64
	if err := g.run(func() error { done.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := g.run(func() error { done.Add(1); return boom }); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(); err != boom || done.Load() != 2 {
		t.Fatalf("wait = %v after %d loads, want boom after 2", err, done.Load())
	}
	if err := g.run(func() error { done.Add(1); return nil }); err != boom {
		t.Errorf("run after a failure = %v, want boom", err)
	}
	if err := g.wait(); err != boom || done.Load() != 2 {
		t.Errorf("wait = %v after %d loads, want boom and no load started after the failure", err, done.Load())
	}
}
