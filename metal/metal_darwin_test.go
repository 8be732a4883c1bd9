//go:build darwin

package metal

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// testSource is a tiny library: an axpy, a threadgroup-memory reduction and a
// kernel that writes its grid geometry, enough to exercise every Encoder method.
const testSource = `
#include <metal_stdlib>
using namespace metal;

struct axpy_args { uint n; float alpha; };

// y[i] += alpha * x[i]
kernel void axpy_f32(
        constant axpy_args & args [[buffer(0)]],
        device const float * x    [[buffer(1)]],
        device       float * y    [[buffer(2)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        y[i] += args.alpha * x[i];
    }
}

// out[g] = sum of x over threadgroup g (one element per thread).
kernel void tgsum_f32(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        threadgroup  float * tmp [[threadgroup(0)]],
        uint  g   [[threadgroup_position_in_grid]],
        uint  tid [[thread_position_in_threadgroup]],
        uint  ntg [[threads_per_threadgroup]]) {
    tmp[tid] = x[g * ntg + tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        float s = 0;
        for (uint j = 0; j < ntg; j++) {
            s += tmp[j];
        }
        out[g] = s;
    }
}

// Each threadgroup writes the threadgroup grid size and its own size.
kernel void geometry(
        device uint * out [[buffer(0)]],
        uint3 ngroups [[threadgroups_per_grid]],
        uint3 ntg     [[threads_per_threadgroup]],
        uint  tid     [[thread_index_in_threadgroup]]) {
    if (tid == 0) {
        out[0] = ngroups.x; out[1] = ngroups.y; out[2] = ngroups.z;
        out[3] = ntg.x;     out[4] = ntg.y;     out[5] = ntg.z;
    }
}
`

// open opens the test device, skipping when this Mac has no Metal GPU.
func open(t testing.TB) Device {
	t.Helper()
	d, err := Open(testSource)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no Metal device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Release)
	return d
}

func newBuffer(t testing.TB, d Device, n int) Buffer {
	t.Helper()
	b, err := d.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func pipelineOf(t testing.TB, d Device, name string) Pipeline {
	t.Helper()
	p, err := d.Pipeline(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func floats(b Buffer) []float32 {
	c := b.Contents()
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(c))), len(c)/4)
}

func axpyArgs(n int, alpha float32) []byte {
	a := binary.LittleEndian.AppendUint32(nil, uint32(n))
	return binary.LittleEndian.AppendUint32(a, math.Float32bits(alpha))
}

