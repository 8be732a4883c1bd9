package model

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/ingot-llm/ingot/kernels"
)

// qwen35Shape is a Qwen3.5-like hybrid of about 0.6B parameters (3 Gated
// DeltaNet layers to 1 gated attention layer) for timing rewinds with
// synthetic weights.
const qwen35Shape = `{"architectures":["Qwen3_5ForCausalLM"],"hidden_size":1024,"intermediate_size":3584,"num_hidden_layers":24,
	"layer_types":["linear_attention","linear_attention","linear_attention","full_attention","linear_attention","linear_attention","linear_attention","full_attention",
	"linear_attention","linear_attention","linear_attention","full_attention","linear_attention","linear_attention","linear_attention","full_attention",
	"linear_attention","linear_attention","linear_attention","full_attention","linear_attention","linear_attention","linear_attention","full_attention"],
	"num_attention_heads":8,"num_key_value_heads":2,"head_dim":256,"vocab_size":151936,"tie_word_embeddings":true,"rms_norm_eps":1e-6,
	"linear_conv_kernel_dim":4,"linear_key_head_dim":128,"linear_num_key_heads":16,"linear_num_value_heads":16,"linear_value_head_dim":128,
	"partial_rotary_factor":0.25,"max_position_embeddings":32768,"rope_parameters":{"rope_theta":10000000,"rope_type":"default","partial_rotary_factor":0.25}}`

// TestCheckpointTiming (INGOT_CK_BENCH=1) times a speculative-style rewind at
// context 512 on the synthetic Qwen3.5 shape: a 4-token verify forward, a cut
// of its last 2 tokens, and the next 1-token forward (which restores).
func TestCheckpointTiming(t *testing.T) {
	if os.Getenv("INGOT_CK_BENCH") == "" {
		t.Skip("INGOT_CK_BENCH=1 times rewinds")
	}
	ctx := context.Background()
	cfg, err := parseConfig([]byte(qwen35Shape))
	if err != nil {
		t.Fatal(err)
	}
	l := &loader{used: map[string]bool{}, synth: &synthetic{dt: kernels.DTypeQ4, tied: true, rng: rand.NewPCG(1, 2)}}
	m, err := build(cfg, nil, l, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(SessionOptions{Context: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cache %d bytes, session %d", s.CacheBytes(), s.MemoryBytes())
	toks := make([]int32, 600)
	for i := range toks {
		toks[i] = int32((i*7919 + 13) % 151936)
	}
	t0 := time.Now()
	if _, err := s.Forward(ctx, toks[:510]); err != nil {
		t.Fatal(err)
	}
	t.Logf("prefill 510: %v", time.Since(t0))
	const rounds = 3
	var plain, rewind time.Duration
	for range rounds {
		n := len(s.Cached())
		t0 = time.Now()
		if _, err := s.Forward(ctx, toks[n:n+4]); err != nil { // a verification, all accepted
			t.Fatal(err)
		}
		if _, err := s.Forward(ctx, toks[n+4:n+5]); err != nil {
			t.Fatal(err)
		}
		plain += time.Since(t0)
		n += 5
		t0 = time.Now()
		if _, err := s.Forward(ctx, toks[n:n+4]); err != nil { // a verification, 2 rows rejected
			t.Fatal(err)
		}
		s.Truncate(n + 2)
		if _, err := s.Forward(ctx, toks[n+2:n+3]); err != nil { // restores, runs again, steps
			t.Fatal(err)
		}
		rewind += time.Since(t0)
	}
	t.Logf("context ~512: verify(4) + step %v; verify(4) + cut 2 + step %v (mean of %d)", plain/rounds, rewind/rounds, rounds)
	// Speculative lookup decoding at a short context.
	// The prompt repeats its start after the model's own continuation of
	// it, so lookup drafts that continuation (accepted while the model
	// repeats itself).
	s.Truncate(0)
	cont, err := s.Generate(ctx, toks[:16], GenerateOptions{MaxTokens: 32, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompt := append(append(append([]int32{}, toks[:16]...), tokenIDsOf(cont.Tokens)...), toks[:16]...)
	o := GenerateOptions{MaxTokens: 32, IgnoreEOS: true}
	for _, spec := range []bool{false, true} {
		s.Truncate(0)
		t0 = time.Now()
		var r *Result
		if spec {
			r, err = s.GenerateSpeculative(ctx, prompt, o, Speculation{Tokens: 4}, nil)
		} else {
			r, err = s.Generate(ctx, prompt, o, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("speculative %v: %d tokens, %.2f tok/s decode (%d drafted, %d accepted), total %v", spec, len(r.Tokens), r.DecodeTokPerSec(), r.Drafted, r.Accepted, time.Since(t0))
	}
}
