package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/model"
)

// benchModels returns the model and draft directories: INGOT_BENCH_MODEL and
// INGOT_BENCH_DRAFT, else tinycode-llama and its q4 copy from the reference
// data beside the checkout; it skips when there is none.
func benchModels(b *testing.B) (target, draft string) {
	target, draft = os.Getenv("INGOT_BENCH_MODEL"), os.Getenv("INGOT_BENCH_DRAFT")
	if target == "" {
		ref := filepath.Join("..", "..", "shared", "testdata", "ref")
		target, draft = filepath.Join(ref, "tinycode-llama"), filepath.Join(ref, "tinycode-llama-q4")
	}
	if _, err := os.Stat(target); err != nil {
		b.Skip("no model: set INGOT_BENCH_MODEL (and INGOT_BENCH_DRAFT)")
	}
	return target, draft
}

func benchSession(b *testing.B, dir string, ctx int) *model.Session {
	m, err := model.Load(context.Background(), dir, model.Options{Threads: benchThreads})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	s, err := m.NewSession(model.SessionOptions{Context: ctx})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSpeculative decodes 128 greedy tokens after each prompt (tinycode's
// 8 reference prompts, or INGOT_BENCH_PROMPT_IDS: "1,2,3;4,5") plainly, with
// the draft model and with prompt lookup, and reports decode tok/s (and per
// CPU second, which other processes on the machine disturb less) and the
// fraction of drafted tokens accepted:
//
//	go test ./bench -run - -bench Speculative -count 5 | benchstat -
func BenchmarkSpeculative(b *testing.B) {
	target, draftDir := benchModels(b)
	s := benchSession(b, target, 512)
	prompts := benchPrompts(b, target)
	o := model.GenerateOptions{MaxTokens: 128, IgnoreEOS: true}
	modes := []struct {
		name string
		sp   *model.Speculation
	}{{"plain", nil}}
	for _, k := range []int{2, 4, 8} {
		modes = append(modes, struct {
			name string
			sp   *model.Speculation
		}{fmt.Sprintf("lookup/k=%d", k), &model.Speculation{Tokens: k}})
	}
	if draftDir != "" {
		d := benchSession(b, draftDir, 512)
		for _, k := range []int{2, 4, 8} {
			modes = append(modes, struct {
				name string
				sp   *model.Speculation
			}{fmt.Sprintf("draft/k=%d", k), &model.Speculation{Draft: d, Tokens: k}})
		}
	}
	ctx := context.Background()
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			var toks, drafted, accepted int
			var secs float64
			cpu0 := cpuTime()
			for b.Loop() {
				for _, prompt := range prompts {
					s.Truncate(0)
					var r *model.Result
					var err error
					if m.sp == nil {
						r, err = s.Generate(ctx, prompt, o, nil)
					} else {
						r, err = s.GenerateSpeculative(ctx, prompt, o, *m.sp, nil)
					}
					if err != nil {
						b.Fatal(err)
					}
					toks += r.DecodeSteps
					secs += r.DecodeDuration.Seconds()
					drafted += r.Drafted
					accepted += r.Accepted
				}
			}
			b.ReportMetric(float64(toks)/secs, "tok/s")
			b.ReportMetric(float64(toks)/(cpuTime()-cpu0), "tok/cpu-s") // with prefills: on a busy machine, the steadier figure
			if drafted > 0 {
				b.ReportMetric(float64(accepted)/float64(drafted), "accepted")
			}
		})
	}
}

// BenchmarkVerify is the cost of a verification: ForwardEach over L tokens
// (a batched forward and L head rows), per token, next to a decode step.
//
// INGOT_BENCH_SHAPE=llama-3.2-1b (a model.ShapeNames entry; q4 weights,
// or INGOT_BENCH_DTYPE q8, bf16, f32) times a synthetic model of that shape instead:
// what a verified row costs where decode reads more weights than the caches
// hold.
func BenchmarkVerify(b *testing.B) {
	var s *model.Session
	if shape := os.Getenv("INGOT_BENCH_SHAPE"); shape != "" {
		dt, ok := map[string]kernels.DType{"": kernels.DTypeQ4, "q4": kernels.DTypeQ4, "q8": kernels.DTypeQ8, "bf16": kernels.DTypeBF16, "f32": kernels.DTypeF32}[os.Getenv("INGOT_BENCH_DTYPE")]
		if !ok {
			b.Fatalf("INGOT_BENCH_DTYPE %q: want q4, q8, bf16 or f32", os.Getenv("INGOT_BENCH_DTYPE"))
		}
		m, err := model.Synthetic(context.Background(), shape, dt, 1, model.Options{Threads: benchThreads})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		if s, err = m.NewSession(model.SessionOptions{Context: 512}); err != nil {
			b.Fatal(err)
		}
	} else {
		target, _ := benchModels(b)
		s = benchSession(b, target, 512)
	}
	ctx := context.Background()
	prefix := make([]int32, 64)
	for i := range prefix {
		prefix[i] = int32(300 + i)
	}
	if _, err := s.Forward(ctx, prefix); err != nil {
		b.Fatal(err)
	}
	for _, L := range []int{1, 2, 3, 5, 9} {
		b.Run(fmt.Sprintf("rows=%d", L), func(b *testing.B) {
			toks := prefix[:L]
			cpu0 := cpuTime()
			for b.Loop() {
				s.Truncate(len(prefix))
				if err := s.ForwardEach(ctx, toks, func(int, []float32) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*L), "ns/token")
			b.ReportMetric((cpuTime()-cpu0)*1e9/float64(b.N*L), "cpu-ns/token")
		})
	}
}

// benchPrompts returns INGOT_BENCH_PROMPT_IDS's prompts, else those of the
// model directory's ref.json (the reference data's layout).
func benchPrompts(b *testing.B, dir string) [][]int32 {
	var prompts [][]int32
	if p := os.Getenv("INGOT_BENCH_PROMPT_IDS"); p != "" {
		for _, one := range strings.Split(p, ";") {
			prompts = append(prompts, splitIDs(one))
		}
		return prompts
	}
	js, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	var ref struct {
		Prompts []struct {
			IDs []int32 `json:"prompt_ids"`
		} `json:"prompts"`
	}
	if err == nil {
		err = json.Unmarshal(js, &ref)
	}
	if err != nil || len(ref.Prompts) == 0 {
		b.Skip("no prompts: set INGOT_BENCH_PROMPT_IDS")
	}
	for _, p := range ref.Prompts {
		prompts = append(prompts, p.IDs)
	}
	return prompts
}

func splitIDs(s string) []int32 {
	var ids []int32
	n, in := int32(0), false
	for _, c := range s + "," {
		if c >= '0' && c <= '9' {
			n, in = n*10+int32(c-'0'), true
		} else if in {
			ids = append(ids, n)
			n, in = 0, false
		}
	}
	return ids
}

// benchThreads is the CPU threads of the models (INGOT_BENCH_THREADS; 0: all cores).
var benchThreads = func() int {
	n := 0
	fmt.Sscan(os.Getenv("INGOT_BENCH_THREADS"), &n)
	return n
}()
