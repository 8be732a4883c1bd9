//go:build linux && (amd64 || arm64) && !nogpu

package cudadev_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/cuda/cudatest"
	"github.com/ingot-llm/ingot/cuda/ptx"
	"github.com/ingot-llm/ingot/internal/cudadev"
	"github.com/ingot-llm/ingot/kernels"
)

// TestStubComputeCapability runs a q4 prefill on stub GPUs of compute
// capability 7.0 and 9.0: the device reports it, an sm_80 kernel
// (matmul_q4_f32_tc, module matmul_tc) is refused on 7.0 naming both, and
// package kernels picks the int8 tensor-core kernels (quantx + matmul) on 9.0 and the SIMT
// matmul_q4_f32_nv on 7.0.
func TestStubComputeCapability(t *testing.T) {
	if major, minor, ok := ptx.Target("matmul_tc"); !ok || major != 8 || minor != 0 {
		t.Fatalf("ptx.Target(matmul_tc) = %d, %d, %v; want 8, 0, true", major, minor, ok)
	}
	if major, _, ok := ptx.Target("matmul_nv"); !ok || major != 7 {
		t.Fatalf("ptx.Target(matmul_nv) = %d, %v; want 7", major, ok)
	}
	lib := cudatest.Stub(t)
	defer cudatest.Call(t, "stub_set_cc", 9, 0)
	for _, c := range []struct {
		major, minor int
		want         []string
	}{{7, 0, []string{"matmul_q4_f32_nv"}}, {9, 0, []string{"quantx_q4_f32_tc8", "matmul_q4_f32_tc8"}}} {
		t.Run(fmt.Sprintf("cc=%d.%d", c.major, c.minor), func(t *testing.T) {
			cudatest.Call(t, "stub_set_cc", uintptr(c.major), uintptr(c.minor))
			d, err := cudadev.Open(cudadev.Options{Library: lib})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Release()
			if major, minor := d.ComputeCapability(); major != c.major || minor != c.minor {
				t.Errorf("ComputeCapability() = %d.%d", major, minor)
			}
			_, err = d.Pipeline("matmul_q4_f32_tc")
			if refused := err != nil && strings.Contains(err.Error(), "targets sm_80") && strings.Contains(err.Error(), fmt.Sprintf("compute capability is %d.%d", c.major, c.minor)); refused != (c.major < 8) {
				t.Errorf("Pipeline(matmul_q4_f32_tc): %v", err)
			}
			b, err := kernels.NewMetal(d)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			const L, N, K, G = 3, 16, 64, 32
			q := kernels.DTypeQ4
			w, err := b.Upload(&kernels.Tensor{
				DType: q, Shape: []int{N, K}, GroupSize: G,
				Data:   make([]byte, N*K/2),
				Scales: kernels.FromF32(make([]float32, N*K/G), N, K/G),
				Biases: kernels.FromF32(make([]float32, N*K/G), N, K/G),
			})
			if err != nil {
				t.Fatal(err)
			}
			x, y := b.New(L, K), b.New(L, N)
			cudatest.Call(t, "stub_reset")
			b.MatMul(y, x, w)
			if err := b.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range cudatest.Launches(t) {
				names = append(names, l.Name)
			}
			if !slices.Equal(names, c.want) {
				t.Errorf("launches %v, want %v", names, c.want)
			}
		})
	}
}