// TestSelectors runs first: it asks each object whether it responds to every
// selector this package sends it, so a misspelt selector fails here by name
// instead of aborting the process with an unrecognized-selector exception.
func TestSelectors(t *testing.T) {
	d := open(t).(*device)
	check := func(what string, id objc.ID, sels map[string]objc.SEL) {
		t.Helper()
		for name, sel := range sels {
			if !msgRespond(id, selRespondsToSelector, sel) {
				t.Errorf("%s does not respond to %s", what, name)
			}
		}
	}
	check("MTLDevice", d.id, map[string]objc.SEL{
		"name": selName, "recommendedMaxWorkingSetSize": selRecommendedMaxWorkingSetSize,
		"maxBufferLength": selMaxBufferLength, "hasUnifiedMemory": selHasUnifiedMemory,
		"maxThreadgroupMemoryLength": selMaxThreadgroupMemoryLength, "currentAllocatedSize": selCurrentAllocatedSize,
		"newCommandQueue": selNewCommandQueue, "newLibraryWithSource:options:error:": selNewLibraryWithSource,
		"newComputePipelineStateWithFunction:error:":                      selNewPipelineWithFunction,
		"newBufferWithLength:options:":                                    selNewBufferWithLength,
		"newBufferWithBytesNoCopy:length:options:deallocator:":            selNewBufferWithBytesNoCopy,
		"newBinaryArchiveWithDescriptor:error:":                           selNewBinaryArchiveWithDescriptor,
		"newComputePipelineStateWithDescriptor:options:reflection:error:": selNewPipelineWithDescriptorOptions,
	})
	check("MTLLibrary", d.lib, map[string]objc.SEL{"newFunctionWithName:": selNewFunctionWithName})
	check("MTLCommandQueue", d.queue, map[string]objc.SEL{"commandBufferWithUnretainedReferences": selCommandBufferUnretained})
	p := pipelineOf(t, d, "axpy_f32").(*pipeline)
	check("MTLComputePipelineState", p.id, map[string]objc.SEL{
		"maxTotalThreadsPerThreadgroup": selMaxTotalThreadsPerThreadgroup,
		"threadExecutionWidth":          selThreadExecutionWidth,
		"staticThreadgroupMemoryLength": selStaticThreadgroupMemoryLength,
	})
	b := newBuffer(t, d, 64).(*buffer)
	check("MTLBuffer", b.id, map[string]objc.SEL{"contents": selContents, "length": selLength})
	cb, err := d.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	c := cb.(*commandBuffer)
	check("MTLCommandBuffer", c.h.id, map[string]objc.SEL{
		"computeCommandEncoderWithDispatchType:": selComputeEncoderWithType, "commit": selCommit,
		"waitUntilCompleted": selWaitUntilCompleted, "status": selStatus, "error": selError,
		"GPUStartTime": selGPUStartTime, "GPUEndTime": selGPUEndTime,
	})
	e := cb.Encoder().(*encoder)
	check("MTLComputeCommandEncoder", e.id, map[string]objc.SEL{
		"setComputePipelineState:": selSetComputePipelineState, "setBuffer:offset:atIndex:": selSetBufferOffsetAtIndex,
		"setBuffers:offsets:withRange:":               selSetBuffersOffsetsWithRange,
		"setThreadgroupMemoryLength:atIndex:":         selSetThreadgroupMemory,
		"dispatchThreadgroups:threadsPerThreadgroup:": selDispatchThreadgroups,
		"memoryBarrierWithScope:":                     selMemoryBarrierWithScope, "endEncoding": selEndEncoding,
	})
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestInfo(t *testing.T) {
	d := open(t)
	in := d.(Informer).Info()
	t.Logf("%+v", in)
	if in.Name == "" || in.Name != d.Name() {
		t.Errorf("Name %q, Info().Name %q", d.Name(), in.Name)
	}
	if in.MaxWorkingSet <= 0 || in.MaxWorkingSet != d.MaxWorkingSet() {
		t.Errorf("MaxWorkingSet %d, Info().MaxWorkingSet %d", d.MaxWorkingSet(), in.MaxWorkingSet)
	}
	if in.MaxBufferLength <= 0 || in.MaxThreadgroupMemory <= 0 || int64(d.MaxBufferLength()) != in.MaxBufferLength {
		t.Errorf("MaxBufferLength %d, Info().MaxBufferLength %d, MaxThreadgroupMemory %d", d.MaxBufferLength(), in.MaxBufferLength, in.MaxThreadgroupMemory)
	}
}

func TestAxpy(t *testing.T) {
	d := open(t)
	const n = 1000
	x, y := newBuffer(t, d, 4*n), newBuffer(t, d, 4*n)
	for i := range n {
		floats(x)[i] = float32(i)
		if floats(y)[i] != 0 {
			t.Fatalf("NewBuffer not zeroed: y[%d] = %v", i, floats(y)[i])
		}
		floats(y)[i] = 1
	}
	p := pipelineOf(t, d, "axpy_f32")
	if p.Name() != "axpy_f32" || p.MaxThreads() <= 0 {
		t.Fatalf("pipeline %q, MaxThreads %d", p.Name(), p.MaxThreads())
	}
	cb, err := d.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(p)
	e.SetBytes(0, axpyArgs(n, 0.5))
	e.SetBuffer(1, x, 0)
	e.SetBuffer(2, y, 0)
	tg := min(256, p.MaxThreads())
	groups := Size{W: (n + tg - 1) / tg, H: 1, D: 1}
	e.Dispatch(groups, Size{W: tg, H: 1, D: 1})
	e.Barrier() // the second pass reads the first pass's y
	e.Dispatch(groups, Size{W: tg, H: 1, D: 1})
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if want := 1 + float32(i); floats(y)[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, floats(y)[i], want)
		}
	}
	if cb.GPUDuration() <= 0 {
		t.Errorf("GPUDuration = %v", cb.GPUDuration())
	}
}

