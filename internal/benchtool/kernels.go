package benchtool

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
	"github.com/ingot-llm/ingot/model"
	"github.com/klauspost/cpuid/v2"
)

// A kernel test times one backend op on the shapes of a model config:
//
//	mv      every distinct weight matrix at L = 1 (decode mat-vec): GB/s of
//	        weights, rotating over copies that exceed the last-level cache
//	mvc     the same with one copy of as many of its rows as fill half of
//	        the threads' L2 caches, called again and again: the rate a call
//	        runs at (its fixed costs included) when memory does not hold it
//	        back
//	mvf     the fused mat-vecs of a decode step, q/k/v and gate/up, each one
//	        MatMuls call (one launch on the cuda backend), rotating as mv
//	mmN     the same matrices at L = N (prefill mat-mat): GFLOP/s
//	norm    RMSNorm of one (1, D) row
//	rope    RoPE of one token's query heads
//	attnN   decode attention of one token over N cached positions
//
// Rows are named test:shape, e.g. "mv:q 2048x2048". Rates come from the wall
// clock around R calls and one Sync; on a device backend that keeps statistics
// (Metal), gpu_ms is the device time per call from the command buffers' GPU
// timestamps, and the weight bytes per call are those its kernels read (the
// cuda backend's q4/q8 mat-vecs read 16-bit scale/bias pairs, not the f32
// scales and biases of the uploaded tensor).
func isKernelTest(name string) bool {
	for _, p := range []string{"mv", "mm", "norm", "rope", "attn"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// statser is a backend that counts device work (kernels.Metal).
type statser interface {
	Stats() kernels.Stats
	ResetStats()
}

// kernelCase is one timed op: run encodes one call.
type kernelCase struct {
	shape        string
	bytes, flops float64 // per call
	run          func()
}

func kernelTests(ctx context.Context, b kernels.Backend, cfg *model.Config, dt, kv kernels.DType, name string, n, reps, threads int, seed uint64) ([]kernelCase, error) {
	l2 := cpuid.CPU.Cache.L2
	if l2 <= 0 {
		l2 = 512 << 10
	}
	cacheBytes := threads * l2 / 2 // mvc's weight (threads is resolved: > 0)
	D, F, H, Hkv, Dh, V := cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.VocabSize
	rng := rand.New(rand.NewPCG(seed, 11))
	vec := func(rows, cols int) (*kernels.Tensor, error) {
		f := make([]float32, rows*cols)
		for i := range f {
			f[i] = float32(rng.NormFloat64())
		}
		return b.Upload(kernels.FromF32(f, rows, cols))
	}
	var cases []kernelCase
	switch {
	case name == "mv" || name == "mvc" || strings.HasPrefix(name, "mm"):
		L := 1
		if strings.HasPrefix(name, "mm") {
			L = n
		}
		for _, m := range []struct {
			what string
			N, K int
		}{{"q", H * Dh, D}, {"kv", Hkv * Dh, D}, {"o", D, H * Dh}, {"gate/up", F, D}, {"down", D, F}, {"lm_head", V, D}} {
			if L > 1 && m.what == "lm_head" {
				continue // prefill runs lm_head on the last token only
			}
			if name == "mvc" { // whole four-row blocks that fit
				w4, err := b.Upload(model.SyntheticMatrix(dt, 4, m.K, seed))
				if err != nil {
					return nil, err
				}
				m.N = min(m.N, max(4, cacheBytes/max(1, kernels.WeightBytes(w4)/4)&^3))
			}
			// mat-vecs rotate over copies of at least 96 MB together, so each
			// call reads memory rather than a last-level cache
			var ws []*kernels.Tensor
			for bytes := 0; len(ws) == 0 || name == "mv" && bytes < 96<<20; {
				w, err := b.Upload(model.SyntheticMatrix(dt, m.N, m.K, seed+uint64(len(ws))))
				if err != nil {
					return nil, err
				}
				ws = append(ws, w)
				bytes += kernels.WeightBytes(w)
			}
			x, err := vec(L, m.K)
			if err != nil {
				return nil, err
			}
			dst := b.New(L, m.N)
			i := 0
			cases = append(cases, kernelCase{fmt.Sprintf("%s %dx%d", m.what, m.N, m.K), float64(kernels.WeightBytes(ws[0])),
				2 * float64(m.N*m.K*L), func() {
					b.MatMul(dst, x, ws[i%len(ws)])
					i++
				}})
		}
	case name == "mvf":
		for _, g := range []struct {
			what string
			Ns   []int
			K    int
		}{{"qkv", []int{H * Dh, Hkv * Dh, Hkv * Dh}, D}, {"gate+up", []int{F, F}, D}} {
			var sets [][]*kernels.Tensor // copies of the weights, rotated as mv's
			for bytes := 0; len(sets) == 0 || bytes < 96<<20; {
				var set []*kernels.Tensor
				for j, N := range g.Ns {
					w, err := b.Upload(model.SyntheticMatrix(dt, N, g.K, seed+uint64(4*len(sets)+j)))
					if err != nil {
						return nil, err
					}
					set = append(set, w)
					bytes += kernels.WeightBytes(w)
				}
				sets = append(sets, set)
			}
			x, err := vec(1, g.K)
			if err != nil {
				return nil, err
			}
			var dsts []*kernels.Tensor
			var shape []string
			var bytes, flops float64
			for j, N := range g.Ns {
				dsts = append(dsts, b.New(1, N))
				shape = append(shape, fmt.Sprintf("%d", N))
				bytes += float64(kernels.WeightBytes(sets[0][j]))
				flops += 2 * float64(N*g.K)
			}
			i := 0
			cases = append(cases, kernelCase{fmt.Sprintf("%s %sx%d", g.what, strings.Join(shape, "+"), g.K), bytes, flops, func() {
				b.MatMuls(dsts, x, sets[i%len(sets)])
				i++
			}})
		}
	case name == "norm":
		x, err := vec(1, D)
		if err != nil {
			return nil, err
		}
		w, err := vec(1, D)
		if err != nil {
			return nil, err
		}
		dst := b.New(1, D)
		cases = append(cases, kernelCase{fmt.Sprintf("1x%d", D), float64(8 * D), float64(4 * D), func() { b.RMSNorm(dst, x, w, 1e-5) }})
	case name == "rope":
		x, err := vec(1, H*Dh)
		if err != nil {
			return nil, err
		}
		p := &kernels.RoPE{HeadDim: Dh, RotaryDim: Dh, Scale: 1}
		for i := range Dh / 2 {
			p.InvFreq = append(p.InvFreq, float32(math.Pow(10000, -2*float64(i)/float64(Dh))))
		}
		cases = append(cases, kernelCase{fmt.Sprintf("%dx%d", H, Dh), float64(8 * H * Dh), float64(6 * H * Dh), func() { b.RoPE(x, n, p) }})
	case strings.HasPrefix(name, "attn"):
		q, err := vec(1, H*Dh)
		if err != nil {
			return nil, err
		}
		k, err := vec(n+1, Hkv*Dh)
		if err != nil {
			return nil, err
		}
		v, err := vec(n+1, Hkv*Dh)
		if err != nil {
			return nil, err
		}
		if kv == kernels.DTypeF16 {
			k16, v16 := b.NewF16(n+1, Hkv*Dh), b.NewF16(n+1, Hkv*Dh)
			b.CopyRows(k16, k, 0)
			b.CopyRows(v16, v, 0)
			k, v = k16, v16
		}
		dst := b.New(1, H*Dh)
		p := &kernels.AttnParams{Heads: H, KVHeads: Hkv, HeadDim: Dh, Scale: float32(1 / math.Sqrt(float64(Dh)))}
		cases = append(cases, kernelCase{fmt.Sprintf("H=%d Hkv=%d Dh=%d ctx=%d", H, Hkv, Dh, n+1), float64(2 * kv.Bits() / 8 * (n + 1) * Hkv * Dh),
			float64(4 * (n + 1) * H * Dh), func() { b.Attention(dst, q, k, v, n, p) }})
	}
	return cases, ctx.Err()
}

// timeKernel runs c in batches of reps calls, each batch ended by a Sync, until
// 50 ms have passed (after a warm-up call), and returns seconds per call by the
// wall clock and, on a device with statistics, by GPU time and the weight
// bytes its kernels read per call (else 0).
func timeKernel(ctx context.Context, b kernels.Backend, c kernelCase, reps int) (wall, gpu, weightBytes float64, err error) {
	c.run()
	if err := b.Sync(ctx); err != nil {
		return 0, 0, 0, err
	}
	st, _ := b.(statser)
	if st != nil {
		st.ResetStats()
	}
	calls := 0
	start := time.Now()
	for calls == 0 || time.Since(start) < 50*time.Millisecond {
		for range reps {
			c.run()
		}
		if err := b.Sync(ctx); err != nil {
			return 0, 0, 0, err
		}
		calls += reps
	}
	wall = time.Since(start).Seconds() / float64(calls)
	if st != nil {
		s := st.Stats()
		gpu = s.GPUTime.Seconds() / float64(calls)
		weightBytes = float64(s.WeightBytes) / float64(calls)
	}
	return wall, gpu, weightBytes, nil
}

// runKernels times kernel test t, one result row per shape. Each row's
// bandwidth is the mean of the probe's figures (medians of three passes) just
// before and just after its timing, as for a decode stretch: a VM's
// bandwidth can change by 2× within seconds, so one figure for the whole run
// misjudges rows timed later (docs/perf/cpu.md, "Bench: a probe per kernel
// row").
func runKernels(ctx context.Context, b kernels.Backend, cfg *model.Config, dt, kv kernels.DType, dtype, modelName string, t test, threads, reps int, probe *cpu.BandwidthProbe, seed uint64, stderr io.Writer) ([]Result, error) {
	cases, err := kernelTests(ctx, b, cfg, dt, kv, t.name, t.n, reps, threads, seed)
	if err != nil {
		return nil, err
	}
	var rs []Result
	for _, c := range cases {
		progress(stderr, "%s %s: %s %s", modelName, dtype, t.name, c.shape)
		before := median(sample(probe, 3, nil))
		wall, gpu, wb, err := timeKernel(ctx, b, c, reps)
		if err != nil {
			return nil, err
		}
		if wb > 0 && (strings.HasPrefix(t.name, "mv") || strings.HasPrefix(t.name, "mm")) {
			c.bytes = wb // what the device's kernels read
		}
		bw := (before + median(sample(probe, 3, nil))) / 2
		sec := wall
		if gpu > 0 {
			sec = gpu // the device's own time, without the host's encode and wait
		}
		r := Result{Model: modelName, DType: dtype, Backend: b.Name(), Threads: threads, Test: t.name + ":" + c.shape, Reps: reps,
			TokS: 1 / sec, GBs: c.bytes / sec / 1e9, GFLOPs: c.flops / sec / 1e9, BandwidthGB: bw,
			USPerCall: wall * 1e6, GPUUSPerCall: gpu * 1e6, KV: kv.String()}
		r.BWFraction = r.GBs / bw
		rs = append(rs, r)
	}
	return rs, nil
}
