package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