func TestThreadgroupMemory(t *testing.T) {
	d := open(t)
	const groups, tg = 8, 64
	x, out := newBuffer(t, d, 4*groups*tg), newBuffer(t, d, 4*groups)
	for i := range groups * tg {
		floats(x)[i] = float32(i / tg)
	}
	cb, err := d.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(pipelineOf(t, d, "tgsum_f32"))
	e.SetBuffer(0, x, 0)
	e.SetBuffer(1, out, 0)
	e.SetThreadgroupMemory(0, 4*tg)
	e.Dispatch(Size{W: groups, H: 1, D: 1}, Size{W: tg, H: 1, D: 1})
	cb.Commit() // ends the open encoder
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	for g := range groups {
		if want := float32(g * tg); floats(out)[g] != want {
			t.Errorf("out[%d] = %v, want %v", g, floats(out)[g], want)
		}
	}
}

// TestDispatchGeometry checks that both MTLSize arguments arrive intact, the
// by-value struct ABI this package depends on.
func TestDispatchGeometry(t *testing.T) {
	d := open(t)
	out := newBuffer(t, d, 6*4)
	cb, err := d.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(pipelineOf(t, d, "geometry"))
	e.SetBuffer(0, out, 0)
	e.Dispatch(Size{W: 3, H: 5, D: 7}, Size{W: 8, H: 4, D: 2})
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	got := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(out.Contents()))), 6)
	if want := []uint32{3, 5, 7, 8, 4, 2}; !equal(got, want) {
		t.Errorf("kernel saw groups, threads = %v, want %v", got, want)
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBufferNoCopy(t *testing.T) {
	d := open(t)
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if _, err := d.BufferNoCopy(mem[4:]); err == nil || !strings.Contains(err.Error(), "page") {
		t.Errorf("BufferNoCopy(misaligned) = %v, want a page-alignment error", err)
	}
	const n = 1000 // not a whole number of pages
	y, err := d.BufferNoCopy(mem[:4*n])
	if err != nil {
		t.Fatal(err)
	}
	defer y.Release()
	if y.Len() != 4*n {
		t.Errorf("Len = %d, want %d", y.Len(), 4*n)
	}
	x := newBuffer(t, d, 4*n)
	for i := range n {
		floats(x)[i] = float32(i)
	}
	cb, err := d.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(pipelineOf(t, d, "axpy_f32"))
	e.SetBytes(0, axpyArgs(n, 2))
	e.SetBuffer(1, x, 0)
	e.SetBuffer(2, y, 0)
	e.Dispatch(Size{W: (n + 63) / 64, H: 1, D: 1}, Size{W: 64, H: 1, D: 1})
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	host := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), n)
	for i := range n {
		if want := 2 * float32(i); host[i] != want {
			t.Fatalf("host[%d] = %v, want %v (the GPU wrote through the no-copy buffer)", i, host[i], want)
		}
	}
}

func TestCompileError(t *testing.T) {
	open(t) // skips without a GPU
	_, err := Open("kernel void broken(device float *x [[buffer(0)]]) { x[0] = undeclared; }")
	if err == nil || !strings.Contains(err.Error(), "newLibraryWithSource") || !strings.Contains(err.Error(), "undeclared") {
		t.Errorf("Open(bad source) = %v, want the compiler's message", err)
	}
}

