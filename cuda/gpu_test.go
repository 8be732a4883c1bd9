//go:build cuda && linux && (amd64 || arm64)

package cuda_test

// GPU tests: go test -tags cuda ./cuda on a machine with an NVIDIA GPU (run
// CUDA_CACHE_DISABLE=1 for cold JIT times). They load every generated PTX
// module and check the kernels against float64 references in Go, the PTX
// compat's math and collectives against their definitions, a CUDA graph with
// per-replay parameter updates, and log timings. CI never builds them.

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ingot-llm/ingot/cuda"
	"github.com/ingot-llm/ingot/cuda/ptx"
)

type gpu struct {
	c     *cuda.Context
	mods  map[string]*cuda.Module
	kerns map[string]*gkernel
}

type gkernel struct {
	k ptx.Kernel
	f *cuda.Function
	p *cuda.Params
}

var (
	gpuOnce sync.Once
	theGPU  *gpu
	gpuErr  error
)

// getGPU returns the process's device, attached to the calling test.
func getGPU(tb testing.TB) *gpu {
	tb.Helper()
	gpuOnce.Do(func() {
		c, err := cuda.Open(cuda.Options{})
		if err != nil {
			gpuErr = err
			return
		}
		theGPU = &gpu{c: c, mods: map[string]*cuda.Module{}, kerns: map[string]*gkernel{}}
	})
	if gpuErr != nil {
		tb.Fatal(gpuErr)
	}
	if err := theGPU.c.Attach(); err != nil {
		tb.Fatal(err)
	}
	return theGPU
}

// testKernels describes the kernels of cuda/testdata, which have no table.
var testKernels = map[string]ptx.Kernel{}

func init() {
	for _, f := range []string{"exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh"} {
		testKernels["math_"+f] = ptx.Kernel{Name: "math_" + f, Module: "testdata/mathcheck", Params: []ptx.Param{
			{Kind: ptx.Value, Index: 0, Size: 4, Align: 4}, {Kind: ptx.Buffer, Index: 1, Size: 8, Align: 8}, {Kind: ptx.Buffer, Index: 2, Size: 8, Align: 8}}}
	}
	testKernels["coll_f32"] = ptx.Kernel{Name: "coll_f32", Module: "testdata/collectives", Params: []ptx.Param{
		{Kind: ptx.Buffer, Index: 0, Size: 8, Align: 8}, {Kind: ptx.Buffer, Index: 1, Size: 8, Align: 8}}}
	testKernels["mm8_f32"] = ptx.Kernel{Name: "mm8_f32", Module: "testdata/collectives", Params: []ptx.Param{
		{Kind: ptx.Buffer, Index: 0, Size: 8, Align: 8}, {Kind: ptx.Buffer, Index: 1, Size: 8, Align: 8},
		{Kind: ptx.Buffer, Index: 2, Size: 8, Align: 8}, {Kind: ptx.Buffer, Index: 3, Size: 8, Align: 8}}}
}

