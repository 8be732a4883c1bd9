package msl_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/metal"
)

// The broken kernels must fail with a message naming the kernel, the
// threadgroup and the thread, and saying what went wrong.
func TestBrokenKernels(t *testing.T) {
	d := open(t, "broken.metal")
	for _, tc := range []struct {
		kernel  string
		threads int
		want    []string // substrings of the error
	}{
		{"divergent_barrier", 32, []string{"divergent_barrier: threadgroup (0,0,0) thread (0,0,0)", "divergent threadgroup_barrier", "16 of 32 threads", "thread (16,0,0)", "return"}},
		{"divergent_simd_sum", 32, []string{"divergent_simd_sum: threadgroup (0,0,0) thread (0,0,0)", "divergent simd collective", "thread (16,0,0)"}},
		{"shuffle_inactive", 16, []string{"shuffle_inactive: threadgroup (0,0,0) thread (0,0,0)", "read lane 20", "inactive", "simdgroup of 16 threads"}},
		{"tg_overflow", 32, []string{"tg_overflow: threadgroup (0,0,0) thread (0,0,0)", "exceeds the 32768-byte limit", "36000 bytes"}},
	} {
		t.Run(tc.kernel, func(t *testing.T) {
			out := f32Buffer(t, d, make([]float32, 64))
			err := dispatch(t, d, tc.kernel, size(1), size(tc.threads), func(e metal.Encoder) { e.SetBuffer(0, out, 0) })
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// Without a barrier a thread reads its neighbour's slot before it is written:
// the poisoned threadgroup memory shows up as NaN.
func TestMissingBarrierReadsPoison(t *testing.T) {
	d := open(t, "broken.metal")
	out := f32Buffer(t, d, make([]float32, 64))
	if err := dispatch(t, d, "missing_barrier", size(1), size(64), func(e metal.Encoder) { e.SetBuffer(0, out, 0) }); err != nil {
		t.Fatal(err)
	}
	nan := 0
	for _, v := range f32s(out) {
		if math.IsNaN(float64(v)) {
			nan++
		}
	}
	if nan == 0 {
		t.Fatal("no poisoned (NaN) values read: the missing barrier went unnoticed")
	}
}

// Non-strict devices give the GPU answer for a lane-divergent simd_sum: the
// sum over the 16 active lanes.
func TestDivergentSimdSumNonStrict(t *testing.T) {
	d := openLax(t, "broken.metal")
	out := f32Buffer(t, d, make([]float32, 32))
	if err := dispatch(t, d, "divergent_simd_sum", size(1), size(32), func(e metal.Encoder) { e.SetBuffer(0, out, 0) }); err != nil {
		t.Fatal(err)
	}
	for lane, v := range f32s(out) {
		want := float32(1)
		if lane < 16 {
			want = 16
		}
		if v != want {
			t.Errorf("lane %d: got %v, want %v", lane, v, want)
		}
	}
}

func TestReadPastEnd(t *testing.T) {
	d := open(t, "broken.metal")
	const n = 64
	x, out := f32Buffer(t, d, make([]float32, n)), f32Buffer(t, d, make([]float32, n))
	for _, k := range []int{1, 2} {
		// Thread k-1 reads x[n]: one element past the end.
		err := dispatch(t, d, "read_past_end", size(2), size(n/2), func(e metal.Encoder) {
			e.SetBuffer(0, x, 0)
			e.SetBuffer(1, out, 0)
			e.SetBytes(2, u32Bytes(n-uint32(k)+1))
		})
		if err == nil {
			t.Fatal("no error")
		}
		for _, w := range []string{fmt.Sprintf("read_past_end: threadgroup (0,0,0) thread (%d,0,0)", k-1), "SIGSEGV", "past the end of [[buffer(0)]]", "(256 bytes bound)"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
	}
	// The device still works after a fault.
	if err := dispatch(t, d, "read_past_end", size(1), size(n), func(e metal.Encoder) {
		e.SetBuffer(0, x, 0)
		e.SetBuffer(1, out, 0)
		e.SetBytes(2, u32Bytes(0))
	}); err != nil {
		t.Fatal(err)
	}
}

func TestBindingErrors(t *testing.T) {
	d := open(t, "reduce.metal")
	x := f32Buffer(t, d, make([]float32, 4))
	for _, tc := range []struct {
		name    string
		threads int
		bind    func(e metal.Encoder)
		want    string
	}{
		{"unbound", 32, func(e metal.Encoder) { e.SetBuffer(1, x, 0) }, "[[buffer(2)]] is not bound"},
		{"too many threads", 1025, func(e metal.Encoder) {}, "1025x1x1 threads per threadgroup"},
		{"bad offset", 32, func(e metal.Encoder) { e.SetBuffer(1, x, 17) }, "offset 17 outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dispatch(t, d, "reduce_sum_f32", size(1), size(tc.threads), tc.bind)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := d.Pipeline("nope"); err == nil || !strings.Contains(err.Error(), "reduce_sum_f32") {
		t.Errorf("Pipeline(nope): %v", err)
	}
}

// After the runtime installed its fault handler, Go's own faults (nil
// dereferences turned into panics) still reach Go's handler.
func TestGoFaultsStillPanic(t *testing.T) {
	TestReadPastEnd(t) // installs the handler and takes a fault
	var p *int
	for range 3 {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Error("nil dereference did not panic")
				}
			}()
			_ = *p
		}()
	}
}

// Uninitialized private variables read as NaN (clang's pattern init).
func TestUninitializedPrivateIsNaN(t *testing.T) {
	d := open(t, "broken.metal")
	out := f32Buffer(t, d, make([]float32, 8))
	if err := dispatch(t, d, "uninit_private", size(1), size(8), func(e metal.Encoder) { e.SetBuffer(0, out, 0) }); err != nil {
		t.Fatal(err)
	}
	for i, v := range f32s(out) {
		if !math.IsNaN(float64(v)) {
			t.Errorf("out[%d] = %v, want NaN", i, v)
		}
	}
}
