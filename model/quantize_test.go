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
