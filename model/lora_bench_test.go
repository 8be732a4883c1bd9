package model

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
)

// BenchmarkLoraDecode decodes tinycode-llama greedily with no adapter, a
// rank-8 adapter on all seven projections unfused, and the same fused.
func BenchmarkLoraDecode(b *testing.B) {
	dir := filepath.Join(refDir, "tinycode-llama")
	s := open(b, dir, Options{Threads: 2}, SessionOptions{Context: 256})
	ad := randomAdapter(b, s.Model().Config, 1, 0.02)
	fused := open(b, dir, Options{Threads: 2, Fuse: ad}, SessionOptions{Context: 256})
	a, err := s.Model().LoadAdapter(ad)
	if err != nil {
		b.Fatal(err)
	}
	prompt := []int32{4094, 100, 200, 300}
	for _, c := range []struct {
		name string
		s    *Session
		a    *Adapter
	}{{"base", s, nil}, {"unfused", s, a}, {"fused", fused, nil}} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.s.SetAdapter(c.a); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				c.s.Truncate(0)
				if _, err := c.s.Generate(context.Background(), prompt, GenerateOptions{MaxTokens: 64, IgnoreEOS: true}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkLoraDecode1B decodes a synthetic Llama-3.2-1B (q4) with no
// adapter and with a rank-8 adapter on all seven projections of every
// layer, unfused: the adapter's cost at a real model's shape.
func BenchmarkLoraDecode1B(b *testing.B) {
	m, err := Synthetic(context.Background(), "llama-3.2-1b", kernels.DTypeQ4, 1, Options{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(SessionOptions{Context: 64})
	if err != nil {
		b.Fatal(err)
	}
	a, err := m.LoadAdapter(randomAdapter(b, m.Config, 1, 0.02))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("adapter %.1f MB, weights %.1f MB", float64(a.Bytes())/1e6, float64(m.WeightBytes())/1e6)
	for _, c := range []struct {
		name string
		a    *Adapter
	}{{"base", nil}, {"unfused", a}} {
		b.Run(c.name, func(b *testing.B) {
			if err := s.SetAdapter(c.a); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				s.Truncate(0)
				if _, err := s.Generate(context.Background(), []int32{1, 2}, GenerateOptions{MaxTokens: 8, IgnoreEOS: true}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(8*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
