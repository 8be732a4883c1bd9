//go:build linux && (amd64 || arm64) && !nogpu

package msl

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"

	"github.com/ingot-llm/ingot/metal"
)

const supported = true

// unsupported is Available's error where the interpreter cannot run: never, here.
func unsupported() error { return nil }

var _ metal.Device = (*Device)(nil)

// launchArgs mirrors struct launch_args in rt/runtime.c.
type launchArgs struct {
	kernel     uint64
	flags      uint64 // bit 0: strict
	seed       uint64
	groups     [4]uint32
	threads    [4]uint32
	groupBegin uint64
	groupEnd   uint64
	buf        [maxBuffers]uint64
	bufLen     [maxBuffers]uint64
	tgLen      [maxBuffers]uint64
	errGroup   uint64
	err        [1024]byte
}

// A library is one loaded interpreter .so. Libraries are never unloaded: the
// runtime's fault handler stays installed for the life of the process.
type library struct {
	launch  func(unsafe.Pointer) int32
	kernels []*kernelInfo
	byName  map[string]*kernelInfo
}

type kernelInfo struct {
	index  int
	name   string
	where  string
	params []binding
}

var (
	libsMu sync.Mutex
	libs   = map[string]*library{}
)

func loadLibrary(path string) (lib *library, err error) {
	libsMu.Lock()
	defer libsMu.Unlock()
	if l, ok := libs[path]; ok {
		return l, nil
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("msl: load %s: %w", path, err)
	}
	defer func() {
		// RegisterLibFunc panics on a missing symbol (a stale or foreign .so).
		if r := recover(); r != nil {
			err = fmt.Errorf("msl: load %s: %v", path, r)
		}
	}()
	var (
		abi     func() int32
		n       func() int32
		name    func(int32) string
		params  func(int32) string
		where   func(int32) string
		library = &library{byName: map[string]*kernelInfo{}}
	)
	purego.RegisterLibFunc(&abi, h, "ingot_msl_abi")
	purego.RegisterLibFunc(&n, h, "ingot_msl_nkernels")
	purego.RegisterLibFunc(&name, h, "ingot_msl_kernel_name")
	purego.RegisterLibFunc(&params, h, "ingot_msl_kernel_params")
	purego.RegisterLibFunc(&where, h, "ingot_msl_kernel_where")
	purego.RegisterLibFunc(&library.launch, h, "ingot_msl_launch")
	if v := abi(); v != 1 {
		return nil, fmt.Errorf("msl: load %s: runtime ABI %d, want 1", path, v)
	}
	for i := range n() {
		k := &kernelInfo{index: int(i), name: name(i), where: where(i)}
		for _, p := range strings.Fields(params(i)) {
			kind, idx, ok := strings.Cut(p, ":")
			b := binding{kind: kind}
			if ok {
				fmt.Sscan(idx, &b.index)
			}
			k.params = append(k.params, b)
		}
		library.kernels = append(library.kernels, k)
		library.byName[k.name] = k
	}
	libs[path] = library
	return library, nil
}

// A Device runs the kernels of one library of MSL source on the CPU. It
// implements [metal.Device]. Command buffers run when committed, on
// Options.Threads OS threads; a Device is safe for concurrent use.
type Device struct {
	lib     *library
	opts    Options
	threads int
	trace   string // INGOT_MSL_TRACE

	tally metal.Tally // counts, with the calls Apple's device would send (its bookkeeping)
	lost  metal.Lost  // set by a failed command buffer: later ones are refused

	// Test hooks (see FailCommandBuffer, FailNewBuffers).
	inject  atomic.Pointer[metal.CommandBufferError]
	noAlloc atomic.Bool
}

// Counts returns what the device's command buffers did, with the
// Objective-C calls Apple's device would have sent for them.
func (d *Device) Counts() metal.Counts { return d.tally.Counts() }

// CommandBufferWork is [metal.CommandBufferWork]: the interpreter splits
// command buffers as Apple's device does (see [metal.WorkLimiter]).
func (d *Device) CommandBufferWork() int { return metal.CommandBufferWork }

