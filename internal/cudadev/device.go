// Package cudadev is the GPU device seam (metal.Device) over an NVIDIA GPU:
// package cuda drives the device and package cuda/ptx holds ingot's kernels
// compiled from the same MSL sources Metal and the interpreter run. With it,
// the Metal half of package kernels (its dispatch code, hazard tracking,
// pipelining and counters) runs unchanged on CUDA.
//
// How Metal's model maps onto CUDA:
//   - A Buffer is device memory (cuMemAlloc). The host cannot address it:
//     Contents returns nil and the host copies through ReadAt and WriteAt
//     (metal.HostCopier). BufferNoCopy is refused, so weights are copied.
//   - A Pipeline is an entry point of the PTX module of its shader file,
//     loaded (JIT-compiled) on first use.
//   - An Encoder records each dispatch's arguments in host memory, mapping
//     [[buffer(i)]] and [[threadgroup(i)]] bindings onto the entry's
//     parameters (package cuda/ptx describes them): setBytes to a struct
//     argument is passed by value, setBytes to a pointer argument goes to a
//     small device buffer uploaded with the command buffer, threadgroup
//     memory is the launch's dynamic shared memory at offsets.
//   - Commit launches the recorded dispatches in order on one stream
//     (barriers are implied) between two events; Wait waits for the second.
//     A command buffer of the same kernels in the same order as an earlier
//     one (a decode step: the same ops every token) replays that one's CUDA
//     graph instead, with the arguments that changed (positions, lengths,
//     grids) updated in its nodes: one launch instead of hundreds.
//   - On compute capability 9.0 and later every kernel is a programmatic
//     dependent launch: its module is loaded with griddepcontrol.wait at the
//     top of every entry (gridDependent), so a kernel's launch overlaps the
//     end of the one before it while it still reads only what that one
//     wrote when it completed.
//
// The driver's context is current on one OS thread: every driver call runs
// on a goroutine locked to it, which the Device's methods hand their work to,
// so the Device is safe for concurrent use.
package cudadev

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/ingot-llm/ingot/cuda"
	"github.com/ingot-llm/ingot/cuda/ptx"
	"github.com/ingot-llm/ingot/metal"
)

// ErrNoCopy is BufferNoCopy's error: device memory cannot wrap host memory.
var ErrNoCopy = errors.New("cudadev: device memory cannot wrap host memory (weights are copied to the GPU)")

// A Device is one NVIDIA GPU; see the package documentation.
type Device struct {
	work   chan func() // run on the goroutine that owns the context
	done   chan struct{}
	c      *cuda.Context
	s      *cuda.Stream
	name   string
	total  int64
	driver int
	cc     [2]int // compute capability (major, minor)

	mu     sync.Mutex
	pipes  map[string]*pipeline
	closed bool

	// owned by the context's goroutine
	mods     map[string]*cuda.Module
	graphs   []*graph // most recently used first
	events   []*cuda.Event
	noGraphs bool
	pdl      bool      // programmatic dependent launches (see gridDependent)
	prof     *profiler // nil unless profiling
}

// maxGraphs is how many decode-step graphs are kept (a step's shape changes
// with the attention's split as the context grows).
const maxGraphs = 32

// maxSameGraphs is how many graphs of one kernel sequence are kept.
const maxSameGraphs = 16

// minGraphLaunches is the fewest launches worth a graph.
const minGraphLaunches = 8

// graph is an instantiated capture of a command buffer's launches, with the
// arguments its nodes hold now.
type graph struct {
	key    []*pipeline // the kernels, in launch order
	g      *cuda.Graph // kept: node updates name its nodes
	exec   *cuda.GraphExec
	nodes  []cuda.GraphNode
	set    []launchArgs
	consts cuda.DevicePtr // the constants the nodes point at
	nconst int
}

// launchArgs is what a node launches with.
type launchArgs struct {
	grid, block cuda.Dim3
	shared      int
	raw         []byte // the arguments as encoded (see commandBuffer.rawArgs)
}

// Options configures Open.
type Options struct {
	Library  string // the driver library; "": $INGOT_CUDA_LIB, else libcuda.so.1
	Device   int    // the device ordinal
	NoGraphs bool   // launch every command buffer's kernels one by one (for comparison)
	NoPDL    bool   // no programmatic dependent launches (for comparison)
	// Profile times every kernel and writes the totals here at Release
	// (INGOT_CUDA_PROFILE=1: to stderr); see profiler. ProfileBlock is the
	// blocker's size in bytes (0: 8 GiB).
	Profile      io.Writer
	ProfileBlock int
}

