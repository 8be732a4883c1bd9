package kernels_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/model"
)

// hideTopK is a backend that is not a kernels.TopKer: sampling downloads the
// logits and selects the top k on the host.
type hideTopK struct{ kernels.Backend }

func (b hideTopK) NewStream() (kernels.Backend, error) {
	s, err := b.Backend.NewStream()
	return hideTopK{s}, err
}

// TestMetalTopKSampling samples the trained tiny model on metal-emu with the
// top k selected on the device and on the host (the same kernels otherwise):
// with the same seed the tokens must be identical, and the device path must
// read back k (value, id) pairs per decoded token instead of V logits. With a
// repeat penalty, which changes logits before top-k, both download.
func TestMetalTopKSampling(t *testing.T) {
	dir := filepath.Join(refDir, "tinycode-llama-q4")
	prompt := []int32{4094, 1, 2}
	const tokens, V = 8, 4096
	dev := load(t, dir, metalEmu(t))
	mb := dev.Backend().(*kernels.Metal)
	host := load(t, dir, hideTopK{metalEmu(t)})
	for _, o := range []model.GenerateOptions{
		{Temperature: 0.8, TopK: 40, Seed: 1},
		{Temperature: 1.5, TopK: 64, TopP: 0.9, Seed: 2},
		{Temperature: 1, TopK: 1, Seed: 3},
		{Temperature: 0.7, TopK: 20, MinP: 0.05, Seed: 4},
		{Temperature: 1.2, TopK: 40, RepeatPenalty: 1.3, Seed: 5}, // downloads on both
	} {
		o.MaxTokens, o.IgnoreEOS = tokens, true
		t.Run(fmt.Sprintf("T=%g/k=%d/p=%g/minp=%g/penalty=%g", o.Temperature, o.TopK, o.TopP, o.MinP, o.RepeatPenalty), func(t *testing.T) {
			gen := func(m *model.Session) []int32 {
				m.Truncate(0)
				r, err := m.Generate(context.Background(), prompt, o, nil)
				if err != nil {
					t.Fatal(err)
				}
				return ids(r.Tokens)
			}
			want := gen(host)
			s0 := mb.Stats()
			got := gen(dev)
			if !slices.Equal(got, want) {
				t.Errorf("tokens with top-k on the device\n%v\nwant (on the host)\n%v", got, want)
			}
			read := mb.Stats().ReadBytes - s0.ReadBytes
			wantRead := int64(4*V + (tokens-1)*8*o.TopK) // prefill logits, then k pairs per token
			if o.RepeatPenalty != 0 {
				wantRead = int64(tokens * 4 * V)
			}
			if read != wantRead {
				t.Errorf("read back %d bytes for %d tokens, want %d", read, tokens, wantRead)
			}
			t.Logf("%v; %d bytes read back", got, read)
		})
	}
}