// FailCommandBuffer makes the next command buffer committed end with e
// instead of running, as a GPU error would (a test hook): its Wait returns e
// and the device is lost.
func (d *Device) FailCommandBuffer(e *metal.CommandBufferError) { d.inject.Store(e) }

// FailNewBuffers makes NewBuffer fail (fail true) or work again (a test hook
// for allocation failures).
func (d *Device) FailNewBuffers(fail bool) { d.noAlloc.Store(fail) }

// Open compiles files (or loads them from the cache) and returns a device
// running their kernels. It fails with the compiler's diagnostics (pointing at
// the .metal file and line) or with every lint finding at once.
func Open(files []File, opts Options) (*Device, error) {
	tc, err := findClang(opts.Clang)
	if err != nil {
		return nil, err
	}
	so, err := buildLibrary(files, opts, tc)
	if err != nil {
		return nil, err
	}
	lib, err := loadLibrary(so)
	if err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	return &Device{lib: lib, opts: opts, threads: threads, trace: os.Getenv("INGOT_MSL_TRACE")}, nil
}

// Name returns "msl-interpreter".
func (d *Device) Name() string { return "msl-interpreter" }

// Kernels returns the host names of the library's kernels, in source order.
func (d *Device) Kernels() []string {
	out := make([]string, len(d.lib.kernels))
	for i, k := range d.lib.kernels {
		out[i] = k.name
	}
	return out
}

// NewBuffer returns a zeroed buffer of n bytes that ends (to 16-byte
// granularity) right before an inaccessible page, so reading past its end
// faults and is reported naming the kernel.
func (d *Device) NewBuffer(n int) (metal.Buffer, error) {
	if d.noAlloc.Load() {
		return nil, fmt.Errorf("msl: NewBuffer(%d): allocation failure injected by FailNewBuffers", n)
	}
	if n > d.MaxBufferLength() {
		return nil, fmt.Errorf("msl: NewBuffer: %d bytes exceeds the maximum buffer length %d", n, d.MaxBufferLength())
	}
	return newGuarded(n)
}

func newGuarded(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("msl: NewBuffer: length %d (must be > 0)", n)
	}
	pg := os.Getpagesize()
	n16 := (n + 15) &^ 15
	pages := (n16 + pg - 1) / pg
	mem, err := unix.Mmap(-1, 0, (pages+1)*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("msl: NewBuffer(%d): %w", n, err)
	}
	if err := unix.Mprotect(mem[pages*pg:], unix.PROT_NONE); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("msl: NewBuffer(%d): guard page: %w", n, err)
	}
	start := pages*pg - n16
	return &Buffer{mem: mem, data: mem[start : start+n : start+n]}, nil
}

// BufferNoCopy wraps b (page-aligned host memory, e.g. mmap'd weights)
// without copying. It has no guard page. Like Metal, it counts the length in
// whole pages against the maximum buffer length.
func (d *Device) BufferNoCopy(b []byte) (metal.Buffer, error) {
	pg := os.Getpagesize()
	switch {
	case len(b) == 0:
		return nil, errors.New("msl: BufferNoCopy: empty slice")
	case uintptr(unsafe.Pointer(&b[0]))%uintptr(pg) != 0:
		return nil, errors.New("msl: BufferNoCopy: memory is not page-aligned")
	case (len(b)+pg-1)/pg*pg > d.MaxBufferLength():
		return nil, fmt.Errorf("msl: BufferNoCopy: %d bytes (in whole pages) exceeds the maximum buffer length %d", len(b), d.MaxBufferLength())
	}
	return &Buffer{data: b[:len(b):len(b)]}, nil
}

// Pipeline returns the kernel with this host name.
func (d *Device) Pipeline(name string) (metal.Pipeline, error) {
	k, ok := d.lib.byName[name]
	if !ok {
		return nil, fmt.Errorf("msl: no kernel %q in the library (have %s)", name, strings.Join(d.Kernels(), ", "))
	}
	return &Pipeline{k: k}, nil
}