// module loads (once) a module of cuda/ptx or "testdata/<name>".
func (g *gpu) module(tb testing.TB, name string) *cuda.Module {
	tb.Helper()
	if m := g.mods[name]; m != nil {
		return m
	}
	var src string
	if rest, ok := cutPrefix(name, "testdata/"); ok {
		b, err := os.ReadFile("testdata/" + rest + ".ptx")
		if err != nil {
			tb.Fatal(err)
		}
		src = string(b)
	} else if s, ok := ptx.Source(name); ok {
		src = s
	} else {
		tb.Fatalf("no module %s", name)
	}
	m, err := g.c.LoadModule(name, src)
	if err != nil {
		tb.Fatal(err)
	}
	g.mods[name] = m
	return m
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

func (g *gpu) kernel(tb testing.TB, name string) *gkernel {
	tb.Helper()
	if k := g.kerns[name]; k != nil {
		return k
	}
	k, ok := ptx.Lookup(name)
	if !ok {
		if k, ok = testKernels[name]; !ok {
			tb.Fatalf("no kernel %s", name)
		}
	}
	f, err := g.module(tb, k.Module).Function(name)
	if err != nil {
		tb.Fatal(err)
	}
	gk := &gkernel{k: k, f: f, p: g.c.NewParams(k.Sizes()...)}
	g.kerns[name] = gk
	return gk
}

// run launches kernel name with Metal-style bindings on the default stream
// and waits.
func (g *gpu) run(tb testing.TB, name string, grid, block cuda.Dim3, b bindings) {
	tb.Helper()
	k := g.kernel(tb, name)
	shared, _ := pack(tb, k.k, k.p, b)
	if err := k.f.Launch(nil, grid, block, shared, k.p); err != nil {
		tb.Fatal(err)
	}
	if err := g.c.Synchronize(); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
}

func (g *gpu) upload(tb testing.TB, b []byte) cuda.DevicePtr {
	tb.Helper()
	p, err := g.c.Alloc(max(len(b), 16))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.c.Free(p) })
	if err := g.c.CopyHtoD(p, b); err != nil {
		tb.Fatal(err)
	}
	return p
}

// poisoned returns n bytes of device memory filled with 0xff (NaN as floats),
// so an element a kernel fails to write shows.
func (g *gpu) poisoned(tb testing.TB, n int) cuda.DevicePtr {
	tb.Helper()
	return g.upload(tb, slices.Repeat([]byte{0xff}, n))
}

func (g *gpu) read(tb testing.TB, p cuda.DevicePtr, n int) []byte {
	tb.Helper()
	b := make([]byte, n)
	if err := g.c.CopyDtoH(b, p); err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestGPUDevice logs the device and loads every module, timing the JIT.
func TestGPUDevice(t *testing.T) {
	g := getGPU(t)
	c := g.c
	major, minor, _ := c.ComputeCapability()
	sms, _ := c.SMCount()
	drv, _ := c.DriverVersion()
	free, total, _ := c.MemInfo()
	t.Logf("device: %s, compute capability %d.%d, %d SMs, driver API %d.%d, memory %.1f GiB free of %.1f GiB",
		c.Name(), major, minor, sms, drv/1000, drv%1000/10, float64(free)/(1<<30), float64(total)/(1<<30))
	t.Logf("CUDA_CACHE_DISABLE=%q", os.Getenv("CUDA_CACHE_DISABLE"))
	var sum time.Duration
	names := append(ptx.Modules(), "testdata/mathcheck", "testdata/collectives")
	for _, name := range names {
		start := time.Now()
		m := g.module(t, name)
		wall := time.Since(start)
		sum += wall
		src, ok := ptx.Source(name)
		if !ok {
			b, _ := os.ReadFile(name + ".ptx")
			src = string(b)
		}
		t.Logf("module %-22s %7d bytes of PTX: load %7.1f ms (driver JIT %7.1f ms)", name, len(src), wall.Seconds()*1e3, m.JITTime.Seconds()*1e3)
	}
	t.Logf("all %d modules: %.1f ms", len(names), sum.Seconds()*1e3)
	for _, k := range ptx.Kernels() {
		gk := g.kernel(t, k.Name)
		regs, _ := gk.f.Attribute(cuda.FuncNumRegs)
		mt, _ := gk.f.Attribute(cuda.FuncMaxThreadsPerBlock)
		local, _ := gk.f.Attribute(cuda.FuncLocalSizeBytes)
		t.Logf("kernel %-22s regs %3d, max threads %4d, local %3d bytes", k.Name, regs, mt, local)
	}
}

// TestGPUKernels runs every kernel check on the GPU at model shapes.
func TestGPUKernels(t *testing.T) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.f(t, getGPU(t), true) })
	}
}

