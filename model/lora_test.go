package model

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
)

// loraRef is the part of a lora-* ref.json the tests read, beyond refCase.
type loraRef struct {
	BaseDir        string    `json:"base_dir"`
	BaseLogitsLast []float32 `json:"base_logits_last"`
	Adapter        struct {
		Tensors map[string]struct {
			Shape []int `json:"shape"`
		} `json:"tensors"`
	} `json:"adapter"`
	Effect struct {
		MaxAbs float64 `json:"logits_maxabs_vs_base"`
	} `json:"adapter_effect"`
}

// readLoraRef returns a lora case's adapter folder, its base folder and both
// parts of its ref.json.
func readLoraRef(t testing.TB, name string) (dir, base string, ref *refCase, lr *loraRef) {
	t.Helper()
	dir, ref = readRef(t, name)
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	lr = &loraRef{}
	if err := json.Unmarshal(b, lr); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, lr.BaseDir), ref, lr
}

// adapterDirs are the two formats of one adapter.
func adapterDirs(dir string) map[string]string {
	return map[string]string{"peft": dir, "mlx": filepath.Join(dir, "mlx")}
}

// checkAllLogits runs ids through s (from an empty cache) and compares the
// logits after every position with want, within logitTol.
func checkAllLogits(t *testing.T, s *Session, ids []int32, want [][]float32) {
	t.Helper()
	s.Truncate(0)
	var worst float64
	err := s.ForwardEach(context.Background(), ids, func(i int, logits []float32) error {
		worst = max(worst, maxAbs(logits, want[i]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if worst > logitTol {
		t.Errorf("logits max-abs %g > %g over %d positions", worst, logitTol, len(ids))
	}
}

// checkGreedy checks the 16-token greedy chain ignoring EOS.
func checkGreedy(t *testing.T, s *Session, ref *refCase) {
	t.Helper()
	r, err := s.Generate(context.Background(), ref.InputIDs, GenerateOptions{MaxTokens: len(ref.GreedyNoStop), IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tokenIDsOf(r.Tokens); !slices.Equal(ids, ref.GreedyNoStop) {
		t.Errorf("greedy:\n got %v\nwant %v", ids, ref.GreedyNoStop)
	}
}

// TestLoraReference: PEFT's and mlx-lm's adapter files over the llama3 and
// qwen2 weights give PEFT's logits at every position (prefill, and
// decode through the cache) and its greedy chain; SetAdapter(nil) gives the
// base's logits again without a reload, and switching between the two
// adapters works.
func TestLoraReference(t *testing.T) {
	for _, name := range []string{"lora-llama3", "lora-qwen2"} {
		t.Run(name, func(t *testing.T) {
			dir, base, ref, lr := readLoraRef(t, name)
			want := readLogits(t, dir, ref.LogitsShape)
			s := open(t, base, Options{Threads: 2}, SessionOptions{Context: 64})
			m := s.Model()
			weights := m.WeightBytes()
			ads := map[string]*Adapter{}
			for format, d := range adapterDirs(dir) {
				a, err := m.LoadAdapter(d)
				if err != nil {
					t.Fatal(err)
				}
				if a.Format() != format {
					t.Errorf("%s: format %q", d, a.Format())
				}
				ads[format] = a
			}
			if m.WeightBytes() != weights {
				t.Errorf("WeightBytes %d after LoadAdapter, %d before", m.WeightBytes(), weights)
			}
			var wantBytes int64
			for _, ts := range lr.Adapter.Tensors {
				wantBytes += 4 * int64(ts.Shape[0]*ts.Shape[1])
			}
			for format, a := range ads {
				if a.Bytes() != wantBytes {
					t.Errorf("%s: Bytes %d, want %d (A and B in f32)", format, a.Bytes(), wantBytes)
				}
			}
			for _, format := range []string{"peft", "mlx", "peft"} { // and switch back
				t.Run(format, func(t *testing.T) {
					if err := s.SetAdapter(ads[format]); err != nil {
						t.Fatal(err)
					}
					got, err := s.Forward(context.Background(), ref.InputIDs)
					if err != nil {
						t.Fatal(err)
					}
					if d := maxAbs(got, ref.LogitsLast); d > logitTol {
						t.Errorf("prefill: last logits max-abs %g", d)
					}
					checkAllLogits(t, s, ref.InputIDs, want)
					checkGreedy(t, s, ref)
				})
			}
			if err := s.SetAdapter(nil); err != nil {
				t.Fatal(err)
			}
			if len(s.Cached()) != 0 {
				t.Errorf("SetAdapter kept %d cached tokens", len(s.Cached()))
			}
			got, err := s.Forward(context.Background(), ref.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbs(got, lr.BaseLogitsLast); d > logitTol {
				t.Errorf("base after the adapter: last logits max-abs %g", d)
			}
			if d := maxAbs(got, ref.LogitsLast); d < 10*logitTol {
				t.Errorf("base logits within %g of the adapted model's", d)
			}
		})
	}
}

// TestLoraMetal runs the PEFT adapter on the Metal kernels (the MSL
// interpreter; the GPU with INGOT_TEST_BACKEND): every position's logits and
// a few greedy tokens, the session switching to the base and back.
func TestLoraMetal(t *testing.T) {
	name := os.Getenv("INGOT_TEST_BACKEND")
	if name == "" || name == "metal-emu" {
		name = "metal-emu"
		msltest.Require(t)
	}
	b, err := kernels.Open(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dir, base, ref, lr := readLoraRef(t, "lora-llama3")
	want := readLogits(t, dir, ref.LogitsShape)
	s := open(t, base, Options{Backend: b}, SessionOptions{Context: 32, Batch: 8})
	for _, format := range []string{"peft", "mlx"} {
		a, err := s.Model().LoadAdapter(adapterDirs(dir)[format])
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetAdapter(a); err != nil {
			t.Fatal(err)
		}
		if format == "mlx" { // the greedy chain through the cache, a few steps
			r, err := s.Generate(context.Background(), ref.InputIDs, GenerateOptions{MaxTokens: 4, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ids := tokenIDsOf(r.Tokens); !slices.Equal(ids, ref.GreedyNoStop[:4]) {
				t.Errorf("greedy: got %v, want %v", ids, ref.GreedyNoStop[:4])
			}
			continue
		}
		checkAllLogits(t, s, ref.InputIDs, want) // prefill chunks of 8 rows (matmul), then the decode path
		if err := s.SetAdapter(nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.Forward(context.Background(), ref.InputIDs)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbs(got, lr.BaseLogitsLast); d > logitTol {
			t.Errorf("base: last logits max-abs %g", d)
		}
	}
}

var _ = strings.Contains