// CommandBuffer starts a command buffer; on a lost device it returns the
// error that lost it.
func (d *Device) CommandBuffer() (metal.CommandBuffer, error) {
	if err := d.lost.Err(); err != nil {
		return nil, err
	}
	d.tally.CommandBuffer()
	return &CommandBuffer{d: d}, nil
}

// MaxWorkingSet is three quarters of physical memory.
func (d *Device) MaxWorkingSet() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 8 << 30
	}
	return int64(si.Totalram) * int64(si.Unit) / 4 * 3
}

// MaxBufferLength is Options.MaxBufferLength, or math.MaxInt when that is 0.
func (d *Device) MaxBufferLength() int {
	if d.opts.MaxBufferLength > 0 {
		return d.opts.MaxBufferLength
	}
	return math.MaxInt
}

// Release does nothing: the library stays loaded (see [library]).
func (d *Device) Release() {}

// A Buffer is host memory the kernels read and write.
type Buffer struct {
	mem  []byte // the mapping including the guard page; nil for no-copy buffers
	data []byte
}

func (b *Buffer) Contents() []byte { return b.data }
func (b *Buffer) Len() int         { return len(b.data) }

// Release unmaps a buffer from NewBuffer; using it afterwards faults.
func (b *Buffer) Release() {
	if b.mem != nil {
		unix.Munmap(b.mem)
		b.mem = nil
	}
	b.data = nil
}

// A Pipeline is one kernel of the library.
type Pipeline struct{ k *kernelInfo }

func (p *Pipeline) Name() string    { return p.k.name }
func (p *Pipeline) MaxThreads() int { return 1024 }

type bufBinding struct {
	b   *Buffer
	off int
}

type dispatch struct {
	k               *kernelInfo
	bufs            [maxBuffers]bufBinding
	tg              [maxBuffers]int
	groups, threads metal.Size
	err             error // found when encoding; reported by Wait
}

// A CommandBuffer records dispatches and runs them, in order, on Commit.
type CommandBuffer struct {
	d         *Device
	enc       *Encoder // the open encoder, if any
	cmds      []dispatch
	scratch   []*Buffer // SetBytes copies
	committed bool
	err       error
	dur       time.Duration
}

// Encoder returns a compute encoder for this command buffer.
func (c *CommandBuffer) Encoder() metal.Encoder {
	if c.enc != nil {
		c.enc.End()
	}
	c.d.tally.Encoder()
	c.enc = &Encoder{cb: c}
	return c.enc
}

// Commit runs the recorded dispatches and stops at the first error.
func (c *CommandBuffer) Commit() {
	if c.committed {
		c.err = errors.New("msl: command buffer committed twice")
		return
	}
	if c.enc != nil {
		c.enc.End()
	}
	c.committed = true
	c.d.tally.Commit()
	if e := c.d.inject.Swap(nil); e != nil {
		c.err = e
		c.d.lost.Set(e)
		c.cmds = nil
	}
	if err := c.d.lost.Err(); err != nil && c.err == nil {
		c.err = err // committed before the device was lost, run after: the GPU ignores it
		c.cmds = nil
	}
	start := time.Now()
	var names []string
	for i := range c.cmds {
		cmd := &c.cmds[i]
		if cmd.err != nil {
			c.err = cmd.err
			break
		}
		names = append(names, cmd.k.name)
		if err := c.d.run(cmd); err != nil {
			c.err = err
			break
		}
	}
	c.dur = time.Since(start)
	for _, b := range c.scratch {
		b.Release()
	}
	c.scratch = nil
	if c.d.trace != "" && len(names) > 0 {
		if err := appendTrace(c.d.trace, names); err != nil && c.err == nil {
			c.err = err
		}
	}
}

var traceMu sync.Mutex

func appendTrace(file string, names []string) error {
	traceMu.Lock()
	defer traceMu.Unlock()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("msl: INGOT_MSL_TRACE: %w", err)
	}
	_, err = f.WriteString(strings.Join(names, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("msl: INGOT_MSL_TRACE: %w", err)
	}
	return nil
}