// Open opens device o.Device's primary context on a goroutine of its own.
// Without a driver or a device the error wraps cuda.ErrUnavailable.
func Open(o Options) (*Device, error) {
	d := &Device{work: make(chan func()), done: make(chan struct{}), pipes: map[string]*pipeline{}, mods: map[string]*cuda.Module{}, noGraphs: o.NoGraphs, prof: newProfiler(o)}
	opened := make(chan error, 1)
	go d.loop(o, opened)
	if err := <-opened; err != nil {
		return nil, err
	}
	return d, nil
}

// loop owns the context: it opens it, then runs the work sent to it until
// Release.
func (d *Device) loop(o Options, opened chan<- error) {
	runtime.LockOSThread() // cuda.Open locks too; the context stays on this thread
	defer close(d.done)
	c, err := cuda.Open(cuda.Options{Library: o.Library, Device: o.Device})
	if err == nil {
		d.c = c
		d.name = c.Name()
		d.total, err = c.TotalMem()
		if err == nil {
			d.s, err = c.NewStream()
		}
		if err == nil {
			d.driver, err = c.DriverVersion()
		}
		if err == nil {
			d.cc[0], d.cc[1], err = c.ComputeCapability()
			d.pdl = !o.NoPDL && d.prof == nil && d.cc[0] >= 9
		}
		if err != nil {
			c.Close()
		}
	}
	opened <- err
	if err != nil {
		return
	}
	for f := range d.work {
		f()
	}
	for _, g := range d.graphs {
		g.destroy(d)
	}
	if d.prof != nil && d.prof.block != 0 {
		d.c.Free(d.prof.block)
	}
	for _, e := range d.events {
		e.Destroy()
	}
	for _, m := range d.mods {
		m.Unload()
	}
	d.s.Destroy()
	d.c.Close()
}

// do runs f on the context's goroutine and returns its error.
func (d *Device) do(f func() error) error {
	errc := make(chan error, 1)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errors.New("cudadev: device released")
	}
	d.mu.Unlock()
	d.work <- func() { errc <- f() }
	return <-errc
}

// Kind is "cuda": kernels names the backend "cuda:" + Name.
func (d *Device) Kind() string { return "cuda" }

// Name is the GPU's name ("NVIDIA H100 80GB HBM3").
func (d *Device) Name() string { return d.name }

// DriverVersion is the CUDA driver API version (13000 for 13.0).
func (d *Device) DriverVersion() int { return d.driver }

// ComputeCapability is the GPU's compute capability (9, 0 for an H100).
// Package kernels picks kernels by it; Pipeline refuses a kernel whose PTX
// module targets a later architecture (cuda/ptx.Target).
func (d *Device) ComputeCapability() (major, minor int) { return d.cc[0], d.cc[1] }

// MaxWorkingSet is the device memory free now (admission's limit).
func (d *Device) MaxWorkingSet() int64 {
	var free int64
	if err := d.do(func() (err error) { free, _, err = d.c.MemInfo(); return }); err != nil {
		return d.total
	}
	return free
}

// MaxBufferLength: one allocation can take the whole device.
func (d *Device) MaxBufferLength() int { return int(min(d.total, 1<<62)) }

// Release waits for the device's work and closes the context. Buffers and
// pipelines must not be used afterwards.
func (d *Device) Release() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	d.mu.Unlock()
	close(d.work)
	<-d.done
	if d.prof != nil {
		d.prof.report()
	}
}

// buffer is device memory.
type buffer struct {
	d *Device
	p cuda.DevicePtr
	n int
}

// NewBuffer allocates n zeroed bytes of device memory.
func (d *Device) NewBuffer(n int) (metal.Buffer, error) {
	b := &buffer{d: d, n: n}
	err := d.do(func() error {
		var err error
		if b.p, err = d.c.Alloc(max(n, 16)); err != nil {
			return err
		}
		return d.c.Memset(b.p, 0, max(n, 16))
	})
	if err != nil {
		return nil, fmt.Errorf("cudadev: new buffer of %d bytes: %w", n, err)
	}
	return b, nil
}

