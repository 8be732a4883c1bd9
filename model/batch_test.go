package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-llm/ingot/kernels"
)

// TestBatchInvariantTinycode decodes the 8 reference prompts of the trained
// model (bf16, q4, q8) greedily, each alone with one-token Forward steps and
// all together in one Batch (shuffled each step, leaving at different
// steps), and compares every step's logits bit for bit.
func TestBatchInvariantTinycode(t *testing.T) {
	for _, name := range []string{"tinycode-llama", "tinycode-llama-q4", "tinycode-llama-q8"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatal(err)
			}
			var ref tinyRef
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			m, err := Load(context.Background(), dir, Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var prompts [][]int32
			for _, p := range ref.Prompts {
				prompts = append(prompts, p.PromptIDs)
			}
			checkBatchInvariant(t, m, prompts, SessionOptions{Context: 256}, 0)
		})
	}
}

// TestBatchInvariantSynthetic does the same on small random-weight models:
// q4 (a Qwen3 with QK-norm), bf16 (a Qwen2 with q/k/v biases, an FFN width
// that is no multiple of the vector width, an f16 KV cache) and f32 (Gemma 2:
// sandwich norms, GeGLU, softcaps), with a vocabulary that is no multiple of
// the kernels' four-row blocks.
func TestBatchInvariantSynthetic(t *testing.T) {
	for _, tc := range []struct {
		name string
		dt   kernels.DType
		kv   kernels.DType
		js   string
	}{
		{"q4", kernels.DTypeQ4, kernels.DTypeF32, `{"architectures":["Qwen3ForCausalLM"],"hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
			"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,"vocab_size":1003,"tie_word_embeddings":true,"rms_norm_eps":1e-6,"rope_theta":1000000}`},
		{"bf16", kernels.DTypeBF16, kernels.DTypeF16, `{"architectures":["Qwen2ForCausalLM"],"hidden_size":192,"intermediate_size":200,"num_hidden_layers":2,
			"num_attention_heads":6,"num_key_value_heads":2,"vocab_size":1001,"tie_word_embeddings":false,"rms_norm_eps":1e-6,"rope_theta":1000000}`},
		{"f32", kernels.DTypeF32, kernels.DTypeF32, `{"architectures":["Gemma2ForCausalLM"],"hidden_size":128,"intermediate_size":264,"num_hidden_layers":2,
			"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":997,"rms_norm_eps":1e-6,"rope_theta":10000,
			"attn_logit_softcapping":50,"final_logit_softcapping":30,"query_pre_attn_scalar":32,"sliding_window":4,"hidden_activation":"gelu_pytorch_tanh"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := synthModel(t, tc.js, tc.dt)
			r := rand.New(rand.NewPCG(5, 6))
			prompts := make([][]int32, 8)
			for i := range prompts {
				prompts[i] = make([]int32, 1+r.IntN(40))
				for j := range prompts[i] {
					prompts[i][j] = int32(r.IntN(m.Config.VocabSize))
				}
			}
			checkBatchInvariant(t, m, prompts, SessionOptions{Context: 128, KV: tc.kv}, 0)
		})
	}
}

// synthModel builds a model of config js with Synthetic's random weights of
// dtype dt, on a CPU backend of two threads.
func synthModel(t *testing.T, js string, dt kernels.DType) *Model {
	t.Helper()
	cfg, err := parseConfig([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	tied := cfg.TieEmbeddings != nil && *cfg.TieEmbeddings
	l := &loader{used: map[string]bool{}, synth: &synthetic{dt: dt, tied: tied, rng: rand.NewPCG(1, 2)}}
	m, err := build(cfg, nil, l, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// checkBatchInvariant decodes each prompt greedily for a few steps alone and
// then all together in a Batch, and wants the same logits at every step: the
// same bits with tol 0, else within tol. Sequence i decodes 3+i steps, so the
// batch shrinks from len(prompts) to 1 as they end.
func checkBatchInvariant(t *testing.T, m *Model, prompts [][]int32, so SessionOptions, tol float64) {
	t.Helper()
	ctx := context.Background()
	steps := func(i int) int { return 3 + i }
	alone := make([][][]float32, len(prompts)) // [sequence][step] logits
	for i, p := range prompts {
		s, err := m.NewSession(so)
		if err != nil {
			t.Fatal(err)
		}
		logits, err := s.Forward(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for range steps(i) {
			tok := int32(argmax(logits))
			if logits, err = s.Forward(ctx, []int32{tok}); err != nil {
				t.Fatal(err)
			}
			alone[i] = append(alone[i], append([]float32(nil), logits...))
		}
		s.Close()
	}
	bt, err := m.NewBatch(len(prompts))
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	ss := make([]*Session, len(prompts))
	next := make([]int32, len(prompts))
	for i, p := range prompts {
		if ss[i], err = m.NewSession(so); err != nil {
			t.Fatal(err)
		}
		defer ss[i].Close()
		logits, err := ss[i].Forward(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		next[i] = int32(argmax(logits))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for step := 0; ; step++ {
		var live []int
		for i := range prompts {
			if step < steps(i) {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			break
		}
		r.Shuffle(len(live), func(a, b int) { live[a], live[b] = live[b], live[a] })
		in, toks := make([]*Session, len(live)), make([]int32, len(live))
		for j, i := range live {
			in[j], toks[j] = ss[i], next[i]
		}
		out, err := bt.Step(ctx, in, toks)
		if err != nil {
			t.Fatal(err)
		}
		for j, i := range live {
			if k := firstDiff(out[j], alone[i][step], tol); k >= 0 {
				t.Fatalf("sequence %d, step %d, in a batch of %d (row %d): logit %d is %v, alone %v",
					i, step, len(live), j, k, out[j][k], alone[i][step][k])
			}
			next[i] = int32(argmax(out[j]))
		}
	}
}

// firstDiff returns the first index where a and b differ in bits (tol 0)
// or by more than tol, or -1.
func firstDiff(a, b []float32, tol float64) int {
	for i := range b {
		if tol == 0 && math.Float32bits(a[i]) != math.Float32bits(b[i]) || tol > 0 && !(math.Abs(float64(a[i]-b[i])) <= tol) {
			return i
		}
	}
	if len(a) != len(b) {
		return len(b)
	}
	return -1
}

// TestBatchMetal runs Batch steps on the Metal kernels (the MSL
// interpreter; the GPU with INGOT_TEST_BACKEND): the logits are those of
// one-token steps within 1e-3, as TestTinycode holds the backends to
// transformers', whatever the device's MatVecs (the Apple-shaped small-batch
// mat-vec, whose bits kernels.TestMetalBatchInvariant checks, or MatMuls on
// NVIDIA-shaped kernels).
func TestBatchMetal(t *testing.T) {
	b := metalBackend(t)
	m, err := Load(context.Background(), filepath.Join(refDir, "tinycode-llama-q4"), Options{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompts := [][]int32{{4094, 755, 923}, {4094, 12, 13, 14, 15, 16, 17}, {4094, 1000}, {4094, 7, 300, 301}}
	checkBatchInvariant(t, m, prompts, SessionOptions{Context: 64}, 1e-3)
}

// TestBatchErrors: what a Batch refuses, each with an error naming why.
func TestBatchErrors(t *testing.T) {
	m := synthModel(t, `{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":1,
		"num_attention_heads":2,"num_key_value_heads":1,"vocab_size":100,"rms_norm_eps":1e-6}`, kernels.DTypeF32)
	ctx := context.Background()
	if _, err := m.NewBatch(0); err == nil || !strings.Contains(err.Error(), "batch size") {
		t.Errorf("NewBatch(0): %v", err)
	}
	bt, err := m.NewBatch(2)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	s, err := m.NewSession(SessionOptions{Context: 4})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := m.NewSession(SessionOptions{Context: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ss   []*Session
		toks []int32
		want string
	}{
		{"none", nil, nil, "batch step of 0 sessions"},
		{"too many", []*Session{s, s2, s}, []int32{1, 2, 3}, "batch step of 3 sessions"},
		{"tokens", []*Session{s}, []int32{1, 2}, "with 2 tokens"},
		{"twice", []*Session{s, s}, []int32{1, 2}, "session 1: model: session busy"},
		{"vocabulary", []*Session{s, s2}, []int32{1, 100}, "session 1: model: token 100 is outside the vocabulary"},
	} {
		if _, err := bt.Step(ctx, tc.ss, tc.toks); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if len(s.Cached()) != 0 || len(s2.Cached()) != 0 {
		t.Fatalf("a refused step ran: %d, %d tokens cached", len(s.Cached()), len(s2.Cached()))
	}
	for range 4 {
		if _, err := bt.Step(ctx, []*Session{s2, s}, []int32{1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bt.Step(ctx, []*Session{s}, []int32{3}); !errors.Is(err, ErrContextFull) {
		t.Errorf("full context: %v", err)
	}
	s.Truncate(0)
	s2.Truncate(0)
	s2.Close()
	if _, err := bt.Step(ctx, []*Session{s, s2}, []int32{1, 2}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed session: %v", err)
	}
	m.Close()
	if _, err := bt.Step(ctx, []*Session{s}, []int32{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed model: %v", err)
	}

	moe := synthModel(t, `{"architectures":["Qwen3MoeForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":1,
		"num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,"vocab_size":100,"rms_norm_eps":1e-6,
		"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"decoder_sparse_step":1}`, kernels.DTypeF32)
	if _, err := moe.NewBatch(2); err == nil || !strings.Contains(err.Error(), "layer 0 is a mixture of experts") {
		t.Errorf("MoE: %v", err)
	}
}

// BenchmarkBatchStep times a decode step of B sessions in one Batch (B = 1,
// 2, 4, 8) and, as B=0, a one-token Forward of one session, each session at
// 128 tokens: tinycode-llama, or INGOT_BENCH_SHAPE's synthetic model in
// INGOT_BENCH_DTYPE (default q4) on INGOT_BENCH_THREADS threads (default 2).
// It reports tok/s and the step's milliseconds in mat-muls and attention.
func BenchmarkBatchStep(b *testing.B) {
	ctx := context.Background()
	threads := 2
	if v := os.Getenv("INGOT_BENCH_THREADS"); v != "" {
		fmt.Sscan(v, &threads)
	}
	tb := &timedCPU{CPU: kernels.NewCPU(threads)}
	defer tb.Close()
	o := Options{Backend: tb}
	var m *Model
	var err error
	if shape := os.Getenv("INGOT_BENCH_SHAPE"); shape != "" {
		dt := kernels.DTypeQ4
		if v := os.Getenv("INGOT_BENCH_DTYPE"); v != "" {
			dts := map[string]kernels.DType{"q4": kernels.DTypeQ4, "q8": kernels.DTypeQ8, "bf16": kernels.DTypeBF16, "f16": kernels.DTypeF16, "f32": kernels.DTypeF32}
			var ok bool
			if dt, ok = dts[v]; !ok {
				b.Fatalf("INGOT_BENCH_DTYPE %q: want q4, q8, bf16, f16 or f32", v)
			}
		}
		m, err = Synthetic(ctx, shape, dt, 1, o)
	} else {
		m, err = Load(ctx, filepath.Join(refDir, "tinycode-llama"), o)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const prompt = 128
	r := rand.New(rand.NewPCG(1, 2))
	ss, toks := make([]*Session, 8), make([]int32, 8)
	for i := range ss {
		if ss[i], err = m.NewSession(SessionOptions{Context: 512}); err != nil {
			b.Fatal(err)
		}
		p := make([]int32, prompt)
		for j := range p {
			p[j] = int32(r.IntN(m.Config.VocabSize))
		}
		if _, err := ss[i].Forward(ctx, p); err != nil {
			b.Fatal(err)
		}
		toks[i] = int32(r.IntN(m.Config.VocabSize))
	}
	bt, err := m.NewBatch(8)
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	for _, B := range []int{0, 1, 2, 4, 8} {
		b.Run(fmt.Sprintf("B=%d", B), func(b *testing.B) {
			tb.mm, tb.attn = 0, 0
			for b.Loop() {
				for _, s := range ss {
					s.Truncate(prompt) // every step at the same depth
				}
				if B == 0 {
					_, err = ss[0].Forward(ctx, toks[:1])
				} else {
					_, err = bt.Step(ctx, ss[:B], toks[:B])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(max(B, 1))*n/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(tb.mm.Seconds()*1e3/n, "mm-ms/op")
			b.ReportMetric(tb.attn.Seconds()*1e3/n, "attn-ms/op")
		})
	}
}

// timedCPU is the CPU backend adding up the time of its streams' mat-muls
// and attention.
type timedCPU struct {
	*kernels.CPU
	mm, attn time.Duration
	root     *timedCPU
}

func (t *timedCPU) top() *timedCPU {
	if t.root != nil {
		return t.root
	}
	return t
}

func (t *timedCPU) NewStream() (kernels.Backend, error) {
	s, err := t.CPU.NewStream()
	if err != nil {
		return nil, err
	}
	return &timedCPU{CPU: s.(*kernels.CPU), root: t.top()}, nil
}

func (t *timedCPU) MatMul(dst, x, w *kernels.Tensor) {
	defer t.since(&t.top().mm, time.Now())
	t.CPU.MatMul(dst, x, w)
}

func (t *timedCPU) MatMuls(dst []*kernels.Tensor, x *kernels.Tensor, w []*kernels.Tensor) {
	defer t.since(&t.top().mm, time.Now())
	t.CPU.MatMuls(dst, x, w)
}

func (t *timedCPU) MatVecs(dst []*kernels.Tensor, x *kernels.Tensor, w []*kernels.Tensor) {
	defer t.since(&t.top().mm, time.Now())
	t.CPU.MatVecs(dst, x, w)
}

// MatMulGLU is the CPU's own (MatMuls, then GLU), its mat-muls timed.
func (t *timedCPU) MatMulGLU(dst, u, x, gate, up *kernels.Tensor, act kernels.Act) {
	d, w := [2]*kernels.Tensor{dst, u}, [2]*kernels.Tensor{gate, up}
	t.MatMuls(d[:], x, w[:])
	t.CPU.GLU(dst, dst, u, act)
}

func (t *timedCPU) Attention(dst, q, k, v *kernels.Tensor, pos int, p *kernels.AttnParams) {
	defer t.since(&t.top().attn, time.Now())
	t.CPU.Attention(dst, q, k, v, pos, p)
}

func (t *timedCPU) since(d *time.Duration, start time.Time) { *d += time.Since(start) }

// TestBatchStepAllocs: a Batch step allocates nothing once its views are
// cut and the sessions' token lists have room.
func TestBatchStepAllocs(t *testing.T) {
	m := synthModel(t, `{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
		"num_attention_heads":2,"num_key_value_heads":1,"vocab_size":100,"rms_norm_eps":1e-6}`, kernels.DTypeBF16)
	ctx := context.Background()
	bt, err := m.NewBatch(3)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	var ss []*Session
	for range 3 {
		s, err := m.NewSession(SessionOptions{Context: 256})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Forward(ctx, []int32{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		s.tokens = append(make([]int32, 0, 256), s.tokens...)
		ss = append(ss, s)
	}
	toks := []int32{4, 5, 6}
	if a := testing.AllocsPerRun(50, func() {
		if _, err := bt.Step(ctx, ss, toks); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocs per step", a)
	}
}