func TestGuards(t *testing.T) {
	d := open(t)
	if _, err := d.Pipeline("no_such_kernel"); err == nil {
		t.Error("Pipeline(no_such_kernel) succeeded")
	}
	in := d.(Informer).Info()
	if _, err := d.NewBuffer(int(in.MaxBufferLength) + 1); err == nil || !strings.Contains(err.Error(), "maxBufferLength") {
		t.Errorf("NewBuffer(maxBufferLength+1) = %v, want an error naming maxBufferLength", err)
	}
	p := pipelineOf(t, d, "axpy_f32")
	x := newBuffer(t, d, 64)
	for _, tc := range []struct {
		name   string
		encode func(Encoder)
		want   string
	}{
		{"threads", func(e Encoder) {
			e.SetPipeline(p)
			e.Dispatch(Size{W: 1, H: 1, D: 1}, Size{W: p.MaxThreads() + 1, H: 1, D: 1})
		}, "threads per threadgroup exceeds pipeline max"},
		{"no pipeline", func(e Encoder) { e.Dispatch(Size{W: 1, H: 1, D: 1}, Size{W: 1, H: 1, D: 1}) }, "without SetPipeline"},
		{"index", func(e Encoder) { e.SetBuffer(31, x, 0) }, "outside [[buffer"},
		{"offset", func(e Encoder) { e.SetBuffer(0, x, 65) }, "offset 65"},
		{"setBytes", func(e Encoder) { e.SetBytes(0, make([]byte, 4097)) }, "4097 bytes"},
		{"tgmem", func(e Encoder) { e.SetThreadgroupMemory(0, 10) }, "multiple of 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb, err := d.CommandBuffer()
			if err != nil {
				t.Fatal(err)
			}
			e := cb.Encoder()
			tc.encode(e)
			e.End()
			cb.Commit()
			if err := cb.Wait(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Wait = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLanguageVersion(t *testing.T) {
	for _, tc := range []struct {
		os   string
		want string
	}{
		{"12.7.1", ""}, {"13.0", "3.0"}, {"14.5", "3.1"}, {"15.1", "3.2"}, {"26.0", "3.2"}, {"", ""},
	} {
		if _, got := languageVersion(tc.os); got != tc.want {
			t.Errorf("languageVersion(%q) = %q, want %q", tc.os, got, tc.want)
		}
	}
}

// BenchmarkEncode measures the host cost of the hot path: one SetPipeline,
// SetBytes, two SetBuffer and one Dispatch per op. Every 1024 ops the command
// buffer is committed and waited for outside the timer.
func BenchmarkEncode(b *testing.B) {
	d := open(b)
	p := pipelineOf(b, d, "axpy_f32")
	x, y := newBuffer(b, d, 4096), newBuffer(b, d, 4096)
	args := axpyArgs(1024, 1)
	var (
		cb CommandBuffer
		e  Encoder
	)
	flush := func() {
		if cb != nil {
			e.End()
			cb.Commit()
			if err := cb.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		var err error
		if cb, err = d.CommandBuffer(); err != nil {
			b.Fatal(err)
		}
		e = cb.Encoder()
	}
	flush()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i++; i%1024 == 0 {
			b.StopTimer()
			flush()
			b.StartTimer()
		}
		e.SetPipeline(p)
		e.SetBytes(0, args)
		e.SetBuffer(1, x, 0)
		e.SetBuffer(2, y, 0)
		e.Dispatch(Size{W: 4, H: 1, D: 1}, Size{W: 256, H: 1, D: 1})
	}
	b.StopTimer()
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		b.Fatal(err)
	}
}

// TestBindingsCountSent: the calls Bindings counts (which the interpreter
// reports as a Mac's) are the messages the encoder sends, and a
// setBuffers:offsets:withRange: binding computes what separate bindings did.
func TestBindingsCountSent(t *testing.T) {
	d := open(t)
	p := pipelineOf(t, d, "axpy_f32")
	x, y := newBuffer(t, d, 4096), newBuffer(t, d, 4096)
	for i := range 1024 {
		binary.LittleEndian.PutUint32(x.Contents()[4*i:], math.Float32bits(float32(i)))
	}
	cb, err := d.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	e := cb.Encoder().(*encoder)
	for i := range 8 {
		e.SetPipeline(p)
		e.SetBytes(0, axpyArgs(256, 1))
		e.SetBuffer(1, x, 1024*(i%4)) // the same offsets again from the fifth
		e.SetBuffer(2, y, 1024*(i%4))
		e.Dispatch(Size{W: 1, H: 1, D: 1}, Size{W: 256, H: 1, D: 1})
		if i%2 == 1 {
			e.Barrier()
		}
	}
	if e.sent != e.b.Calls {
		t.Errorf("the encoder sent %d messages, Bindings counted %d", e.sent, e.b.Calls)
	}
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	got := floats(y)
	for i := range 1024 {
		if want := 2 * float32(i); got[i] != want { // y = 1·x + y, twice
			t.Fatalf("y[%d] = %g, want %g", i, got[i], want)
		}
	}
}

// TestPipelineCache: the first Open with a cache directory stores an archive
// of its pipelines, the second builds them from it, and a damaged archive is
// rebuilt; the kernels compute the same either way.
func TestPipelineCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(CacheDirEnv, dir)
	for _, tc := range []struct {
		name   string
		damage bool
		hit    bool
	}{{"miss", false, false}, {"hit", false, true}, {"damaged", true, false}, {"rebuilt", false, true}} {
		if tc.damage {
			files, _ := filepath.Glob(filepath.Join(dir, "metal-*.archive"))
			if len(files) != 1 {
				t.Fatalf("%s: archives %v, want one", tc.name, files)
			}
			os.WriteFile(files[0], []byte("not an archive"), 0o644)
		}
		d := open(t).(*device)
		if !d.cacheSupported() {
			t.Skip("no MTLBinaryArchive (macOS < 11)")
		}
		if d.arch.loaded != tc.hit {
			t.Errorf("%s: loaded from the cache %v, want %v", tc.name, d.arch.loaded, tc.hit)
		}
		x, y := newBuffer(t, d, 4*256), newBuffer(t, d, 4*256)
		floats(x)[7] = 3
		cb, err := d.CommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		e := cb.Encoder()
		e.SetPipeline(pipelineOf(t, d, "axpy_f32"))
		e.SetBytes(0, axpyArgs(256, 2))
		e.SetBuffer(1, x, 0)
		e.SetBuffer(2, y, 0)
		e.Dispatch(Size{W: 1, H: 1, D: 1}, Size{W: 256, H: 1, D: 1})
		e.End()
		cb.Commit()
		if err := cb.Wait(); err != nil {
			t.Fatal(err)
		}
		if floats(y)[7] != 6 {
			t.Errorf("%s: y[7] = %v, want 6", tc.name, floats(y)[7])
		}
	}
}

// TestResidencySet: on macOS 15 and later the device has a residency set
// whose selectors the objects answer, a large buffer joins it when made and
// leaves it when released, and command buffers run with it attached.
// Earlier systems have none.
func TestResidencySet(t *testing.T) {
	d := open(t).(*device)
	major, _, _ := strings.Cut(d.info.OSVersion, ".")
	if n, err := strconv.Atoi(major); err != nil || n < 15 {
		if d.res.Enabled() {
			t.Errorf("macOS %q: a residency set before macOS 15", d.info.OSVersion)
		}
		return
	}
	if os.Getenv("INGOT_METAL_NO_RESIDENCY") == "1" {
		return
	}
	if !d.res.Enabled() {
		t.Fatalf("macOS %s: no residency set", d.info.OSVersion)
	}
	s := d.res.set.(*residencySet)
	for name, sel := range map[string]objc.SEL{"addAllocation:": selAddAllocation, "removeAllocation:": selRemoveAllocation,
		"commit": selResidencyCommit, "requestResidency": selRequestResidency, "endResidency": selEndResidency} {
		if !msgRespond(s.id, selRespondsToSelector, sel) {
			t.Errorf("MTLResidencySet does not respond to %s", name)
		}
	}
	b, err := d.NewBuffer(MinResident) // released below
	if err != nil {
		t.Fatal(err)
	}
	if !d.res.members[b] {
		t.Error("a buffer of MinResident bytes is not in the set")
	}
	x, y := newBuffer(t, d, 4*64), b
	p := pipelineOf(t, d, "axpy_f32")
	for range 2 {
		cb, err := d.CommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		e := cb.Encoder()
		e.SetPipeline(p)
		e.SetBytes(0, axpyArgs(64, 1))
		e.SetBuffer(1, x, 0)
		e.SetBuffer(2, y, 0)
		e.Dispatch(Size{W: 1, H: 1, D: 1}, Size{W: 64, H: 1, D: 1})
		e.End()
		cb.Commit()
		if err := cb.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	b.Release()
	if d.res.members[b] {
		t.Error("a released buffer is still in the set")
	}
}