// BufferNoCopy returns ErrNoCopy: the GPU cannot read host memory at speed.
func (d *Device) BufferNoCopy([]byte) (metal.Buffer, error) { return nil, ErrNoCopy }

func (b *buffer) Contents() []byte { return nil }
func (b *buffer) Len() int         { return b.n }

// Release frees the buffer's memory once the device's queued work is done.
func (b *buffer) Release() {
	b.d.do(func() error {
		if err := b.d.s.Synchronize(); err != nil {
			return err
		}
		return b.d.c.Free(b.p)
	})
}

// ReadAt copies len(dst) bytes at off to dst (after the work queued so far).
func (b *buffer) ReadAt(dst []byte, off int) error {
	if off < 0 || off+len(dst) > b.n {
		return fmt.Errorf("cudadev: read of [%d, %d) from a %d-byte buffer", off, off+len(dst), b.n)
	}
	return b.d.do(func() error {
		if err := b.d.s.Synchronize(); err != nil {
			return err
		}
		return b.d.c.CopyDtoH(dst, b.p.Add(off))
	})
}

// WriteAt copies src into the buffer at off (after the work queued so far).
func (b *buffer) WriteAt(src []byte, off int) error {
	if off < 0 || off+len(src) > b.n {
		return fmt.Errorf("cudadev: write of [%d, %d) into a %d-byte buffer", off, off+len(src), b.n)
	}
	return b.d.do(func() error {
		if err := b.d.s.Synchronize(); err != nil {
			return err
		}
		return b.d.c.CopyHtoD(b.p.Add(off), src)
	})
}

// pipeline is one entry point and its launch parameter block.
type pipeline struct {
	k      ptx.Kernel
	f      *cuda.Function
	params *cuda.Params // filled and launched on the context's goroutine
	max    int
}

func (p *pipeline) Name() string    { return p.k.Name }
func (p *pipeline) MaxThreads() int { return p.max }

