package kernels_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/model"
)

// pipeRecorder is a device that records the kernels its users ask for.
type pipeRecorder struct {
	metal.Device
	mu    sync.Mutex
	names map[string]bool
}

func (d *pipeRecorder) Pipeline(name string) (metal.Pipeline, error) {
	d.mu.Lock()
	d.names[name] = true
	d.mu.Unlock()
	return d.Device.Pipeline(name)
}

func (d *pipeRecorder) asked(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.names[name]
}

// metalEmuNV opens the metal-emu backend with the NVIDIA-shaped kernels
// forced (with INGOT_TEST_BACKEND=cuda: the cuda backend, which runs them
// anyway), its device recording the kernels asked for.
func metalEmuNV(t *testing.T) (kernels.Backend, *pipeRecorder) {
	t.Helper()
	var dev metal.Device
	own := false // an interpreter opened here, released here
	switch name := os.Getenv("INGOT_TEST_BACKEND"); name {
	case "", "metal-emu":
		msltest.Require(t)
		d, err := kernels.OpenEmulator(2)
		if err != nil {
			t.Fatal(err)
		}
		dev, own = d, true
	default: // the GPU backend's device, released by that backend
		b := metalEmu(t)
		dev = b.(*kernels.Metal).Device()
	}
	rec := &pipeRecorder{Device: dev, names: map[string]bool{}}
	m, err := kernels.NewMetalNV(rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		if own {
			dev.Release()
		}
	})
	return m, rec
}

// TestMetalTinycodeNV runs the trained tiny model's MLX q4 and q8 copies with
// the NVIDIA-shaped mat-vecs (fused q/k/v and gate/up, lm_head on the tied
// embedding table; q4 on the integer-dot ones, q8 on the float ones): prompt
// logits within 1e-3 of transformers, greedy
// continuations equal to transformers' ids and, for a longer one, to the exact
// CPU reference's.
func TestMetalTinycodeNV(t *testing.T) {
	tokens, long := 16, 48
	if testing.Short() {
		tokens, long = 8, 12
	}
	for _, c := range []struct {
		name, nv, apple string
		always          bool // the integer-dot mat-vecs everywhere (INGOT_NV_INT=1)
	}{
		{"tinycode-llama-q4", "matvec_q4_f32_nvi_bf16sb", "matvec_q4_f32", true},
		{"tinycode-llama-q8", "matvec_q8_f32_nv_bf16sb_xs", "matvec_q8_f32", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(refDir, c.name)
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatalf("reference data missing: %v", err)
			}
			var ref tinyRef
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			be, rec := metalEmuNV(t)
			if c.always {
				kernels.NVIntAlways(be.(*kernels.Metal))
			}
			m := load(t, dir, be)
			logits, err := m.Forward(context.Background(), ref.Logits.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			if _, ma := nmse(logits, ref.Logits.LogitsLast); ma > 1e-3 {
				t.Errorf("prompt logits max-abs %.3g > 1e-3 against transformers", ma)
			}
			p := ref.Prompts[0]
			m.Truncate(0)
			r, err := m.Generate(context.Background(), p.PromptIDs, model.GenerateOptions{MaxTokens: tokens}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			for _, tk := range r.Tokens {
				got = append(got, tk.ID)
			}
			if want := p.OutputIDs[:len(got)]; !slices.Equal(got, want) || len(got) < min(tokens, len(p.OutputIDs)) && r.Stop != model.StopEOS {
				t.Errorf("greedy ids\n got %v\nwant %v", got, p.OutputIDs[:min(tokens, len(p.OutputIDs))])
			}

			prompt := []int32{4094, 1, 2}
			gen := func(b kernels.Backend) []int32 {
				s := loadCtx(t, dir, b, len(prompt)+long)
				r, err := s.Generate(context.Background(), prompt, model.GenerateOptions{MaxTokens: long, IgnoreEOS: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				var ids []int32
				for _, tk := range r.Tokens {
					ids = append(ids, tk.ID)
				}
				return ids
			}
			cb := kernels.NewCPU(2)
			defer cb.Close()
			want := gen(exactCPU{cb})
			if got := gen(be); !slices.Equal(got, want) || len(got) != long {
				t.Errorf("long greedy ids\n got %v\nwant %v", got, want)
			}
			if !rec.asked(c.nv) || rec.asked(c.apple) {
				t.Errorf("kernels asked for: %s %v, %s %v; want the NVIDIA-shaped one only", c.nv, rec.asked(c.nv), c.apple, rec.asked(c.apple))
			}
		})
	}
}
