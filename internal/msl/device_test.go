package msl_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/metal"
)

func TestMacrosHeadersHelpers(t *testing.T) {
	d := open(t, "common.h", "macros.metal")
	if got := strings.Join(d.Kernels(), " "); got != "scale_f32 scale_f16" {
		t.Fatalf("kernels: %s", got)
	}
	for _, n := range []int{1, 31, 33, 64} {
		x := randn(n, uint64(n))
		for i := range x {
			x[i] = float32(math.Abs(float64(x[i]))) + 0.5
		}
		xb, yb := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, n))
		args := append(u32Bytes(uint32(n)), u32Bytes(math.Float32bits(3))...)
		if err := dispatch(t, d, "scale_f32", size(1), size(max(n, 32)), func(e metal.Encoder) {
			e.SetBytes(0, args)
			e.SetBuffer(1, xb, 0)
			e.SetBuffer(2, yb, 0)
		}); err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, v := range x {
			sum += float64(v)
		}
		for i, g := range f32s(yb) {
			if want := float64(x[i]) * 3 / sum; math.Abs(float64(g)-want) > 1e-6*want+1e-7 {
				t.Errorf("n=%d y[%d]: got %v, want %v", n, i, g, want)
			}
		}
	}
}

func TestCompileErrorPointsAtSource(t *testing.T) {
	msltest.Require(t)
	src := "#include <metal_stdlib>\nusing namespace metal;\n\nkernel void k(device float * y [[buffer(0)]]) {\n    y[0] = undefined_name;\n}\n"
	_, err := msl.Open([]msl.File{{Name: "bad.metal", Source: src}}, msl.Options{})
	if err == nil || !strings.Contains(err.Error(), "bad.metal:5:12: error: use of undeclared identifier 'undefined_name'") {
		t.Fatalf("got %v", err)
	}
}

func TestDeviceAddressSpaces(t *testing.T) {
	msltest.Require(t)
	// Passing a device pointer where threadgroup memory is expected is an
	// error, as on Metal.
	src := "#include <metal_stdlib>\nusing namespace metal;\nvoid f(threadgroup float * p) {}\n" +
		"kernel void k(device float * y [[buffer(0)]]) {\n    f(y);\n}\n"
	_, err := msl.Open([]msl.File{{Name: "as.metal", Source: src}}, msl.Options{})
	if err == nil || !strings.Contains(err.Error(), "as.metal:5:") {
		t.Fatalf("got %v", err)
	}
}

func TestLintFailsOpen(t *testing.T) {
	msltest.Require(t)
	src := "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float4 * y [[buffer(0)]], device const int4 * x [[buffer(1)]]) {\n    y[0] = (float4)x[0];\n}\n"
	_, err := msl.Open([]msl.File{{Name: "cast.metal", Source: src}}, msl.Options{})
	if err == nil || !strings.Contains(err.Error(), "cast.metal:4: msl lint [vector-cast]") {
		t.Fatalf("got %v", err)
	}
	var le *msl.LintError
	if !errors.As(err, &le) || le.Rule != "vector-cast" || le.Line != 4 {
		t.Errorf("errors.As: %v", le)
	}
}

func TestTrace(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace")
	t.Setenv("INGOT_MSL_TRACE", trace)
	d := open(t, "reduce.metal", "broken.metal")
	x, y := f32Buffer(t, d, make([]float32, 32)), f32Buffer(t, d, make([]float32, 2))
	for range 2 {
		if err := dispatch(t, d, "reduce_sum_f32", size(1), size(32), func(e metal.Encoder) {
			e.SetBytes(0, u32Bytes(32))
			e.SetBuffer(1, x, 0)
			e.SetBuffer(2, y, 0)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := dispatch(t, d, "missing_barrier", size(1), size(32), func(e metal.Encoder) { e.SetBuffer(0, x, 0) }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "reduce_sum_f32\nreduce_sum_f32\nmissing_barrier\n"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
}

func TestAvailableSaysWhatToInstall(t *testing.T) {
	if !errors.Is(msl.ErrNoCompiler, msl.ErrNoCompiler) || !strings.Contains(msl.ErrNoCompiler.Error(), "apt-get install clang-19") {
		t.Fatal(msl.ErrNoCompiler)
	}
	_, err := msl.Open([]msl.File{{Name: "a.metal", Source: ""}}, msl.Options{Clang: "/nonexistent/clang"})
	if !errors.Is(err, msl.ErrNoCompiler) && !errors.Is(err, msl.ErrUnsupported) {
		t.Fatalf("got %v", err)
	}
}

func TestMultipleCommandBuffersAndOffsets(t *testing.T) {
	d := open(t, "reduce.metal")
	x := randn(64, 3)
	xb, yb := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, 4))
	p, err := d.Pipeline("reduce_sum_f32")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := d.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(p)
	e.SetBytes(0, u32Bytes(16))
	e.SetBuffer(1, xb, 0)
	e.SetBuffer(2, yb, 0)
	e.Dispatch(size(2), size(16)) // rows 0, 1
	e.Barrier()
	e.SetBuffer(1, xb, 32*4) // rows 2, 3 through an offset
	e.SetBuffer(2, yb, 2*4)
	e.Dispatch(size(2), size(16))
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	for r, g := range f32s(yb) {
		var want float64
		for _, v := range x[16*r : 16*r+16] {
			want += float64(v)
		}
		if math.Abs(float64(g)-want) > 1e-5 {
			t.Errorf("row %d: got %v, want %v", r, g, want)
		}
	}
	if cb.GPUDuration() <= 0 {
		t.Error("no duration")
	}
}

func TestBufferNoCopyAndMaxBufferLength(t *testing.T) {
	pg := os.Getpagesize()
	d := msltest.OpenOptions(t, msl.Options{Strict: true, MaxBufferLength: 2 * pg}, files(t, "reduce.metal")...)
	if got := d.MaxBufferLength(); got != 2*pg {
		t.Fatalf("MaxBufferLength = %d, want %d", got, 2*pg)
	}
	mem, err := unix.Mmap(-1, 0, 3*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for _, c := range []struct {
		name string
		b    []byte
		want string // error substring; "" for success
	}{
		{"misaligned", mem[4 : 4+pg], "page-aligned"},
		{"empty", mem[:0], "empty"},
		{"2 pages", mem[:2*pg], ""},
		{"rounds up to 3 pages", mem[:2*pg+1], "exceeds the maximum buffer length"},
	} {
		b, err := d.BufferNoCopy(c.b)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: BufferNoCopy: %v, want %q", c.name, err, c.want)
		}
		if b != nil {
			b.Release()
		}
	}
	if _, err := d.NewBuffer(2*pg + 1); err == nil || !strings.Contains(err.Error(), "exceeds the maximum buffer length") {
		t.Errorf("NewBuffer past the limit: %v", err)
	}

	// A kernel reads and writes the host memory itself.
	x := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), 32)
	for i := range x {
		x[i] = float32(i)
	}
	xb, err := d.BufferNoCopy(mem[:pg])
	if err != nil {
		t.Fatal(err)
	}
	defer xb.Release()
	if err := dispatch(t, d, "reduce_sum_f32", size(1), size(32), func(e metal.Encoder) {
		e.SetBytes(0, u32Bytes(32))
		e.SetBuffer(1, xb, 0)
		e.SetBuffer(2, xb, 32*4) // the sum lands right after x, in the same pages
	}); err != nil {
		t.Fatal(err)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(mem[32*4:])); got != 31*32/2 {
		t.Errorf("sum written through the no-copy buffer: %v, want %v", got, 31*32/2)
	}
}
