package cpu

import (
	"fmt"
	"math"
	"testing"
)

// shapes1B are the (N, K) matrices of a Llama-3.2-1B decoder step (D=2048,
// F=8192, GQA 32/8 heads of 64, V=128256): q/o, k/v, gate/up, down, lm_head.
var shapes1B = []struct {
	name string
	N, K int
	per  int // uses per token: per layer (×16), or 1 for lm_head
}{
	{"2048x2048", 2048, 2048, 2 * 16},
	{"512x2048", 512, 2048, 2 * 16},
	{"8192x2048", 8192, 2048, 2 * 16},
	{"2048x8192", 2048, 8192, 16},
	{"128256x2048", 128256, 2048, 1},
}

var benchFormats = []string{"f32", "f16", "bf16", "q8", "q4"}

// fastWeight fills an (N, K) weight cheaply with a xorshift stream: finite,
// normal-range values; codes uniform; group 64 and bf16 scales for q8/q4,
// prepared as Upload prepares them.
func fastWeight(format string, N, K int, seed uint64) *Weight {
	x := seed*0x9e3779b97f4a7c15 | 1
	next := func() uint32 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return uint32(x >> 32)
	}
	unit := func() float32 { return float32(int32(next())) / (1 << 31) }
	w := &Weight{N: N, K: K}
	switch format {
	case "f32":
		w.Format, w.F32 = FormatF32, make([]float32, N*K)
		for i := range w.F32 {
			w.F32[i] = unit()
		}
	case "f16", "bf16":
		w.Format, w.U16 = FormatF16, make([]uint16, N*K)
		if format == "bf16" {
			w.Format = FormatBF16
		}
		for i := 0; i < len(w.U16); i += 2 {
			r := next()
			// exponents 2^-8..2^-1, random sign and mantissa
			if format == "f16" {
				w.U16[i], w.U16[i+1] = uint16(r&0x83ff|(7+r>>12&7)<<10), uint16(r>>16&0x83ff|(7+r>>28&7)<<10)
			} else {
				w.U16[i], w.U16[i+1] = uint16(r&0x807f|(119+r>>8&7)<<7), uint16(r>>16&0x807f|(119+r>>24&7)<<7)
			}
		}
	case "q8", "q4":
		bits := 8
		if format == "q4" {
			bits = 4
		}
		G := K / 64
		q := &QMatrix{Bits: bits, GroupSize: 64, W: make([]uint32, N*K*bits/32),
			Scales: make([]float32, N*G), Biases: make([]float32, N*G)}
		for i := range q.W {
			q.W[i] = next()
		}
		for i := range q.Scales { // bf16 values, as MLX stores them
			q.Scales[i], q.Biases[i] = BF16ToF32(F32ToBF16(unit()*0.01)), BF16ToF32(F32ToBF16(unit()*0.1))
		}
		w.Format, w.Q = FormatQ, q
		Prepare(w) // the layout the CPU backend's Upload gives it
	}
	return w
}

// benchCopies returns enough copies of a weight to exceed the 32 MB L3 twice, so
// each mat-vec reads DRAM as a decode step does.
func benchCopies(format string, N, K int) []*Weight {
	w := fastWeight(format, N, K, 1)
	n := max(1, (64<<20+w.Bytes()-1)/w.Bytes())
	ws := []*Weight{w}
	for i := 1; i < n; i++ {
		ws = append(ws, fastWeight(format, N, K, uint64(i+1)))
	}
	return ws
}

// BenchmarkMatVec is the decode mat-vec (L=1) on the 1B shapes with 2 threads.
// MB/s counts packed weight bytes (scales and biases included) plus x and dst:
// compare it with BenchmarkReadBandwidth.
func BenchmarkMatVec(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	for _, f := range benchFormats {
		for _, s := range shapes1B {
			b.Run(fmt.Sprintf("w=%s/shape=%s", f, s.name), func(b *testing.B) {
				ws := benchCopies(f, s.N, s.K)
				x := make([]float32, s.K)
				for i := range x {
					x[i] = float32(math.Sin(float64(i)))
				}
				dst := make([]float32, s.N)
				b.SetBytes(int64(ws[0].Bytes() + 4*s.K + 4*s.N))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p.MatMul(dst, x, 1, ws[i%len(ws)])
					i++
				}
			})
		}
	}
}