// Wait returns the error of the first failing dispatch, naming the kernel,
// threadgroup and thread.
func (c *CommandBuffer) Wait() error {
	if !c.committed {
		return errors.New("msl: Wait before Commit")
	}
	c.d.tally.Wait()
	return c.err
}

// GPUDuration is the wall time Commit took.
func (c *CommandBuffer) GPUDuration() time.Duration { return c.dur }

// An Encoder records dispatches into its command buffer. Bindings persist
// across dispatches until changed.
type Encoder struct {
	cb    *CommandBuffer
	b     metal.Bindings // which of the calls below Apple's device would send
	pipe  *Pipeline
	bufs  [maxBuffers]bufBinding
	tg    [maxBuffers]int
	err   error // a bad binding, reported by the next dispatch
	ended bool
}

func (e *Encoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("msl: "+format, args...)
	}
}

func (e *Encoder) SetPipeline(p metal.Pipeline) {
	mp, ok := p.(*Pipeline)
	if !ok || mp == nil {
		e.fail("SetPipeline: %T is not an msl pipeline", p)
		return
	}
	e.pipe = mp
	e.b.Pipeline(p)
}

func (e *Encoder) SetBuffer(index int, b metal.Buffer, offset int) {
	mb, ok := b.(*Buffer)
	switch {
	case index < 0 || index >= maxBuffers:
		e.fail("SetBuffer: index %d out of range 0..%d", index, maxBuffers-1)
	case !ok || mb == nil:
		e.fail("SetBuffer(%d): %T is not an msl buffer", index, b)
	case mb.data == nil:
		e.fail("SetBuffer(%d): buffer was released", index)
	case offset < 0 || offset > len(mb.data):
		e.fail("SetBuffer(%d): offset %d outside the buffer's %d bytes", index, offset, len(mb.data))
	default:
		e.bufs[index] = bufBinding{mb, offset}
		e.b.Buffer(index, b, offset)
	}
}

// SetBytes copies v into a fresh guarded buffer bound at index.
func (e *Encoder) SetBytes(index int, v []byte) {
	if index < 0 || index >= maxBuffers {
		e.fail("SetBytes: index %d out of range 0..%d", index, maxBuffers-1)
		return
	}
	if !e.b.Bytes(index, v) {
		return // the same bytes are bound there already
	}
	b, err := newGuarded(len(v))
	if err != nil {
		e.fail("SetBytes(%d): %v", index, err)
		return
	}
	copy(b.data, v)
	e.cb.scratch = append(e.cb.scratch, b)
	e.bufs[index] = bufBinding{b, 0}
}

func (e *Encoder) SetThreadgroupMemory(index, n int) {
	if index < 0 || index >= maxBuffers {
		e.fail("SetThreadgroupMemory: index %d out of range 0..%d", index, maxBuffers-1)
		return
	}
	e.tg[index] = n
	e.b.ThreadgroupMemory(index, n)
}

// Dispatch records groups threadgroups of threads threads each. Binding
// errors (unbound buffers, threadgroup lengths Metal would reject) are
// reported by Wait.
func (e *Encoder) Dispatch(groups, threads metal.Size) {
	d := dispatch{bufs: e.bufs, tg: e.tg, groups: groups, threads: threads, err: e.err}
	if e.pipe == nil {
		if d.err == nil {
			d.err = errors.New("msl: Dispatch without SetPipeline")
		}
		e.cb.cmds = append(e.cb.cmds, d)
		return
	}
	d.k = e.pipe.k
	if d.err == nil {
		d.err = validate(&d)
	}
	e.b.Dispatch(0, 0) // validate checks the threadgroup memory
	if d.err != nil {
		d.err = fmt.Errorf("msl: dispatch %s: %w", d.k.name, d.err)
	}
	e.cb.cmds = append(e.cb.cmds, d)
}

