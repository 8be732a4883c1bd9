package model

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
		m, err := Load(context.Background(), filepath.Join(refDir, "tinycode-llama"), Options{Threads: 2, Quant: bits})
		if err != nil {
			t.Fatal(err)
		}
		logits, err := m.Forward(context.Background(), ref.Logits.InputIDs)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbs(logits, ref.Logits.LogitsLast); d > 1e-3 {
			t.Errorf("q%d on load: prompt 0 logits max-abs %g from the MLX q%d reference", bits, d, bits)
		}
		m.Close()
	}
}

// TestQuantizeDir writes a q4 copy of tinycode-llama, checks its tensors equal the
// reference MLX q4 file's bit for bit, that it loads to the same logits as
// quantize-on-load, and that a cancelled run leaves nothing behind.
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
	got := readSafetensors(t, filepath.Join(out, "model.safetensors"))
	want := readSafetensors(t, filepath.Join(refDir, "tinycode-llama-q4", "model.safetensors"))
	if len(got) != len(want) {
		t.Errorf("%d tensors, reference has %d", len(got), len(want))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Data, w.Data) {
			t.Errorf("tensor %s differs from the reference q4 file", name)
		}
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not copied: %v", f, err)
		}
	}
	a, err := Load(context.Background(), out, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Load(context.Background(), src, Options{Threads: 1, Quant: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	parent := t.TempDir()
	if err := QuantizeDir(ctx, src, filepath.Join(parent, "x"), 8, 64, nil); err == nil {
		t.Error("cancelled quantize succeeded")
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("cancelled quantize left %v", left)
	}
}