// BenchmarkMatMul is the prefill mat-mat (L=512) on the 1B layer shapes with 2
// threads, in GFLOP/s (2·N·K·L per op).
func BenchmarkMatMul(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	const L = 512
	for _, f := range benchFormats {
		for _, s := range shapes1B[:4] {
			b.Run(fmt.Sprintf("w=%s/shape=%s/L=%d", f, s.name, L), func(b *testing.B) {
				w := fastWeight(f, s.N, s.K, 1)
				x := make([]float32, L*s.K)
				for i := range x {
					x[i] = float32(math.Sin(float64(i)))
				}
				dst := make([]float32, L*s.N)
				b.ReportAllocs()
				for b.Loop() {
					p.MatMul(dst, x, L, w)
				}
				b.ReportMetric(2*float64(s.N*s.K*L)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// model1B holds every matrix of a Llama-3.2-1B-shaped model in one format.
func model1B(format string) (layers [][]*Weight, head *Weight) {
	for i := range 16 {
		var l []*Weight
		for j, s := range []struct{ N, K int }{{2048, 2048}, {512, 2048}, {512, 2048}, {2048, 2048}, {8192, 2048}, {8192, 2048}, {2048, 8192}} {
			l = append(l, fastWeight(format, s.N, s.K, uint64(i*8+j+1)))
		}
		layers = append(layers, l)
	}
	return layers, fastWeight(format, 128256, 2048, 999)
}

// BenchmarkDecode1B runs the matrices of one decode step of a Llama-3.2-1B
// shape (16 layers of q, k, v, o, gate, up, down, then lm_head) with 2 threads
// and reports tok/s and the weight bandwidth reached (norms, RoPE and attention
// are not included: they are small beside 0.7-2.5 GB of weights).
func BenchmarkDecode1B(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	for _, f := range benchFormats[1:] {
		b.Run("w="+f, func(b *testing.B) {
			layers, head := model1B(f)
			bytes := head.Bytes()
			for _, l := range layers {
				for _, w := range l {
					bytes += w.Bytes()
				}
			}
			x := make([]float32, 8192)
			for i := range x {
				x[i] = float32(math.Sin(float64(i)))
			}
			out := make([]float32, 128256)
			b.ReportAllocs()
			for b.Loop() {
				for _, l := range layers {
					for _, w := range l {
						p.MatMul(out[:w.N], x[:w.K], 1, w)
					}
				}
				p.MatMul(out, x[:2048], 1, head)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(1/sec, "tok/s")
			b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
		})
	}
}

// BenchmarkPrefill1B runs the matrices of a 512-token prefill of the 1B shape
// (every layer's seven matrices at L=512, lm_head for the last token only).
func BenchmarkPrefill1B(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	const L = 512
	for _, f := range []string{"q8", "q4", "bf16"} {
		b.Run("w="+f+"/L=512", func(b *testing.B) {
			layers, head := model1B(f)
			x := make([]float32, L*8192)
			for i := range x {
				x[i] = float32(math.Sin(float64(i)))
			}
			out := make([]float32, L*8192)
			var flop float64
			for b.Loop() {
				flop = 0
				for _, l := range layers {
					for _, w := range l {
						p.MatMul(out[:L*w.N], x[:L*w.K], L, w)
						flop += 2 * float64(L*w.N*w.K)
					}
				}
				p.MatMul(out[:head.N], x[:2048], 1, head)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(L/sec, "tok/s")
			b.ReportMetric(flop/sec/1e9, "GFLOP/s")
		})
	}
}