// TestGPUGraph captures a RoPE launch in a CUDA graph and replays it at
// several positions, changing only the node's parameters between replays.
func TestGPUGraph(t *testing.T) {
	g := getGPU(t)
	c := g.c
	r := rand.New(rand.NewPCG(23, 24))
	const Dh, half, heads = 128, 64, 4
	inv := make([]float32, half)
	for j := range inv {
		inv[j] = float32(math.Pow(10000, -float64(2*j)/Dh))
	}
	x := randn(r, heads*Dh)
	xb, invb := g.upload(t, f32b(x)), g.upload(t, f32b(inv))
	k := g.kernel(t, "rope_neox_f32")
	args := func(pos int) bindings {
		return bindings{bufs: map[int]cuda.DevicePtr{1: invb, 2: xb}, bytes: map[int][]byte{0: u32s(1, heads*Dh, Dh, half, uint32(pos), math.Float32bits(1))}}
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	grid, block := cuda.Dim3{X: heads, Y: 1}, cuda.Dim3{X: 64}
	pack(t, k.k, k.p, args(0))
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := k.f.Launch(s, grid, block, 0, k.p); err != nil {
		t.Fatal(err)
	}
	node, err := s.LastCaptured()
	if err != nil {
		t.Fatal(err)
	}
	graph, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer graph.Destroy()
	exec, err := graph.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Destroy()
	for _, pos := range []int{0, 17, 5000, 300000} {
		if err := s.CopyHtoD(xb, f32b(x)); err != nil {
			t.Fatal(err)
		}
		pack(t, k.k, k.p, args(pos))
		if err := exec.SetKernelParams(node, k.f, grid, block, 0, k.p); err != nil {
			t.Fatal(err)
		}
		if err := exec.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		y := readF32(t, g, xb, heads*Dh)
		worst := 0.0
		for h := range heads {
			for j := range half {
				a := float32(pos) * inv[j]
				cs, sn := math.Cos(float64(a)), math.Sin(float64(a))
				x0, x1 := float64(x[h*Dh+j]), float64(x[h*Dh+j+half])
				worst = max(worst, math.Abs(float64(y[h*Dh+j])-(x0*cs-x1*sn)), math.Abs(float64(y[h*Dh+j+half])-(x1*cs+x0*sn)))
			}
		}
		t.Logf("graph replay with pos=%d set by cuGraphExecKernelNodeSetParams: max |y−ref| = %.2e", pos, worst)
		if worst > 1e-5 {
			t.Errorf("graph replay pos=%d: error %.2e", pos, worst)
		}
	}
}

// TestGPUTiming logs launch, graph and bandwidth figures (no assertions).
func TestGPUTiming(t *testing.T) {
	g := getGPU(t)
	c := g.c
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	e0, _ := c.NewEvent()
	e1, _ := c.NewEvent()
	gpuTime := func() time.Duration {
		if err := e1.Synchronize(); err != nil {
			t.Fatal(err)
		}
		d, err := e1.Since(e0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// Launch cost: copy_f32 with n = 0 (one block of 32 threads, no work).
	k := g.kernel(t, "copy_f32")
	dummy := g.poisoned(t, 64)
	pack(t, k.k, k.p, bindings{bufs: map[int]cuda.DevicePtr{1: dummy, 2: dummy}, bytes: map[int][]byte{0: u32s(0, 0)}})
	const nl = 20000
	for range 100 {
		k.f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, k.p)
	}
	s.Synchronize()
	e0.Record(s)
	start := time.Now()
	for range nl {
		if err := k.f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, k.p); err != nil {
			t.Fatal(err)
		}
	}
	cpu := time.Since(start)
	e1.Record(s)
	t.Logf("launch (purego SyscallN, empty kernel, %d back to back): %.2f µs CPU per launch, %.2f µs GPU per launch",
		nl, cpu.Seconds()*1e6/nl, gpuTime().Seconds()*1e6/nl)
	start = time.Now()
	const ns = 2000
	for range ns {
		k.f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, k.p)
		s.Synchronize()
	}
	t.Logf("launch + cuStreamSynchronize round trip: %.2f µs", time.Since(start).Seconds()*1e6/ns)

	// Graph of 1000 empty nodes.
	const nodes = 1000
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	var last cuda.GraphNode
	for range nodes {
		if err := k.f.Launch(s, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, k.p); err != nil {
			t.Fatal(err)
		}
	}
	last, err = s.LastCaptured()
	if err != nil {
		t.Fatal(err)
	}
	graph, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	exec, err := graph.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	exec.Launch(s)
	s.Synchronize()
	const reps = 20
	e0.Record(s)
	start = time.Now()
	for range reps {
		if err := exec.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	cpu = time.Since(start)
	e1.Record(s)
	t.Logf("graph of %d empty kernels: %.3f µs GPU per node, cuGraphLaunch %.1f µs CPU", nodes, gpuTime().Seconds()*1e6/(reps*nodes), cpu.Seconds()*1e6/reps)
	start = time.Now()
	const nu = 10000
	for i := range nu {
		k.p.SetU32(0, 4, uint32(i))
		if err := exec.SetKernelParams(last, k.f, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, k.p); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("cuGraphExecKernelNodeSetParams: %.2f µs CPU per update", time.Since(start).Seconds()*1e6/nu)
	exec.Destroy()
	graph.Destroy()

	// Device-to-device copy bandwidth.
	const nb = 1 << 30
	a, err := c.Alloc(nb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Alloc(nb)
	if err != nil {
		t.Fatal(err)
	}
	s.CopyDtoD(b, a, nb)
	e0.Record(s)
	for range 5 {
		s.CopyDtoD(b, a, nb)
	}
	e1.Record(s)
	t.Logf("cuMemcpyDtoD 1 GiB: %.0f GB/s (read + write)", 5*2*nb/gpuTime().Seconds()/1e9)
	c.Free(a)
	c.Free(b)

	// matvec_q4_f32, L2-cold: rotate through copies of the weights totalling > 200 MB.
	r := rand.New(rand.NewPCG(25, 26))
	for _, sh := range []struct{ N, K int }{{4096, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}} {
		const G = 64
		m := randQuant(r, sh.N, sh.K, G, 4)
		wbytes, sbytes := packCodes(m.q, 4), f32b(m.scales)
		bbytes := f32b(m.biases)
		per := len(wbytes) + len(sbytes) + len(bbytes)
		copies := max(1, (200<<20)/per)
		type set struct{ w, s, b cuda.DevicePtr }
		var sets []set
		for range copies {
			sets = append(sets, set{g.upload(t, wbytes), g.upload(t, sbytes), g.upload(t, bbytes)})
		}
		xb, yb := g.upload(t, f32b(randn(r, sh.K))), g.poisoned(t, 4*sh.N)
		mk := g.kernel(t, "matvec_q4_f32")
		var times []float64
		for i := range 5 * copies {
			st := sets[i%copies]
			pack(t, mk.k, mk.p, bindings{bufs: map[int]cuda.DevicePtr{1: st.w, 2: xb, 3: yb, 4: st.s, 5: st.b},
				bytes: map[int][]byte{0: u32s(uint32(sh.K), uint32(sh.N), G, 1)}})
			e0.Record(s)
			if err := mk.f.Launch(s, cuda.Dim3{X: sh.N / 8}, cuda.Dim3{X: 64}, 0, mk.p); err != nil {
				t.Fatal(err)
			}
			e1.Record(s)
			times = append(times, gpuTime().Seconds())
		}
		sort.Float64s(times)
		med := times[len(times)/2]
		bytes := float64(per + 4*sh.K + 4*sh.N)
		t.Logf("matvec_q4_f32 %d×%d: %.1f µs median of %d, %.0f GB/s (%d weight copies, L2-cold)", sh.N, sh.K, med*1e6, len(times), bytes/med/1e9, copies)
	}
}
