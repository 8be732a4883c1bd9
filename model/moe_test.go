package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
)

// TestMoEWeightBytes: a mixture-of-experts decode step reads the router and
// only the k experts each sparse layer picked (counted by the Metal backend on
// the interpreter): the embedding row, attention, the router, k of E
// experts' three matrices (a dense layer's MLP where mlp_only_layers says
// so), and the head.
func TestMoEWeightBytes(t *testing.T) {
	msltest.Require(t)
	for _, name := range []string{"qwen3_moe", "qwen3_moe-mixed"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			b, err := kernels.Open("metal-emu", 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			s := open(t, dir, Options{Backend: b}, SessionOptions{})
			if _, err := s.Forward(context.Background(), ref.InputIDs); err != nil {
				t.Fatal(err)
			}
			st := s.b.(interface {
				Stats() kernels.Stats
				ResetStats()
			})
			st.ResetStats()
			if _, err := s.Forward(context.Background(), ref.InputIDs[:1]); err != nil {
				t.Fatal(err)
			}
			c := s.m.Config
			D, Dh, V := int64(c.HiddenSize), int64(c.HeadDim), int64(c.VocabSize)
			want := 4*V*D + 4*D // lm_head and the token's embedding row (f32)
			for i := range c.NumLayers {
				want += 4 * D * Dh * int64(2*c.NumHeads+2*c.NumKVHeads) // q, o and k, v
				if c.sparse(i) {
					want += 4 * D * int64(c.NumExperts+3*c.ExpertsPerToken*c.MoEIntermediate)
				} else {
					want += 4 * D * int64(3*c.IntermediateSize)
				}
			}
			if got := st.Stats().WeightBytes; got != want {
				t.Errorf("a decode step read %d weight bytes, want %d (the k = %d active experts of %d)", got, want, c.ExpertsPerToken, c.NumExperts)
			}
		})
	}
}

// TestMoEStacked loads qwen3_moe with its experts stacked as mlx-lm writes
// them (mlp.switch_mlp.{gate,up}_proj [E, Fe, D], down_proj [E, D, Fe]): the
// logits must equal the per-expert checkpoint's.
func TestMoEStacked(t *testing.T) {
	src, ref := readRef(t, "qwen3_moe")
	w, err := openWeights(src)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := open(t, src, Options{Threads: 1}, SessionOptions{})
	c := s.m.Config
	ts := map[string]*stTensor{}
	for name, st := range w.tensors {
		if !strings.Contains(name, ".mlp.experts.") {
			ts[name] = st
		}
	}
	for i := range c.NumLayers {
		for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
			var data []byte
			var shape []int
			for j := range c.NumExperts {
				st := w.tensors[fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s.weight", i, j, proj)]
				data, shape = append(data, st.Data...), st.Shape
			}
			ts[fmt.Sprintf("model.layers.%d.mlp.switch_mlp.%s.weight", i, proj)] = &stTensor{DType: "F32", Shape: append([]int{c.NumExperts}, shape...), Data: data}
		}
	}
	dir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json"} {
		if err := os.Symlink(filepath.Join(must(filepath.Abs(src)), f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), ts)
	want, err := s.Forward(context.Background(), ref.InputIDs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := open(t, dir, Options{Threads: 1}, SessionOptions{}).Forward(context.Background(), ref.InputIDs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("stacked experts change the logits by up to %g", maxAbs(got, want))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestIsMatrix: stored shapes that are a (rows, cols) matrix, stacked or not.
func TestIsMatrix(t *testing.T) {
	for _, c := range []struct {
		shape      []int
		rows, cols int
		want       bool
	}{
		{[]int{6, 4}, 6, 4, true}, {[]int{2, 3, 4}, 6, 4, true}, {[]int{2, 3, 4}, 6, 3, false},
		{[]int{6}, 6, 1, false}, {[]int{3, 3, 4}, 6, 4, false}, {[]int{0, 6, 4}, 0, 4, false}, {[]int{-2, -3, 4}, 6, 4, false},
	} {
		if got := isMatrix(c.shape, c.rows, c.cols); got != c.want {
			t.Errorf("isMatrix(%v, %d, %d) = %v", c.shape, c.rows, c.cols, got)
		}
	}
}

// TestMoEActiveBytes: a mixture of experts' active weight bytes are the
// model's less (E − k)/E of its experts' — on the qwen3_moe reference,
// whose layers hold 8 experts of which a token reads 2.
func TestMoEActiveBytes(t *testing.T) {
	dir, _ := readRef(t, "qwen3_moe")
	s := open(t, dir, Options{Threads: 1}, SessionOptions{})
	c := s.m.Config
	expert := int64(4 * 3 * c.MoEIntermediate * c.HiddenSize) // gate, up, down in f32
	idle := int64(c.NumLayers) * int64(c.NumExperts-c.ExpertsPerToken) * expert
	if got, want := s.m.ActiveWeightBytes(), s.m.WeightBytes()-idle; got != want {
		t.Errorf("active weight bytes %d, want %d (of %d)", got, want, s.m.WeightBytes())
	}
}

// TestShapesParse: every benchmark shape is a valid config of an architecture
// ingot runs (they are only built when benchmarked: qwen3-30b-a3b is 30B).
func TestShapesParse(t *testing.T) {
	for _, name := range ShapeNames() {
		c, err := parseConfig([]byte(shapes[name]))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, ok := architectures[c.Arch()]; !ok {
			t.Errorf("%s: architecture %s", name, c.Arch())
		}
		if _, err := newRoPE(c, 4096); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
