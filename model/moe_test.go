package model

import (
	"context"
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
