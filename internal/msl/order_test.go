package msl_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ingot-llm/ingot/metal"
)

// Correct kernels give bit-identical results whatever order the fibers of a
// threadgroup run in and however many threadgroups run in parallel.
func TestFiberOrderIndependent(t *testing.T) {
	type run func(d metal.Device) []byte
	x := randn(5*300, 11)
	a, b := randn(16*24, 12), randn(24*16, 13)
	cases := map[string]struct {
		files []string
		run   run
	}{
		"reduce": {[]string{"reduce.metal"}, func(d metal.Device) []byte {
			xb, yb := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, 5))
			if err := dispatch(t, d, "reduce_sum_f32", size(5), size(96), func(e metal.Encoder) {
				e.SetBytes(0, u32Bytes(300))
				e.SetBuffer(1, xb, 0)
				e.SetBuffer(2, yb, 0)
			}); err != nil {
				t.Fatal(err)
			}
			return bytes.Clone(yb.Contents())
		}},
		"matmul": {[]string{"matmul.metal"}, func(d metal.Device) []byte {
			ab, bb, cb := f32Buffer(t, d, a), f32Buffer(t, d, b), f32Buffer(t, d, make([]float32, 16*16))
			if err := dispatch(t, d, "matmul_sg_f32", metal.Size{W: 2, H: 2, D: 1}, size(32), func(e metal.Encoder) {
				e.SetBytes(0, u32Bytes(16, 16, 24))
				e.SetBuffer(1, ab, 0)
				e.SetBuffer(2, bb, 0)
				e.SetBuffer(3, cb, 0)
			}); err != nil {
				t.Fatal(err)
			}
			return bytes.Clone(cb.Contents())
		}},
		"shuffle": {[]string{"simd.metal"}, func(d metal.Device) []byte {
			xb, ob := f32Buffer(t, d, x[:256]), f32Buffer(t, d, make([]float32, 8*256))
			if err := dispatch(t, d, "simd_shuffle_f32", metal.Size{W: 2, H: 2, D: 1}, metal.Size{W: 32, H: 2, D: 1}, func(e metal.Encoder) {
				e.SetBuffer(0, xb, 0)
				e.SetBuffer(1, ob, 0)
			}); err != nil {
				t.Fatal(err)
			}
			return bytes.Clone(ob.Contents())
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var ref []byte
			for _, cfg := range []struct {
				seed    int64
				threads int
			}{{0, 1}, {1, 1}, {7, 2}, {-3, 2}, {12345, 1}} {
				got := c.run(openOpts(t, cfg.threads, cfg.seed, c.files...))
				if ref == nil {
					ref = got
					continue
				}
				if !bytes.Equal(got, ref) {
					t.Errorf("seed %d, %d threads: results differ from seed 0", cfg.seed, cfg.threads)
				}
			}
		})
	}
}

// A kernel whose result depends on fiber order (a missing barrier) does give
// different results under different seeds: the shuffle is real.
func TestSeedChangesOrder(t *testing.T) {
	outs := map[string]bool{}
	for seed := range int64(4) {
		d := openOpts(t, 1, seed, "broken.metal")
		out := f32Buffer(t, d, make([]float32, 64))
		if err := dispatch(t, d, "missing_barrier", size(1), size(64), func(e metal.Encoder) { e.SetBuffer(0, out, 0) }); err != nil {
			t.Fatal(err)
		}
		outs[fmt.Sprint(f32s(out))] = true
	}
	if len(outs) < 2 {
		t.Fatal("every seed gave the same result for an order-dependent kernel")
	}
}