func validate(d *dispatch) error {
	g, t := d.groups, d.threads
	if g.W < 1 || g.H < 1 || g.D < 1 || int64(g.W)*int64(g.H)*int64(g.D) > 1<<40 {
		return fmt.Errorf("bad grid %dx%dx%d threadgroups", g.W, g.H, g.D)
	}
	if t.W < 1 || t.H < 1 || t.D < 1 || t.W*t.H*t.D > 1024 {
		return fmt.Errorf("%dx%dx%d threads per threadgroup: must be 1..1024 in total", t.W, t.H, t.D)
	}
	var errs []error
	total := 0
	for _, p := range d.k.params {
		switch p.kind {
		case "buffer":
			if d.bufs[p.index].b == nil {
				errs = append(errs, fmt.Errorf("[[buffer(%d)]] is not bound", p.index))
			}
		case "threadgroup":
			n := d.tg[p.index]
			switch {
			case n <= 0:
				errs = append(errs, fmt.Errorf("[[threadgroup(%d)]] memory length is not set", p.index))
			case n%16 != 0:
				errs = append(errs, fmt.Errorf("[[threadgroup(%d)]] memory length %d is not a multiple of 16 (Metal requires it)", p.index, n))
			}
			total += n
		}
	}
	if total > 32768 {
		errs = append(errs, fmt.Errorf("threadgroup memory %d bytes exceeds the 32768-byte limit", total))
	}
	return errors.Join(errs...)
}

// Barrier does nothing but count: dispatches run one after another.
func (e *Encoder) Barrier() { e.b.Barrier() }

// End finishes the encoder; calling it again does nothing.
func (e *Encoder) End() {
	if e.ended {
		return
	}
	e.ended = true
	if e.cb.enc == e {
		e.cb.enc = nil
	}
	e.cb.d.tally.End(&e.b)
}

// run executes one dispatch, spreading threadgroups over d.threads OS threads.
func (d *Device) run(cmd *dispatch) error {
	var base launchArgs
	base.kernel = uint64(cmd.k.index)
	if d.opts.Strict {
		base.flags |= 1
	}
	base.seed = uint64(d.opts.Seed)
	base.groups = [4]uint32{uint32(cmd.groups.W), uint32(cmd.groups.H), uint32(cmd.groups.D)}
	base.threads = [4]uint32{uint32(cmd.threads.W), uint32(cmd.threads.H), uint32(cmd.threads.D)}
	for i, b := range cmd.bufs {
		if b.b == nil || b.b.data == nil {
			continue
		}
		if b.off < len(b.b.data) {
			base.buf[i] = uint64(uintptr(unsafe.Pointer(&b.b.data[b.off])))
		} else {
			base.buf[i] = uint64(uintptr(unsafe.Pointer(&b.b.data[0]))) + uint64(b.off)
		}
		base.bufLen[i] = uint64(len(b.b.data) - b.off)
	}
	for i, n := range cmd.tg {
		if n > 0 {
			base.tgLen[i] = uint64(n)
		}
	}
	total := int64(cmd.groups.W) * int64(cmd.groups.H) * int64(cmd.groups.D)
	workers := int64(d.threads)
	if workers > total {
		workers = total
	}
	chunk := max(1, total/(workers*8))
	var (
		next     atomic.Int64
		stop     atomic.Bool
		mu       sync.Mutex
		firstErr error
		errGroup = int64(-1)
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := new(launchArgs)
			*a = base
			for !stop.Load() {
				begin := next.Add(chunk) - chunk
				if begin >= total {
					return
				}
				a.groupBegin, a.groupEnd = uint64(begin), uint64(min(begin+chunk, total))
				if d.lib.launch(unsafe.Pointer(a)) != 0 {
					msg := string(a.err[:]) // NUL-terminated
					if i := strings.IndexByte(msg, 0); i >= 0 {
						msg = msg[:i]
					}
					mu.Lock()
					if errGroup < 0 || int64(a.errGroup) < errGroup {
						errGroup, firstErr = int64(a.errGroup), errors.New("msl: "+msg)
					}
					mu.Unlock()
					stop.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, b := range cmd.bufs {
		runtime.KeepAlive(b.b)
	}
	return firstErr
}