// Pipeline returns the kernel with this host name, loading its module on
// first use.
func (d *Device) Pipeline(name string) (metal.Pipeline, error) {
	d.mu.Lock()
	p, ok := d.pipes[name]
	d.mu.Unlock()
	if ok {
		return p, nil
	}
	k, ok := ptx.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("cudadev: no kernel %q in the PTX (go generate ./cuda/ptx)", name)
	}
	if major, minor, ok := ptx.Target(k.Module); ok && (major > d.cc[0] || major == d.cc[0] && minor > d.cc[1]) {
		return nil, fmt.Errorf("cudadev: kernel %q (module %s) targets sm_%d%d; the GPU's compute capability is %d.%d", name, k.Module, major, minor, d.cc[0], d.cc[1])
	}
	p = &pipeline{k: k}
	err := d.do(func() error {
		m := d.mods[k.Module]
		if m == nil {
			src, ok := ptx.Source(k.Module)
			if !ok {
				return fmt.Errorf("cudadev: no PTX module %q", k.Module)
			}
			if d.pdl {
				src, _ = gridDependent(src)
			}
			var err error
			if m, err = d.c.LoadModule(k.Module, src); err != nil {
				return err
			}
			d.mods[k.Module] = m
		}
		var err error
		if p.f, err = m.Function(name); err != nil {
			return err
		}
		if p.max, err = p.f.Attribute(cuda.FuncMaxThreadsPerBlock); err != nil {
			return err
		}
		p.params = d.c.NewParams(k.Sizes()...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if q, ok := d.pipes[name]; ok {
		return q, nil // another goroutine loaded it meanwhile
	}
	d.pipes[name] = p
	return p, nil
}

// CommandBuffer starts recording dispatches.
func (d *Device) CommandBuffer() (metal.CommandBuffer, error) {
	return &commandBuffer{d: d}, nil
}

// commandBuffer is a list of recorded launches.
type commandBuffer struct {
	d        *Device
	launches []launch
	args     []byte // every launch's parameter bytes, in order
	consts   []byte // setBytes data for pointer parameters, uploaded with the launches
	constBuf cuda.DevicePtr
	start    *cuda.Event
	end      *cuda.Event
	err      error
	gpu      time.Duration

	// profiling only: an event before the blocker, one after each launch,
	// and the CPU time the launches took
	b0     *cuda.Event
	marks  []*cuda.Event
	submit time.Duration
}

// launch is one recorded dispatch: its parameters are args[off:off+size] in
// the entry's order; fix lists the pointer parameters into consts.
type launch struct {
	p           *pipeline
	grid, block cuda.Dim3
	shared      int
	off         int
	fix         []constRef
}

type constRef struct{ param, off int } // parameter param points at consts[off:]

func (cb *commandBuffer) Encoder() metal.Encoder { return &encoder{cb: cb} }

// Commit uploads the command buffer's constants and launches its dispatches
// in order on the device's stream, between two timing events: as a replay of
// the graph of an earlier command buffer of the same kernels, or one by one.
func (cb *commandBuffer) Commit() {
	if cb.err != nil {
		return // an encoding error: Wait returns it
	}
	d := cb.d
	cb.err = d.do(func() error {
		var err error
		if cb.start, err = d.event(); err != nil {
			return err
		}
		if cb.end, err = d.event(); err != nil {
			return err
		}
		if d.prof != nil {
			return cb.launchProfiled()
		}
		if len(cb.launches) >= minGraphLaunches && !d.noGraphs {
			return cb.replay()
		}
		if len(cb.consts) > 0 {
			if cb.constBuf, err = d.c.Alloc(len(cb.consts)); err != nil {
				return err
			}
			if err := d.s.CopyHtoD(cb.constBuf, cb.consts); err != nil {
				return err
			}
		}
		if err := cb.start.Record(d.s); err != nil {
			return err
		}
		for i := range cb.launches {
			l := &cb.launches[i]
			if err := d.launch(l, cb.fill(l, cb.constBuf)); err != nil {
				return err
			}
		}
		return cb.end.Record(d.s)
	})
}

// launch enqueues l with parameters p on the device's stream: a
// programmatic dependent launch where the device makes them.
func (d *Device) launch(l *launch, p *cuda.Params) error {
	if d.pdl {
		return l.p.f.LaunchDependent(d.s, l.grid, l.block, l.shared, p)
	}
	return l.p.f.Launch(d.s, l.grid, l.block, l.shared, p)
}

// fill sets l's pipeline's parameter block to l's arguments, pointing its
// constants at consts.
func (cb *commandBuffer) fill(l *launch, consts cuda.DevicePtr) *cuda.Params {
	p := l.p.params
	off := l.off
	for i, prm := range l.p.k.Params {
		copy(p.Slot(i), cb.args[off:off+prm.Size])
		off += prm.Size
	}
	for _, f := range l.fix {
		p.SetPtr(f.param, consts.Add(f.off))
	}
	return p
}

// replay launches the command buffer as its graph: found by its kernels'
// sequence and updated where the arguments differ, or captured now.
func (cb *commandBuffer) replay() error {
	d := cb.d
	g := d.findGraph(cb)
	if g == nil {
		var err error
		if g, err = cb.capture(); err != nil {
			return err
		}
	} else {
		for i := range cb.launches {
			if !g.differs(cb, i) {
				continue
			}
			l, prev := &cb.launches[i], &g.set[i]
			p := cb.fill(l, g.consts)
			if err := g.exec.SetKernelParams(g.nodes[i], l.p.f, l.grid, l.block, l.shared, p); err != nil {
				return err
			}
			prev.grid, prev.block, prev.shared = l.grid, l.block, l.shared
			prev.raw = append(prev.raw[:0], cb.rawArgs(i)...)
		}
	}
	if len(cb.consts) > 0 {
		if err := d.s.CopyHtoD(g.consts, cb.consts); err != nil { // after the last replay, in stream order
			return err
		}
	}
	if err := cb.start.Record(d.s); err != nil {
		return err
	}
	if err := g.exec.Launch(d.s); err != nil {
		return err
	}
	return cb.end.Record(d.s)
}

// findGraph returns the kept graph of cb's kernel sequence whose nodes need
// the fewest updates, moved to the front, or nil. It is also nil where each
// such graph would need more than a quarter of its nodes updated and fewer
// than maxSameGraphs are kept: a step committed in pieces (INGOT_CUDA_SPLIT)
// has pieces of one kernel sequence, each with its own weights, and each
// keeps a graph of its own. A graph's count stops once it is no better than
// the best so far, so the other pieces' graphs cost a few comparisons each.
func (d *Device) findGraph(cb *commandBuffer) *graph {
	bi, first, same := -1, -1, 0
	bdiff := len(cb.launches)/4 + 1 // more updates than a quarter: another graph, while there is room
	for i, g := range d.graphs {
		if len(g.key) != len(cb.launches) || g.nconst < len(cb.consts) || !g.sameKernels(cb) {
			continue
		}
		if same++; first < 0 {
			first = i
		}
		if n := g.diff(cb, bdiff); n < bdiff {
			bi, bdiff = i, n
			if n == 0 {
				break
			}
		}
	}
	if bi < 0 {
		if same < maxSameGraphs {
			return nil
		}
		bi = first
	}
	g := d.graphs[bi]
	copy(d.graphs[1:bi+1], d.graphs[:bi])
	d.graphs[0] = g
	return g
}

// sameKernels reports whether g launches cb's kernels in cb's order.
func (g *graph) sameKernels(cb *commandBuffer) bool {
	for j := range g.key {
		if g.key[j] != cb.launches[j].p {
			return false
		}
	}
	return true
}

// diff counts the nodes of g whose launch differs from cb's, up to stop.
func (g *graph) diff(cb *commandBuffer, stop int) int {
	n := 0
	for i := range cb.launches {
		if g.differs(cb, i) {
			if n++; n == stop {
				break
			}
		}
	}
	return n
}

// differs reports whether node i of g launches other than cb's launch i:
// other dimensions or arguments as encoded (the constants' address is the
// graph's own).
func (g *graph) differs(cb *commandBuffer, i int) bool {
	l, prev := &cb.launches[i], &g.set[i]
	return prev.grid != l.grid || prev.block != l.block || prev.shared != l.shared || string(prev.raw) != string(cb.rawArgs(i))
}

// rawArgs is launch i's arguments as encoded (a constant's slot holds its offset).
func (cb *commandBuffer) rawArgs(i int) []byte {
	end := len(cb.args)
	if i+1 < len(cb.launches) {
		end = cb.launches[i+1].off
	}
	return cb.args[cb.launches[i].off:end]
}

// capture records cb's launches as a new graph (the oldest one goes when
// maxGraphs are kept).
func (cb *commandBuffer) capture() (*graph, error) {
	d := cb.d
	g := &graph{nconst: max(len(cb.consts), 16)}
	var err error
	if g.consts, err = d.c.Alloc(g.nconst); err != nil {
		return nil, err
	}
	if err := d.s.BeginCapture(); err != nil {
		d.c.Free(g.consts)
		return nil, err
	}
	for i := range cb.launches {
		l := &cb.launches[i]
		p := cb.fill(l, g.consts)
		if err = d.launch(l, p); err != nil {
			break
		}
		var n cuda.GraphNode
		if n, err = d.s.LastCaptured(); err != nil {
			break
		}
		g.key = append(g.key, l.p)
		g.nodes = append(g.nodes, n)
		g.set = append(g.set, launchArgs{grid: l.grid, block: l.block, shared: l.shared, raw: append([]byte(nil), cb.rawArgs(i)...)})
	}
	cg, cerr := d.s.EndCapture()
	if err == nil {
		err = cerr
	}
	if err == nil {
		g.g = cg
		if g.exec, err = cg.Instantiate(); err != nil {
			cg.Destroy()
		}
	}
	if err != nil {
		d.c.Free(g.consts)
		return nil, err
	}
	if len(d.graphs) == maxGraphs {
		d.graphs[maxGraphs-1].destroy(d)
		d.graphs = d.graphs[:maxGraphs-1]
	}
	d.graphs = append([]*graph{g}, d.graphs...)
	return g, nil
}

func (g *graph) destroy(d *Device) {
	g.exec.Destroy()
	g.g.Destroy()
	d.c.Free(g.consts)
}

// event returns a timing event from the device's pool.
func (d *Device) event() (*cuda.Event, error) {
	if n := len(d.events); n > 0 {
		e := d.events[n-1]
		d.events = d.events[:n-1]
		return e, nil
	}
	return d.c.NewEvent()
}

// Wait waits for the launches and returns the first error, naming the
// kernel when the driver reported one at launch.
func (cb *commandBuffer) Wait() error {
	if cb.err != nil {
		return cb.err
	}
	d := cb.d
	return d.do(func() error {
		err := cb.end.Synchronize()
		if err == nil {
			cb.gpu, _ = cb.end.Since(cb.start)
			if d.prof != nil && cb.b0 != nil {
				cb.account()
			}
		}
		d.events = append(d.events, cb.start, cb.end)
		if cb.constBuf != 0 {
			d.c.Free(cb.constBuf)
		}
		return err
	})
}

// GPUDuration is the time between the command buffer's two events.
func (cb *commandBuffer) GPUDuration() time.Duration { return cb.gpu }

// encoder records dispatches into its command buffer. Bindings persist
// across dispatches until changed, as Metal's do.
type encoder struct {
	cb   *commandBuffer
	pipe *pipeline
	bind [32]binding // [[buffer(i)]]
	tg   [8]int      // [[threadgroup(i)]] lengths
	data []byte      // every setBytes copy, appended: one growing slice, not one allocation a dispatch
}

type binding struct {
	set   bool
	ptr   cuda.DevicePtr
	bytes []byte // setBytes data (a copy in encoder.data), instead of ptr
}

func (e *encoder) SetPipeline(p metal.Pipeline) { e.pipe = p.(*pipeline) }

func (e *encoder) SetBuffer(i int, b metal.Buffer, off int) {
	e.bind[i] = binding{set: true, ptr: b.(*buffer).p.Add(off)}
}

func (e *encoder) SetBytes(i int, v []byte) {
	if cap(e.data)-len(e.data) < len(v) {
		e.data = make([]byte, 0, max(4096, 2*cap(e.data), len(v))) // earlier copies stay with their bindings
	}
	n := len(e.data)
	e.data = append(e.data, v...)
	e.bind[i] = binding{set: true, bytes: e.data[n:len(e.data):len(e.data)]}
}

func (e *encoder) SetThreadgroupMemory(i, n int) { e.tg[i] = n }

// Dispatch records a launch of groups threadgroups of threads threads with
// the current bindings, in the order of the entry's parameters.
func (e *encoder) Dispatch(groups, threads metal.Size) {
	cb, p := e.cb, e.pipe
	l := launch{p: p, off: len(cb.args),
		grid: cuda.Dim3{X: groups.W, Y: groups.H, Z: groups.D}, block: cuda.Dim3{X: threads.W, Y: threads.H, Z: threads.D}}
	for i, prm := range p.k.Params {
		cb.args = append(cb.args, make([]byte, prm.Size)...)
		slot := cb.args[len(cb.args)-prm.Size:]
		switch prm.Kind {
		case ptx.Threadgroup:
			putU32(slot, uint32(l.shared))
			l.shared += (e.tg[prm.Index] + 15) &^ 15
		case ptx.Value:
			b := e.bind[prm.Index]
			if !b.set || b.bytes == nil || len(b.bytes) > prm.Size {
				e.fail(fmt.Errorf("cudadev: dispatch %s: [[buffer(%d)]] needs %d bytes of arguments by value", p.k.Name, prm.Index, prm.Size))
				return
			}
			copy(slot, b.bytes)
		case ptx.Buffer:
			b := e.bind[prm.Index]
			switch {
			case !b.set:
				e.fail(fmt.Errorf("cudadev: dispatch %s: [[buffer(%d)]] is not bound", p.k.Name, prm.Index))
				return
			case b.bytes != nil:
				off := (len(cb.consts) + 15) &^ 15
				cb.consts = append(cb.consts[:len(cb.consts):len(cb.consts)], make([]byte, off-len(cb.consts))...)
				cb.consts = append(cb.consts, b.bytes...)
				l.fix = append(l.fix, constRef{param: i, off: off})
				putU64(slot, uint64(off)) // the offset, in the arguments a replay compares (fill sets the address)
			default:
				putU64(slot, uint64(b.ptr))
			}
		}
	}
	cb.launches = append(cb.launches, l)
}

// fail records the first encoding error; Commit then launches nothing.
func (e *encoder) fail(err error) {
	if e.cb.err == nil {
		e.cb.err = err
	}
}

func (e *encoder) Barrier() {} // one stream runs its launches in order
func (e *encoder) End()     {}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
func putU64(b []byte, v uint64) { putU32(b, uint32(v)); putU32(b[4:], uint32(v>>32)) }
