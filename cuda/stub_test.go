//go:build linux && (amd64 || arm64) && !nogpu

package cuda_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/cuda"
	"github.com/ingot-llm/ingot/cuda/cudatest"
	"github.com/ingot-llm/ingot/cuda/ptx"
)

// The tests in this file run package cuda against testdata/stubcuda.c, a fake
// driver built here with clang, so they need no GPU. With CI=true a missing
// compiler fails them; elsewhere they skip saying what to install.

func stub(tb testing.TB) string { return cudatest.Stub(tb) }

func stubCall(tb testing.TB, name string, args ...uintptr) int {
	return cudatest.Call(tb, name, args...)
}

// open opens the stub's device for the test; the context is closed (and the
// test goroutine detached) when the test ends.
func open(tb testing.TB) *cuda.Context {
	tb.Helper()
	c, err := cuda.Open(cuda.Options{Library: stub(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	stubCall(tb, "stub_reset")
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

type launch = cudatest.Launch

func launches(tb testing.TB) []launch { return cudatest.Launches(tb) }

func TestUnavailable(t *testing.T) {
	_, err := cuda.Open(cuda.Options{Library: filepath.Join(t.TempDir(), "libcuda.so.1")})
	if !errors.Is(err, cuda.ErrUnavailable) || !strings.HasPrefix(err.Error(), "cuda: unavailable (no libcuda.so.1)") {
		t.Errorf("Open without a driver: %v, want cuda: unavailable (no libcuda.so.1)", err)
	}
	lib := stub(t)
	for _, tc := range []struct{ hook string }{{"stub_set_devices"}, {"stub_set_init_result"}} {
		t.Run(tc.hook, func(t *testing.T) {
			arg := uintptr(0)
			if tc.hook == "stub_set_init_result" {
				arg = 100 // CUDA_ERROR_NO_DEVICE, what cuInit returns on a machine without a GPU
			}
			stubCall(t, tc.hook, arg)
			defer stubCall(t, "stub_set_devices", 1)
			defer stubCall(t, "stub_set_init_result", 0)
			_, err := cuda.Open(cuda.Options{Library: lib})
			if !errors.Is(err, cuda.ErrUnavailable) || err.Error() != "cuda: unavailable (no device)" {
				t.Errorf("Open: %v, want cuda: unavailable (no device)", err)
			}
		})
	}
	if _, err := cuda.Open(cuda.Options{Library: lib, Device: 3}); err == nil || errors.Is(err, cuda.ErrUnavailable) {
		t.Errorf("Open(device 3 of 1): %v, want an error that is not ErrUnavailable", err)
	}
}

func TestDevice(t *testing.T) {
	c := open(t)
	if c.Name() != "ingot stub GPU" {
		t.Errorf("Name = %q", c.Name())
	}
	major, minor, err := c.ComputeCapability()
	if err != nil || major != 9 || minor != 0 {
		t.Errorf("ComputeCapability = %d.%d, %v; want 9.0", major, minor, err)
	}
	if n, err := c.SMCount(); n != 4 || err != nil {
		t.Errorf("SMCount = %d, %v", n, err)
	}
	if v, err := c.DriverVersion(); v != 12080 || err != nil {
		t.Errorf("DriverVersion = %d, %v", v, err)
	}
	p, err := c.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	free, total, err := c.MemInfo()
	if err != nil || total != 1<<30 || free != total-1<<20 {
		t.Errorf("MemInfo = %d, %d, %v; want %d, %d", free, total, err, total-1<<20, 1<<30)
	}
	if err := c.Free(p); err != nil {
		t.Error(err)
	}
}

func TestMemory(t *testing.T) {
	c := open(t)
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(i * 7)
	}
	a, err := c.Alloc(len(src))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Alloc(len(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CopyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyDtoD(b, a, len(src)); err != nil {
		t.Fatal(err)
	}
	if err := c.Memset(b.Add(100), 0xab, 10); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := c.CopyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), src...)
	copy(want[100:110], bytes.Repeat([]byte{0xab}, 10))
	if !bytes.Equal(got, want) {
		t.Error("device round trip changed the bytes")
	}

	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	host, err := c.AllocHost(len(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyHtoD(b, src[:8]); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyDtoH(host, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(host[:8], src[:8]) {
		t.Error("async round trip changed the bytes")
	}

	// Errors name the call and the driver's description.
	err = c.CopyDtoH(got, a.Add(len(src)-8)) // runs past the allocation
	var ce *cuda.Error
	if !errors.As(err, &ce) || ce.Code != cuda.ErrorInvalidValue || err.Error() != "cuda: cuMemcpyDtoH: CUDA_ERROR_INVALID_VALUE: invalid argument" {
		t.Errorf("copy past the end: %v", err)
	}
	for _, p := range []cuda.DevicePtr{a, b} {
		if err := c.Free(p); err != nil {
			t.Error(err)
		}
	}
	if err := c.Free(a); err == nil || err.Error() != "cuda: cuMemFree: CUDA_ERROR_INVALID_VALUE: invalid argument" {
		t.Errorf("double free: %v", err)
	}
	if err := c.FreeHost(host); err != nil {
		t.Error(err)
	}
	if err := s.Destroy(); err != nil {
		t.Error(err)
	}
	if err := s.Destroy(); err == nil || err.Error() != "cuda: cuStreamDestroy: CUDA_ERROR_INVALID_HANDLE: invalid resource handle" {
		t.Errorf("destroying a destroyed stream: %v", err)
	}
	if n := stubCall(t, "stub_live_allocs"); n != 0 {
		t.Errorf("%d allocations live at the end", n)
	}
}

// TestModules loads every generated module (the stub parses their entry
// points) and finds every kernel of the table.
func TestModules(t *testing.T) {
	c := open(t)
	mods := map[string]*cuda.Module{}
	for _, name := range ptx.Modules() {
		src, ok := ptx.Source(name)
		if !ok {
			t.Fatalf("no PTX for module %s", name)
		}
		m, err := c.LoadModule(name, src)
		if err != nil {
			t.Fatal(err)
		}
		if m.JITTime.Microseconds() != 1500 {
			t.Errorf("%s: JITTime = %v, want the 1.5 ms the stub reports", name, m.JITTime)
		}
		mods[name] = m
	}
	for _, k := range ptx.Kernels() {
		if _, err := mods[k.Module].Function(k.Name); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	_, err := mods["rmsnorm"].Function("rmsnorm_f16")
	if err == nil || err.Error() != "cuda: cuModuleGetFunction(rmsnorm, rmsnorm_f16): CUDA_ERROR_NOT_FOUND: named symbol not found" {
		t.Errorf("missing function: %v", err)
	}
	src, _ := ptx.Source("rmsnorm")
	_, err = c.LoadModule("broken", src+"\n// stub-jit-error\n")
	var ce *cuda.Error
	if !errors.As(err, &ce) || ce.Code != cuda.ErrorInvalidPTX || !strings.Contains(err.Error(), "cuda: cuModuleLoadDataEx(broken): CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed\nptxas application ptx input, line 1; error   : stub-jit-error requested") {
		t.Errorf("JIT failure: %v", err)
	}
	if _, err := c.LoadModule("garbage", "not ptx"); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_IMAGE") {
		t.Errorf("loading garbage: %v", err)
	}
	for _, m := range mods {
		if err := m.Unload(); err != nil {
			t.Error(err)
		}
	}
}

// bindings are a launch's Metal-style bindings: [[buffer(i)]] to a device
// pointer or to argument bytes, [[threadgroup(i)]] to a length.
type bindings struct {
	bufs  map[int]cuda.DevicePtr
	bytes map[int][]byte
	tg    map[int]int
}

// pack fills p for k from b the way a Metal-style encoder would, and returns
// the dynamic shared memory size and the bytes the driver must see.
func pack(tb testing.TB, k ptx.Kernel, p *cuda.Params, b bindings) (shared int, want []byte) {
	tb.Helper()
	for i, prm := range k.Params {
		switch prm.Kind {
		case ptx.Buffer:
			p.SetPtr(i, b.bufs[prm.Index])
			want = binary.LittleEndian.AppendUint64(want, uint64(b.bufs[prm.Index]))
		case ptx.Value:
			p.SetBytes(i, b.bytes[prm.Index])
			want = append(want, b.bytes[prm.Index]...)
		case ptx.Threadgroup:
			p.SetU32(i, 0, uint32(shared))
			want = binary.LittleEndian.AppendUint32(want, uint32(shared))
			shared += (b.tg[prm.Index] + 15) &^ 15
		}
	}
	return shared, want
}

func u32s(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// TestLaunchMarshalling launches real kernels on the stub and checks the
// bytes the driver read through kernelParams: pointers, by-value argument
// structs (setBytes) and threadgroup offsets, in the entry's order.
func TestLaunchMarshalling(t *testing.T) {
	c := open(t)
	mods := map[string]*cuda.Module{}
	buf, err := c.Alloc(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(buf)
	for _, tc := range []struct {
		kernel      string
		b           bindings
		grid, block cuda.Dim3
	}{
		{"rmsnorm_f32", bindings{
			bufs:  map[int]cuda.DevicePtr{1: buf, 2: buf.Add(256), 3: buf.Add(512)},
			bytes: map[int][]byte{0: u32s(4096, math.Float32bits(1e-5))},
			tg:    map[int]int{0: 128},
		}, cuda.Dim3{X: 7}, cuda.Dim3{X: 1024}},
		{"rope_neox_f32", bindings{
			bufs:  map[int]cuda.DevicePtr{1: buf.Add(1024), 2: buf.Add(4096)},
			bytes: map[int][]byte{0: u32s(3, 4096, 128, 64, 123456, math.Float32bits(1))},
		}, cuda.Dim3{X: 32, Y: 3}, cuda.Dim3{X: 64}},
		{"matvec_q4_f32", bindings{
			bufs:  map[int]cuda.DevicePtr{1: buf, 2: buf.Add(8192), 3: buf.Add(16384), 4: buf.Add(20000), 5: buf.Add(30000)},
			bytes: map[int][]byte{0: u32s(4096, 14336, 64, 1)},
		}, cuda.Dim3{X: 14336 / 8}, cuda.Dim3{X: 64}},
		{"argmax_f32", bindings{
			bufs:  map[int]cuda.DevicePtr{1: buf, 2: buf.Add(64)},
			bytes: map[int][]byte{0: u32s(128256, 0, 0, 0)},
			tg:    map[int]int{0: 128, 1: 100},
		}, cuda.Dim3{X: 1}, cuda.Dim3{X: 1024}},
	} {
		func() { // no subtests: the context belongs to this goroutine
			k, ok := ptx.Lookup(tc.kernel)
			if !ok {
				t.Fatalf("no kernel %s in cuda/ptx", tc.kernel)
			}
			m := mods[k.Module]
			if m == nil {
				src, _ := ptx.Source(k.Module)
				if m, err = c.LoadModule(k.Module, src); err != nil {
					t.Fatal(err)
				}
				mods[k.Module] = m
			}
			f, err := m.Function(k.Name)
			if err != nil {
				t.Fatal(err)
			}
			p := c.NewParams(k.Sizes()...)
			shared, want := pack(t, k, p, tc.b)
			stubCall(t, "stub_reset")
			if err := f.Launch(nil, tc.grid, tc.block, shared, p); err != nil {
				t.Fatal(err)
			}
			ls := launches(t)
			if len(ls) != 1 {
				t.Fatalf("stub saw %d launches, want 1", len(ls))
			}
			l := ls[0]
			wantDims := [7]uint32{uint32(tc.grid.X), uint32(max(tc.grid.Y, 1)), 1, uint32(tc.block.X), 1, 1, uint32(shared)}
			if l.Name != k.Name || l.Dims != wantDims || !bytes.Equal(l.Params, want) {
				t.Errorf("stub saw %s %v % x\nwant         %s %v % x", l.Name, l.Dims, l.Params, k.Name, wantDims, want)
			}
		}()
	}
	// A launch error names the kernel.
	k, _ := ptx.Lookup("matvec_q4_f32")
	f, err := mods["matvec"].Function(k.Name)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Launch(nil, cuda.Dim3{X: 1}, cuda.Dim3{X: 2048}, 0, c.NewParams(k.Sizes()...))
	if err == nil || err.Error() != "cuda: cuLaunchKernel(matvec_q4_f32): CUDA_ERROR_INVALID_VALUE: invalid argument" {
		t.Errorf("2048-thread launch: %v", err)
	}
}

// addPTX is a module with stub_add_u32(ptr, n, v), which the stub runs:
// ptr[i] += v for i < n.
const addPTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry stub_add_u32(
	.param .u64 stub_add_u32_param_0,
	.param .u32 stub_add_u32_param_1,
	.param .u32 stub_add_u32_param_2
)
{
	ret;
}
`

func addKernel(tb testing.TB, c *cuda.Context) *cuda.Function {
	tb.Helper()
	m, err := c.LoadModule("add", addPTX)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := m.Function("stub_add_u32")
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// addSetup returns the stub_add_u32 kernel, four zeroed uint32 of device
// memory for it and a stream, released when the test ends.
func addSetup(tb testing.TB, c *cuda.Context) (*cuda.Function, cuda.DevicePtr, *cuda.Stream) {
	tb.Helper()
	f := addKernel(tb, c)
	x, err := c.Alloc(16)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Free(x) })
	if err := c.Memset(x, 0, 16); err != nil {
		tb.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Destroy() })
	return f, x, s
}

func readU32s(tb testing.TB, c *cuda.Context, p cuda.DevicePtr, n int) []uint32 {
	tb.Helper()
	b := make([]byte, 4*n)
	if err := c.CopyDtoH(b, p); err != nil {
		tb.Fatal(err)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// TestGraph captures two launches, replays the graph, and changes one kernel
// node's parameters between replays, as a decode step changes pos.
func TestGraph(t *testing.T) {
	c := open(t)
	f, x, s := addSetup(t, c)
	p1, p2 := c.NewParams(8, 4, 4), c.NewParams(8, 4, 4)
	for _, p := range []*cuda.Params{p1, p2} {
		p.SetPtr(0, x)
		p.SetU32(1, 0, 4)
	}
	p1.SetU32(2, 0, 1)
	p2.SetU32(2, 0, 10)

	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p1); err != nil {
		t.Fatal(err)
	}
	n1, err := s.LastCaptured()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p2); err != nil {
		t.Fatal(err)
	}
	n2, err := s.LastCaptured()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Memset(x, 0, 4); err == nil {
		t.Error("memset on a capturing stream: no error from the stub")
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	if ls := launches(t); len(ls) != 0 {
		t.Errorf("captured launches ran: %v", ls)
	}
	nodes, err := g.Nodes()
	if err != nil || len(nodes) != 2 || nodes[0] != n1 || nodes[1] != n2 {
		t.Fatalf("Nodes = %v, %v; want [%v %v]", nodes, err, n1, n2)
	}
	e, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy() // not before the updates below: they name its nodes
	if err := e.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got := readU32s(t, c, x, 4); fmt.Sprint(got) != "[11 11 11 11]" {
		t.Errorf("after one replay: %v, want [11 11 11 11]", got)
	}
	// Per token: change the second node's v, replay.
	p2.SetU32(2, 0, 100)
	p2.SetU32(1, 0, 2)
	if err := e.SetKernelParams(n2, f, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p2); err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(s); err != nil {
		t.Fatal(err)
	}
	if got := readU32s(t, c, x, 4); fmt.Sprint(got) != "[112 112 12 12]" {
		t.Errorf("after the update: %v, want [112 112 12 12]", got)
	}
	ls := launches(t)
	if len(ls) != 4 || !bytes.Equal(ls[3].Params[8:], u32s(2, 100)) {
		t.Errorf("recorded launches %v", ls)
	}
	if err := e.SetKernelParams(cuda.GraphNode(0x1234), f, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p2); err == nil ||
		err.Error() != "cuda: cuGraphExecKernelNodeSetParams(stub_add_u32): CUDA_ERROR_INVALID_HANDLE: invalid resource handle" {
		t.Errorf("update of a bad node: %v", err)
	}
	if err := e.Destroy(); err != nil {
		t.Error(err)
	}
}

// TestLaunchDependent: a programmatic dependent launch runs like a launch
// and is marked so, on a stream and as a captured node, whose mark survives
// a parameter update.
func TestLaunchDependent(t *testing.T) {
	c := open(t)
	f, x, s := addSetup(t, c)
	p := c.NewParams(8, 4, 4)
	p.SetPtr(0, x)
	p.SetU32(1, 0, 4)
	p.SetU32(2, 0, 1)
	if err := f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
		t.Fatal(err)
	}
	if err := f.LaunchDependent(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := f.LaunchDependent(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
		t.Fatal(err)
	}
	n, err := s.LastCaptured()
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	e, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Destroy()
	p.SetU32(2, 0, 10)
	if err := e.SetKernelParams(n, f, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(s); err != nil {
		t.Fatal(err)
	}
	if got := readU32s(t, c, x, 4); fmt.Sprint(got) != "[12 12 12 12]" {
		t.Errorf("after 1 + 1 + 10: %v", got)
	}
	ls := launches(t)
	if len(ls) != 3 || ls[0].Dependent || !ls[1].Dependent || !ls[2].Dependent {
		t.Errorf("launches %+v: want the last two dependent", ls)
	}
}

// TestThreading checks the one-goroutine rule: another goroutine's calls
// fail until it attaches the context.
func TestThreading(t *testing.T) {
	c := open(t)
	f := addKernel(t, c)
	x, err := c.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	p := c.NewParams(8, 4, 4)
	p.SetPtr(0, x)
	p.SetU32(1, 0, 4)
	done := make(chan [3]error)
	go func() {
		var errs [3]error
		_, errs[0] = c.Alloc(16) // checked: names both threads
		errs[1] = f.Launch(nil, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p)
		if errs[2] = c.Attach(); errs[2] == nil {
			errs[2] = f.Launch(nil, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p)
		}
		done <- errs
	}()
	errs := <-done
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "the context is attached to thread") {
		t.Errorf("Alloc from another goroutine: %v", errs[0])
	}
	if errs[1] == nil || errs[1].Error() != "cuda: cuLaunchKernel(stub_add_u32): CUDA_ERROR_INVALID_CONTEXT: invalid device context" {
		t.Errorf("Launch from another goroutine: %v", errs[1])
	}
	if errs[2] != nil {
		t.Errorf("Launch after Attach: %v", errs[2])
	}
	// Take it back for the cleanup.
	if err := c.Attach(); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(x); err != nil {
		t.Error(err)
	}
}

// TestHotPathAllocs checks that launches and graph updates allocate nothing.
func TestHotPathAllocs(t *testing.T) {
	c := open(t)
	f := addKernel(t, c)
	x, err := c.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(x)
	p := c.NewParams(8, 4, 4)
	p.SetPtr(0, x)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if n := testing.AllocsPerRun(100, func() {
		p.SetU32(2, 0, 1)
		if err := f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Launch: %v allocations per call", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		p.SetU32(2, 0, 1)
		if err := f.LaunchDependent(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("LaunchDependent: %v allocations per call", n)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
		t.Fatal(err)
	}
	node, err := s.LastCaptured()
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	e, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		p.SetU32(2, 0, 2)
		if err := e.SetKernelParams(node, f, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
			t.Fatal(err)
		}
		if err := e.Launch(s); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("SetKernelParams + Launch: %v allocations per call", n)
	}
}

// BenchmarkLaunch is the host cost of one launch through purego (into the
// stub, which records it).
func BenchmarkLaunch(b *testing.B) {
	c := open(b)
	f := addKernel(b, c)
	x, err := c.Alloc(16)
	if err != nil {
		b.Fatal(err)
	}
	p := c.NewParams(8, 4, 4)
	p.SetPtr(0, x) // n = 0: the stub touches nothing
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Launch(nil, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, p); err != nil {
			b.Fatal(err)
		}
	}
}
