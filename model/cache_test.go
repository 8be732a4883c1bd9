package model

import (
	"context"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// halvedKV is a backend whose CopyRows (the KV cache's writes, also inside
// RoPEStore) rounds K and V
// to halves and stores them widened in an f32 cache: what an f16 cache holds.
type halvedKV struct{ kernels.Backend }

func (b halvedKV) CopyRows(dst, src *kernels.Tensor, row int) {
	x := append([]float32(nil), src.F32()...)
	h := make([]uint16, len(x))
	cpu.F32sToF16(h, x)
	cpu.F16sToF32(x, h)
	b.Backend.CopyRows(dst, kernels.FromF32(x, src.Shape...), row)
}

// RoPEStore writes the cache through the rounding CopyRows.
func (b halvedKV) RoPEStore(q, k, v, kc, vc *kernels.Tensor, pos int, p *kernels.RoPE) {
	b.Backend.RoPE(q, pos, p)
	b.Backend.RoPE(k, pos, p)
	b.CopyRows(kc, k, pos)
	b.CopyRows(vc, v, pos)
}

func (b halvedKV) NewStream() (kernels.Backend, error) {
	s, err := b.Backend.NewStream()
	return halvedKV{s}, err
}

// TestKVCacheF16 checks that an f16 KV cache takes half the bytes and computes
// what an f32 cache of the same halves does: logits within 1e-6 through a
// prefill (the blocked attention), decode steps (one row and head at a time)
// and, on the long prompt, decode steps over 1000+ keys (split between the
// threads), on families with GQA, sliding windows, softcaps and fused qkv.
func TestKVCacheF16(t *testing.T) {
	for _, name := range []string{"llama3", "qwen2", "gemma2-swa", "phi3", "mistral", "long-llama3"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			half := open(t, dir, Options{Threads: 2}, SessionOptions{KV: kernels.DTypeF16})
			b := kernels.NewCPU(2)
			defer b.Close()
			wide := open(t, dir, Options{Backend: halvedKV{b}}, SessionOptions{})
			if half.CacheBytes()*2 != wide.CacheBytes() {
				t.Errorf("f16 cache %d bytes, f32 %d", half.CacheBytes(), wide.CacheBytes())
			}
			ids := ref.InputIDs
			steps := [][]int32{ids[:len(ids)-4]}
			for _, id := range ids[len(ids)-4:] {
				steps = append(steps, []int32{id})
			}
			for i, s := range steps {
				got, err := half.Forward(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				want, err := wide.Forward(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				if d := maxAbs(got, want); d > 1e-6 {
					t.Errorf("step %d (%d tokens at %d): logits max-abs %g > 1e-6", i, len(s), len(half.Cached())-len(s), d)
				}
			}
		})
	}
}

// TestKVCacheType rejects cache types other than f32 and f16, naming the field.
func TestKVCacheType(t *testing.T) {
	dir, _ := readRef(t, "llama3")
	m, err := Load(context.Background(), dir, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.NewSession(SessionOptions{KV: kernels.DTypeQ8})
	if err == nil || err.Error() != "model: KV cache type q8: want f32 or f16" {
		t.Fatalf("NewSession with a q8 KV cache: %v", err)
	}
}

// TestEstimateCache checks that Estimate's KV cache bytes, without loading,
// are what the loaded model allocates, for both cache types and an explicit
// context.
func TestEstimateCache(t *testing.T) {
	dir, _ := readRef(t, "qwen2")
	m, err := Load(context.Background(), dir, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, o := range []SessionOptions{{}, {KV: kernels.DTypeF16}, {Context: 100, KV: kernels.DTypeF16}} {
		_, bytes, err := Estimate(dir, Options{}, o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.NewSession(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.MemoryBytes(); bytes != got || got <= s.CacheBytes() || s.CacheBytes() == 0 {
			t.Errorf("%s cache, context %d: Estimate %d bytes, session %d (cache %d)", o.KV, o.Context, bytes, got, s.CacheBytes())
		}
		if sb, _ := m.SessionBytes(o); sb != bytes {
			t.Errorf("%s cache, context %d: SessionBytes %d, Estimate %d", o.KV, o.Context, sb, bytes)
		}
		s.Close()
	}
}
