//go:build darwin

// This file implements the Device seam (device.go) for Apple's Metal. The
// Objective-C plumbing, ABI notes and ownership rules are in objc_darwin.go.
//
// Ownership: a Device owns its MTLDevice, command queue, library and every
// cached pipeline, and Release frees them all. A Buffer owns its MTLBuffer.
// A CommandBuffer owns a retained MTLCommandBuffer until Wait returns (or until
// it becomes unreachable, via runtime.AddCleanup); an Encoder lives in its
// command buffer's autorelease pool, open from CommandBuffer to Commit (or is
// retained until End when made on another thread). Command buffers use
// unretained references, so every Buffer bound in one must stay alive (not
// Released) until its Wait returns; setBytes data lives in argument buffers
// the command buffer holds until Wait.
//
// Errors: encoder methods cannot return errors, so a bad binding or dispatch
// is recorded in the command buffer, nothing further is encoded into it, and
// Wait returns the error. Guards name the limit they enforce.

package metal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

var (
	_ Device      = (*device)(nil)
	_ Informer    = (*device)(nil)
	_ WorkLimiter = (*device)(nil)
	_ Counter     = (*device)(nil)
)

const (
	maxBufferIndex      = 31   // [[buffer(0)]] … [[buffer(30)]]: Metal's buffer argument table
	maxThreadgroupIndex = 31   // [[threadgroup(0)]] … [[threadgroup(30)]]
	maxSetBytes         = 4096 // Apple: setBytes:length:atIndex: is for data under 4 KB
)

// device is Apple's Metal GPU. Its methods are safe for concurrent use,
// except Release.
type device struct {
	id, queue, lib objc.ID
	info           Info

	mu    sync.Mutex // guards pipes; each entry is built under its own lock
	pipes map[string]*pipeEntry
	chk   releaseCheck

	lost  Lost  // set by a command buffer that failed: later ones are refused
	spans spans // command buffers' autorelease pools, per OS thread
	tally Tally // what the command buffers did (Counts)
	args  argPool

	res *Residency // the weights, KV cache and activations, kept resident while in use (macOS 15+; residency_darwin.go)

	settings string  // the library's compile settings (language version, math mode), for the cache key
	arch     archive // the pipeline cache (cache_darwin.go)
}

// Counts returns what the device's command buffers did, with the
// Objective-C calls sent for them.
func (d *device) Counts() Counts { return d.tally.Counts() }

// spans records the command buffers whose autorelease pool is open (from
// CommandBuffer to Commit), per OS thread, innermost last. Pools are per
// thread and must be popped in reverse order of their pushes; a command
// buffer committed out of order (or on another thread) does not pop its
// pool, which then drains with the one around it.
type spans struct {
	mu   sync.Mutex
	open map[uintptr][]*span
}

// span is one open pool.
type span struct {
	thread uintptr // threadID when it was opened
	pool   uintptr // objc_autoreleasePoolPush's token
	open   bool
}

// push opens sp's pool on this thread; the goroutine stays on it until pop.
func (s *spans) push(sp *span) {
	runtime.LockOSThread()
	sp.thread = threadID()
	sp.pool = autoreleasePoolPush()
	sp.open = true
	s.mu.Lock()
	if s.open == nil {
		s.open = map[uintptr][]*span{}
	}
	s.open[sp.thread] = append(s.open[sp.thread], sp)
	s.mu.Unlock()
}

// pop closes sp's pool if it is the innermost on the thread it was opened on
// and this is that thread, and then unpins the goroutine (on that thread,
// the one push pinned). Popping a closed span does nothing.
func (s *spans) pop(sp *span) {
	if !sp.open {
		return
	}
	sp.open = false
	here := threadID() == sp.thread
	s.mu.Lock()
	st := s.open[sp.thread]
	inner := len(st) > 0 && st[len(st)-1] == sp && here
	for i, x := range st {
		if x == sp {
			st = append(st[:i], st[i+1:]...)
			break
		}
	}
	if len(st) == 0 {
		delete(s.open, sp.thread)
	} else {
		s.open[sp.thread] = st
	}
	s.mu.Unlock()
	if inner {
		autoreleasePoolPop(sp.pool)
	}
	if here {
		runtime.UnlockOSThread()
	}
}

// onThread reports whether sp is open and was opened on this thread.
func (sp *span) onThread() bool { return sp.open && threadID() == sp.thread }

// Open opens the system's default Metal GPU, makes a command queue and compiles
// source (MSL) into one library. Kernel pipelines are built on first use by
// Pipeline. On macOS 15 and later the library is compiled with
// MTLMathModeRelaxed (fast math that keeps Inf and NaN, which attention masks
// need); earlier systems get fastMathEnabled. The language version is the
// newest the OS offers, up to 3.2 (see Info.LanguageVersion); shaders can test
// __METAL_VERSION__. A compile error carries the compiler's log.
//
// Open returns an error wrapping [ErrUnavailable] when Metal cannot be loaded
// or the machine has no Metal GPU.
func Open(source string) (Device, error) {
	if err := load(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	start := time.Now()
	d := &device{pipes: make(map[string]*pipeEntry)}
	var (
		err   error
		names []string
	)
	withPool(func() {
		if err = d.open(source); err == nil {
			names = d.functionNames()
		}
	})
	if err == nil {
		withPool(func() { d.openArchive(source, d.settings) })
		err = d.buildAll(names)
	}
	if err == nil {
		err = checkGPU(runtime.GOARCH, d.info.Family, d.info.UnifiedMemory, d.info.SIMDWidth)
		if err != nil {
			slog.Warn("metal: GPU refused", "name", d.info.Name, "reason", err)
		}
	}
	if err != nil {
		withPool(d.releaseObjects)
		return nil, err
	}
	d.fillArchive(names)
	slog.Debug("metal device opened", "name", d.info.Name, "macos", d.info.OSVersion, "family", d.info.Family,
		"msl", d.info.LanguageVersion, "max_working_set", d.info.MaxWorkingSet,
		"max_buffer", d.info.MaxBufferLength, "unified_memory", d.info.UnifiedMemory,
		"pipelines", len(names), "took", time.Since(start))
	return d, nil
}

// functionNames lists the library's kernels. It runs inside an autorelease pool.
func (d *device) functionNames() []string {
	arr := msgID(d.lib, selFunctionNames) // borrowed NSArray<NSString *>
	if arr == 0 {
		return nil
	}
	var out []string
	for i := range msgUint(arr, selCount) {
		out = append(out, goString(msgIDUint(arr, selObjectAtIndex, i)))
	}
	return out
}

// buildAll builds the pipelines of names in parallel (the first token would
// otherwise compile each inside its encode) and records the SIMD width of the
// first. Pipeline errors are left for Pipeline to report when one is used.
func (d *device) buildAll(names []string) error {
	if len(names) == 0 {
		return errors.New("metal: the library has no kernels")
	}
	start := time.Now()
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(runtime.NumCPU(), len(names)) {
		wg.Go(func() {
			for name := range work {
				d.Pipeline(name) // cached, errors included
			}
		})
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	p, err := d.Pipeline(names[0])
	if err != nil {
		return err
	}
	d.info.SIMDWidth = p.(*pipeline).simdWidth
	slog.Debug("metal pipelines built", "n", len(names), "took", time.Since(start))
	return nil
}

// open runs inside an autorelease pool.
func (d *device) open(source string) error {
	d.id = mtlCreateSystemDefaultDevice() // owned (Create rule)
	if d.id == 0 {
		d.id = firstDevice()
	}
	if d.id == 0 {
		return fmt.Errorf("%w: no Metal GPU (MTLCreateSystemDefaultDevice and MTLCopyAllDevices found none)", ErrUnavailable)
	}
	d.info = Info{
		Name:                 goString(msgID(d.id, selName)),
		MaxWorkingSet:        int64(msgUint(d.id, selRecommendedMaxWorkingSetSize)),
		MaxBufferLength:      int64(msgUint(d.id, selMaxBufferLength)),
		UnifiedMemory:        msgBool(d.id, selHasUnifiedMemory),
		MaxThreadgroupMemory: int(msgUint(d.id, selMaxThreadgroupMemoryLength)),
		OSVersion:            osVersion(),
	}
	if msgRespond(d.id, selRespondsToSelector, selSupportsFamily) { // macOS 10.15+
		for f := FamilyApple9 + 1; f >= FamilyApple7-6; f-- { // Apple10 … Apple1
			if msgBoolInt(d.id, selSupportsFamily, f) {
				d.info.Family = f
				break
			}
		}
	}
	d.queue = msgID(d.id, selNewCommandQueue) // owned
	if d.queue == 0 {
		return errors.New("metal: newCommandQueue returned nil")
	}
	d.res = NewResidency(d.newResidencySet(), &d.tally)
	return d.compile(source)
}

// firstDevice returns an owned reference to the first of MTLCopyAllDevices, or 0.
func firstDevice() objc.ID {
	all := mtlCopyAllDevices() // owned NSArray (Copy rule)
	if all == 0 {
		return 0
	}
	defer release(all)
	if msgUint(all, selCount) == 0 {
		return 0
	}
	return retain(msgIDUint(all, selObjectAtIndex, 0))
}

// osVersion returns the macOS product version ("14.5"), or "" if unknown.
func osVersion() string {
	v, err := syscall.Sysctl("kern.osproductversion")
	if err != nil {
		return ""
	}
	return v
}

// languageVersion picks the MSL version to compile with from the macOS major
// version (the table MLX uses). 0 leaves the OS default.
func languageVersion(osVersion string) (v uint, name string) {
	major, _, _ := strings.Cut(osVersion, ".")
	n, err := strconv.Atoi(major)
	switch {
	case err != nil || n < 13:
		return 0, ""
	case n == 13:
		return mtlLanguageVersion3_0, "3.0"
	case n == 14:
		return mtlLanguageVersion3_1, "3.1"
	default:
		return mtlLanguageVersion3_2, "3.2"
	}
}

// compile builds d.lib from source. It runs inside an autorelease pool.
func (d *device) compile(source string) error {
	opts := msgID(msgID(classMTLCompileOptions, selAlloc), selInit) // owned
	if opts == 0 {
		return errors.New("metal: MTLCompileOptions init returned nil")
	}
	defer release(opts)
	if msgRespond(opts, selRespondsToSelector, selSetMathMode) {
		msgSetInt(opts, selSetMathMode, mtlMathModeRelaxed)
		d.settings = "relaxed"
	} else {
		msgSetBool(opts, selSetFastMathEnabled, true)
		d.settings = "fast"
	}
	if v, name := languageVersion(d.info.OSVersion); v != 0 {
		msgSetUint(opts, selSetLanguageVersion, v)
		d.info.LanguageVersion = name
		d.settings += " msl " + name
	}
	src := newNSString(source)
	if src == 0 {
		return errors.New("metal: newLibraryWithSource: source is not valid UTF-8")
	}
	defer release(src)
	var nserr objc.ID                                                       // borrowed (autoreleased) when set
	d.lib = msgNewLibrary(d.id, selNewLibraryWithSource, src, opts, &nserr) // owned
	if d.lib == 0 {
		return fmt.Errorf("metal: newLibraryWithSource: %s", nsErrorText(nserr))
	}
	if nserr != 0 { // a library with warnings still reports them through error
		slog.Debug("metal shader compiler warnings", "log", nsErrorText(nserr))
	}
	return nil
}

// CommandBufferWork is [CommandBufferWork]: the backend commits long encodes
// in pieces the watchdog leaves alone (see [WorkLimiter]).
func (d *device) CommandBufferWork() int { return CommandBufferWork }

// Name is MTLDevice.name, e.g. "Apple M2 Max".
func (d *device) Name() string { return d.info.Name }

// MaxWorkingSet is recommendedMaxWorkingSetSize in bytes.
func (d *device) MaxWorkingSet() int64 { return d.info.MaxWorkingSet }

// MaxBufferLength is maxBufferLength in bytes.
func (d *device) MaxBufferLength() int { return int(d.info.MaxBufferLength) }

// Info describes the device; AllocatedSize is read now.
func (d *device) Info() Info {
	in := d.info
	if d.id != 0 {
		in.AllocatedSize = int64(msgUint(d.id, selCurrentAllocatedSize))
	}
	return in
}

// NewBuffer returns a zeroed shared-storage buffer of n bytes (Metal clears
// new buffers). n larger than maxBufferLength is an error: split the data.
func (d *device) NewBuffer(n int) (Buffer, error) {
	switch {
	case d.id == 0:
		return nil, errors.New("metal: NewBuffer on a released device")
	case n < 0:
		return nil, fmt.Errorf("metal: NewBuffer: negative length %d", n)
	case int64(n) > d.info.MaxBufferLength:
		return nil, fmt.Errorf("metal: NewBuffer: %d bytes exceeds maxBufferLength %d (split the allocation)", n, d.info.MaxBufferLength)
	}
	alloc := max(n, 16) // Metal rejects zero-length buffers
	var (
		id objc.ID
		p  unsafe.Pointer
		l  uint
	)
	withPool(func() {
		id = msgNewBuffer(d.id, selNewBufferWithLength, uint(alloc), mtlResourceStorageModeShared) // owned
		if id != 0 {
			p, l = msgPointer(id, selContents), msgUint(id, selLength)
		}
	})
	if id == 0 {
		return nil, fmt.Errorf("metal: newBufferWithLength: could not allocate %d bytes (%d already allocated, recommended max %d)",
			n, d.Info().AllocatedSize, d.info.MaxWorkingSet)
	}
	if p == nil || l < uint(alloc) {
		withPool(func() { release(id) })
		return nil, fmt.Errorf("metal: newBufferWithLength(%d): contents %p, length %d", alloc, p, l)
	}
	buf := &buffer{id: id, data: unsafe.Slice((*byte)(p), l)[:n:n], res: d.res}
	d.res.Add(buf)
	return buf, nil
}

// BufferNoCopy wraps host memory, typically a page-aligned view of an mmap'd
// safetensors file, without copying. b must start on a page boundary
// (16 KiB on Apple silicon). Metal maps whole pages, so the memory from the end
// of b to the next page boundary must be mapped too, as it always is at the end
// of a file mapping. b must stay mapped until the buffer is released, and
// views longer than maxBufferLength (rounded up to pages) are an error: split
// them.
func (d *device) BufferNoCopy(b []byte) (Buffer, error) {
	page := syscall.Getpagesize()
	p := unsafe.Pointer(unsafe.SliceData(b))
	n := (len(b) + page - 1) / page * page
	switch {
	case d.id == 0:
		return nil, errors.New("metal: BufferNoCopy on a released device")
	case len(b) == 0:
		return nil, errors.New("metal: BufferNoCopy: empty slice")
	case uintptr(p)%uintptr(page) != 0:
		return nil, fmt.Errorf("metal: BufferNoCopy: address %p is not aligned to the %d-byte page size", p, page)
	case int64(n) > d.info.MaxBufferLength:
		return nil, fmt.Errorf("metal: BufferNoCopy: %d bytes (%d in whole pages) exceeds maxBufferLength %d (split the view)",
			len(b), n, d.info.MaxBufferLength)
	}
	var id objc.ID
	withPool(func() {
		// nil deallocator: the caller owns the memory and unmaps it after Release.
		id = msgNewBufferNoCopy(d.id, selNewBufferWithBytesNoCopy, p, uint(n), mtlResourceStorageModeShared, 0) // owned
	})
	if id == 0 {
		return nil, fmt.Errorf("metal: newBufferWithBytesNoCopy: failed for %d bytes at %p", n, p)
	}
	buf := &buffer{id: id, data: b[:len(b):len(b)], res: d.res}
	d.res.Add(buf)
	return buf, nil
}

// pipeEntry is one cached pipeline, built once under its own lock so that
// several are built at the same time (Open builds them all in parallel).
type pipeEntry struct {
	once sync.Once
	p    *pipeline
	err  error
}

// Pipeline returns the compute pipeline for the kernel with this host name,
// building and caching it on first use (Open builds every kernel's).
func (d *device) Pipeline(name string) (Pipeline, error) {
	d.mu.Lock()
	if d.lib == 0 {
		d.mu.Unlock()
		return nil, errors.New("metal: Pipeline on a released device")
	}
	e, ok := d.pipes[name]
	if !ok {
		e = &pipeEntry{}
		d.pipes[name] = e
	}
	d.mu.Unlock()
	e.once.Do(func() {
		start := time.Now()
		withPool(func() { e.p, e.err = d.newPipeline(name) })
		if e.err == nil {
			slog.Debug("metal pipeline compiled", "kernel", name, "max_threads", e.p.maxThreads,
				"simd_width", e.p.simdWidth, "static_threadgroup_bytes", e.p.staticTGMem, "took", time.Since(start))
		}
	})
	if e.err != nil {
		return nil, e.err
	}
	return e.p, nil
}

// newPipeline runs inside an autorelease pool.
func (d *device) newPipeline(name string) (*pipeline, error) {
	str := newNSString(name)
	if str == 0 {
		return nil, fmt.Errorf("metal: kernel name %q is not valid UTF-8", name)
	}
	defer release(str)
	fn := msgIDID(d.lib, selNewFunctionWithName, str) // owned
	if fn == 0 {
		return nil, fmt.Errorf("metal: no kernel %q in the library", name)
	}
	defer release(fn) // the pipeline keeps what it needs
	var (
		nserr objc.ID
		pso   objc.ID // owned
	)
	if d.arch.loaded {
		pso = d.pipelineFromArchive(fn, &nserr)
	} else {
		pso = msgNewPipeline(d.id, selNewPipelineWithFunction, fn, &nserr)
	}
	if pso == 0 {
		return nil, fmt.Errorf("metal: newComputePipelineStateWithFunction %s: %s", name, nsErrorText(nserr))
	}
	p := &pipeline{
		id:          pso,
		name:        name,
		maxThreads:  int(msgUint(pso, selMaxTotalThreadsPerThreadgroup)),
		simdWidth:   int(msgUint(pso, selThreadExecutionWidth)),
		staticTGMem: int(msgUint(pso, selStaticThreadgroupMemoryLength)),
	}
	if p.maxThreads <= 0 {
		release(pso)
		return nil, fmt.Errorf("metal: pipeline %s: maxTotalThreadsPerThreadgroup is %d", name, p.maxThreads)
	}
	return p, nil
}

// CommandBuffer starts a command buffer with unretained references on the
// device's queue. With debug logging on (run -v) it asks for per-encoder
// execution status in errors (errorOptions). After a command buffer failed
// it returns that error: the GPU ignores the process's later work.
func (d *device) CommandBuffer() (CommandBuffer, error) {
	if err := d.lost.Err(); err != nil {
		return nil, err
	}
	if d.queue == 0 {
		return nil, errors.New("metal: CommandBuffer on a released device")
	}
	d.res.Use() // commits the residency set if buffers changed; requests residency after an idle period
	status := classMTLCommandBufferDescriptor != 0 && slog.Default().Enabled(context.Background(), slog.LevelDebug)
	c := &commandBuffer{d: d, maxTGMem: d.info.MaxThreadgroupMemory}
	// The command buffer's pool: its encoders live in it until Commit.
	d.spans.push(&c.span)
	var id objc.ID
	// Borrowed and autoreleased: retain it before the pool drains.
	if status {
		desc := msgID(msgID(classMTLCommandBufferDescriptor, selAlloc), selInit) // owned
		msgSetBool(desc, selSetRetainedReferences, false)
		msgSetUint(desc, selSetErrorOptions, mtlCommandBufferErrorOptionEncoderExecutionStatus)
		id = retain(msgIDID(d.queue, selCommandBufferWithDescriptor, desc))
		release(desc)
	} else {
		id = retain(msgID(d.queue, selCommandBufferUnretained))
	}
	if id == 0 {
		d.spans.pop(&c.span)
		return nil, errors.New("metal: commandBufferWithUnretainedReferences returned nil")
	}
	d.tally.CommandBuffer()
	c.h = &owned{id: id}
	// A command buffer dropped without Wait is released when collected. Its
	// argument buffers are not (the GPU may still read them): they leak.
	runtime.AddCleanup(c, func(h *owned) { withPool(h.release) }, c.h)
	return c, nil
}

// Release frees the device, its queue, library and cached pipelines. Buffers
// are released separately, before the device.
func (d *device) Release() {
	if d.chk.release("device") {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	withPool(d.releaseObjects)
}

func (d *device) releaseObjects() {
	for _, e := range d.pipes {
		if e.p != nil {
			release(e.p.id)
			e.p.id = 0
		}
	}
	d.pipes = nil
	d.args.release()
	release(d.arch.id)
	d.arch = archive{}
	release(d.lib)
	d.res.Close() // before the queue it is attached to
	release(d.queue)
	release(d.id)
	d.lib, d.queue, d.id = 0, 0, 0
}

// buffer is a shared-storage MTLBuffer. data is its host view.
type buffer struct {
	id   objc.ID
	data []byte
	res  *Residency // its device's: Release takes it out of the residency set
	chk  releaseCheck
}

func (b *buffer) Contents() []byte { return b.data }
func (b *buffer) Len() int         { return len(b.data) }

// Release frees the MTLBuffer. No command buffer using it may be in flight.
func (b *buffer) Release() {
	if b.chk.release("buffer") {
		return
	}
	b.res.Remove(b)
	id := b.id
	b.id, b.data = 0, nil
	withPool(func() { release(id) })
}

// pipeline is an MTLComputePipelineState, owned by its device's cache.
type pipeline struct {
	id          objc.ID
	name        string
	maxThreads  int // maxTotalThreadsPerThreadgroup
	simdWidth   int // threadExecutionWidth
	staticTGMem int // staticThreadgroupMemoryLength in bytes
}

func (p *pipeline) Name() string    { return p.name }
func (p *pipeline) MaxThreads() int { return p.maxThreads }

// ThreadExecutionWidth is the pipeline's SIMD width (32 on Apple GPUs).
func (p *pipeline) ThreadExecutionWidth() int { return p.simdWidth }

// owned holds a retained object that is released once.
type owned struct{ id objc.ID }

func (h *owned) release() {
	if h.id != 0 {
		release(h.id)
		h.id = 0
	}
}

// commandBuffer is a retained MTLCommandBuffer. It is not safe for concurrent use.
type commandBuffer struct {
	h          *owned
	d          *device
	enc        *encoder // the open encoder, if any
	err        error    // first encoding error; nothing is encoded after it
	committed  bool
	waited     bool
	waitErr    error
	dur        time.Duration
	dispatches int
	kernel     string    // the last kernel dispatched, for error messages
	maxTGMem   int       // the device's maxThreadgroupMemoryLength
	span       span      // the autorelease pool open from CommandBuffer to Commit
	args       []*argBuf // argument buffers in use, returned to the device's pool by Wait
}

func (c *commandBuffer) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("metal: "+format, args...)
	}
}

// Encoder ends any open encoder and starts a compute encoder with concurrent
// dispatch: dispatches may overlap unless separated by Barrier. The encoder
// lives in the command buffer's autorelease pool, open from CommandBuffer to
// Commit (whatever the driver autoreleases in the encoder's calls drains
// then); the goroutine stays on its OS thread meanwhile. An encoder made on
// another thread is retained instead, and released by End.
func (c *commandBuffer) Encoder() Encoder {
	if c.enc != nil {
		c.enc.End()
	}
	e := &encoder{cb: c}
	if c.committed {
		c.fail("Encoder after Commit")
		e.ended = true
		return e
	}
	if c.span.onThread() {
		e.id = msgIDUint(c.h.id, selComputeEncoderWithType, mtlDispatchTypeConcurrent) // borrowed, in the span's pool
	} else {
		withPool(func() {
			e.id = retain(msgIDUint(c.h.id, selComputeEncoderWithType, mtlDispatchTypeConcurrent))
		})
		e.retained = true
	}
	if e.id == 0 {
		c.fail("computeCommandEncoderWithDispatchType returned nil")
		e.ended = true
		return e
	}
	c.d.tally.Encoder()
	c.enc = e
	return e
}

// Commit ends any open encoder, submits the command buffer and closes its
// autorelease pool.
func (c *commandBuffer) Commit() {
	if c.committed {
		c.fail("Commit called twice")
		return
	}
	if c.enc != nil {
		c.enc.End()
	}
	c.committed = true
	c.d.tally.Commit()
	if c.span.onThread() {
		msgVoid(c.h.id, selCommit)
	} else {
		withPool(func() { msgVoid(c.h.id, selCommit) })
	}
	c.d.spans.pop(&c.span)
}

// Wait blocks until the command buffer completes, releases it, and returns the
// first encoding error and any execution error (with its NSError text).
func (c *commandBuffer) Wait() error {
	if !c.committed {
		return errors.New("metal: Wait before Commit")
	}
	if c.waited {
		return c.waitErr
	}
	c.waited = true
	c.d.tally.Wait()
	var gpuErr error
	withPool(func() {
		id := c.h.id
		msgVoid(id, selWaitUntilCompleted)
		status := msgUint(id, selStatus)
		var nserr objc.ID
		if status != mtlCommandBufferStatusCompleted {
			nserr = msgID(id, selError) // borrowed; nil when completed
		}
		switch {
		case nserr != 0 || status == mtlCommandBufferStatusError:
			e := &CommandBufferError{Dispatches: c.dispatches, Kernel: c.kernel, Text: "unknown error (no NSError)"}
			if nserr != 0 {
				e.Code = msgInt(nserr, selCode)
				e.Text = goString(msgID(nserr, selLocalizedDescription))
				e.Encoders = encoderStatus(nserr)
			}
			c.d.lost.Set(e) // Apple's GPU ignores the queue's later work
			gpuErr = e
		case status != mtlCommandBufferStatusCompleted:
			gpuErr = fmt.Errorf("metal: command buffer finished with status %d, want %d (completed)", status, mtlCommandBufferStatusCompleted)
		}
		start, end := msgDouble(id, selGPUStartTime), msgDouble(id, selGPUEndTime) // seconds
		if end > start {
			c.dur = time.Duration((end - start) * float64(time.Second))
		}
		c.d.args.put(c.args) // the GPU is done with them
		c.args = nil
		c.h.release()
	})
	c.waitErr = errors.Join(c.err, gpuErr)
	return c.waitErr
}

// encoderStatus describes the per-encoder execution status of a command
// buffer's error (present with errorOptions, see CommandBuffer): each
// encoder's label (or index) and state. Call it inside withPool.
func encoderStatus(nserr objc.ID) string {
	if keyEncoderInfo == 0 {
		return ""
	}
	info := msgID(nserr, selUserInfo)
	if info == 0 {
		return ""
	}
	list := msgIDID(info, selObjectForKey, keyEncoderInfo) // NSArray<id<MTLCommandBufferEncoderInfo>>
	if list == 0 {
		return ""
	}
	states := [...]string{"unknown", "completed", "affected", "pending", "faulted"} // MTLCommandEncoderErrorState
	var parts []string
	for i := range msgUint(list, selCount) {
		ei := msgIDUint(list, selObjectAtIndex, i)
		name := goString(msgID(ei, selLabel))
		if name == "" {
			name = strconv.Itoa(int(i))
		}
		st := msgInt(ei, selErrorState)
		s := strconv.Itoa(st)
		if st >= 0 && st < len(states) {
			s = states[st]
		}
		parts = append(parts, name+": "+s)
	}
	return strings.Join(parts, ", ")
}

// GPUDuration is GPUEndTime − GPUStartTime, known after Wait.
func (c *commandBuffer) GPUDuration() time.Duration { return c.dur }

// encoder is an MTLComputeCommandEncoder with concurrent dispatch. The
// hot-path methods send objc_msgSend through zero-allocation stubs (send),
// and only what changes (see Bindings): buffer bindings, setBytes data
// included, go with the next dispatch, one call per run of consecutive
// indices.
type encoder struct {
	cb       *commandBuffer
	id       objc.ID
	pipe     *pipeline
	b        Bindings
	ended    bool
	retained bool // made outside the command buffer's pool: End releases it

	// The [[buffer(i)]] table as the next dispatch binds it: the MTLBuffer and
	// offset of each index (setBytes data: a slot of an argument buffer).
	ids  [maxBufferIndex]uintptr
	offs [maxBufferIndex]uintptr

	// The hot stubs' arguments (see send): integer words, and the two MTLSizes
	// dispatch passes by pointer on arm64.
	args  [6]uintptr
	sizes [2]mtlSize
	sent  int64 // messages sent through send (TestBindingsCountSent checks it against b.Calls)
}

// ok reports whether encoding may continue, recording use after End.
func (e *encoder) ok() bool {
	if e.ended {
		e.cb.fail("encoder used after End")
		return false
	}
	return e.cb.err == nil
}

func (e *encoder) SetPipeline(p Pipeline) {
	if !e.ok() {
		return
	}
	mp, isMetal := p.(*pipeline)
	if !isMetal || mp == nil || mp.id == 0 {
		e.cb.fail("SetPipeline: %T is not a live Metal pipeline", p)
		return
	}
	e.pipe = mp
	if e.b.Pipeline(mp) {
		e.args = [6]uintptr{uintptr(e.id), uintptr(selSetComputePipelineState), uintptr(mp.id)}
		e.send(3)
	}
}

// SetBuffer binds b at offset to [[buffer(index)]] with the next dispatch.
func (e *encoder) SetBuffer(index int, b Buffer, offset int) {
	if !e.ok() {
		return
	}
	mb, isMetal := b.(*buffer)
	switch {
	case index < 0 || index >= maxBufferIndex:
		e.cb.fail("SetBuffer: index %d outside [[buffer(0..%d)]]", index, maxBufferIndex-1)
	case !isMetal || mb == nil:
		e.cb.fail("SetBuffer(%d): %T is not a Metal buffer", index, b)
	case mb.id == 0:
		if invariants {
			panic(fmt.Sprintf("metal: SetBuffer(%d): buffer was released", index))
		}
		e.cb.fail("SetBuffer(%d): buffer was released", index)
	case offset < 0 || offset > len(mb.data):
		e.cb.fail("SetBuffer(%d): offset %d outside the buffer's %d bytes", index, offset, len(mb.data))
	default:
		if e.b.Buffer(index, mb, offset) {
			e.ids[index], e.offs[index] = uintptr(mb.id), uintptr(offset)
		}
	}
}

// SetBytes copies v (1 to 4096 bytes) into the command buffer's argument
// buffer and binds that copy to [[buffer(index)]] with the next dispatch,
// which is what setBytes:length:atIndex: does, without a call of its own.
func (e *encoder) SetBytes(index int, v []byte) {
	if !e.ok() {
		return
	}
	switch {
	case index < 0 || index >= maxBufferIndex:
		e.cb.fail("SetBytes: index %d outside [[buffer(0..%d)]]", index, maxBufferIndex-1)
	case len(v) == 0 || len(v) > maxSetBytes:
		e.cb.fail("SetBytes(%d): %d bytes; setBytes takes 1 to %d (use a buffer)", index, len(v), maxSetBytes)
	default:
		if e.b.Bytes(index, v) {
			a, off, err := e.cb.argSlot(len(v))
			if err != nil {
				e.cb.fail("SetBytes(%d): %v", index, err)
				return
			}
			copy(a.data[off:], v)
			e.ids[index], e.offs[index] = uintptr(a.id), uintptr(off)
		}
	}
}

// SetThreadgroupMemory sets the length of [[threadgroup(index)]], a multiple of 16 bytes.
func (e *encoder) SetThreadgroupMemory(index, n int) {
	if !e.ok() {
		return
	}
	limit := e.cb.maxTGMem
	switch {
	case index < 0 || index >= maxThreadgroupIndex:
		e.cb.fail("SetThreadgroupMemory: index %d outside [[threadgroup(0..%d)]]", index, maxThreadgroupIndex-1)
	case n < 0 || n%16 != 0:
		e.cb.fail("SetThreadgroupMemory(%d): length %d is not a non-negative multiple of 16 (Metal requires it)", index, n)
	case limit > 0 && n > limit:
		e.cb.fail("SetThreadgroupMemory(%d): %d bytes exceeds maxThreadgroupMemoryLength %d", index, n, limit)
	default:
		if e.b.ThreadgroupMemory(index, n) {
			e.args = [6]uintptr{uintptr(e.id), uintptr(selSetThreadgroupMemory), uintptr(n), uintptr(index)}
			e.send(4)
		}
	}
}

// Dispatch binds the buffers that changed and encodes groups threadgroups of
// threads threads each.
func (e *encoder) Dispatch(groups, threads Size) {
	if !e.ok() {
		return
	}
	p := e.pipe
	if p == nil {
		e.cb.fail("Dispatch without SetPipeline")
		return
	}
	g, t := groups, threads
	switch n := int64(t.W) * int64(t.H) * int64(t.D); {
	case g.W < 1 || g.H < 1 || g.D < 1:
		e.cb.fail("dispatch %s: grid of %dx%dx%d threadgroups: each dimension must be at least 1", p.name, g.W, g.H, g.D)
	case t.W < 1 || t.H < 1 || t.D < 1:
		e.cb.fail("dispatch %s: threadgroup of %dx%dx%d threads: each dimension must be at least 1", p.name, t.W, t.H, t.D)
	case n > int64(p.maxThreads):
		e.cb.fail("dispatch %s: %d threads per threadgroup exceeds pipeline max %d", p.name, n, p.maxThreads)
	default:
		bind, err := e.b.Dispatch(p.staticTGMem, e.cb.maxTGMem)
		if err != nil {
			e.cb.fail("dispatch %s: %v", p.name, err)
			return
		}
		for bind != 0 {
			var lo, n int
			lo, n, bind = NextRun(bind)
			e.bind(lo, n)
		}
		e.sizes = [2]mtlSize{
			{Width: uint(g.W), Height: uint(g.H), Depth: uint(g.D)},
			{Width: uint(t.W), Height: uint(t.H), Depth: uint(t.D)},
		}
		e.dispatch()
		e.cb.dispatches++
		e.cb.kernel = p.name
	}
}

// bind sends the n table entries from index lo: setBuffer:offset:atIndex:
// for one, else setBuffers:offsets:withRange:, whose NSRange {location,
// length} (16 bytes, two integers) both ABIs pass in two integer registers.
// Every entry in the range was set for this dispatch (see Bindings.Dispatch).
func (e *encoder) bind(lo, n int) {
	if n == 1 {
		e.args = [6]uintptr{uintptr(e.id), uintptr(selSetBufferOffsetAtIndex), e.ids[lo], e.offs[lo], uintptr(lo)}
		e.send(5)
		return
	}
	e.args = [6]uintptr{uintptr(e.id), uintptr(selSetBuffersOffsetsWithRange),
		uintptr(unsafe.Pointer(&e.ids[lo])), uintptr(unsafe.Pointer(&e.offs[lo])), uintptr(lo), uintptr(n)}
	e.send(6)
}

// Barrier makes later dispatches see the buffer writes of earlier ones.
func (e *encoder) Barrier() {
	if !e.ok() {
		return
	}
	e.b.Barrier()
	e.args = [6]uintptr{uintptr(e.id), uintptr(selMemoryBarrierWithScope), mtlBarrierScopeBuffers}
	e.send(3)
}

// send calls objc_msgSend with the first n words of e.args as its integer
// arguments. Passing the encoder's own array, not a slice made at the call,
// keeps purego.SyscallN free of allocations; pointers in args point into e
// (heap memory, which does not move) and e stays alive through the call.
func (e *encoder) send(n int) {
	e.sent++
	purego.SyscallN(msgSendAddr, e.args[:n]...)
	runtime.KeepAlive(e)
}

// End finishes encoding. Calling it again is a no-op.
func (e *encoder) End() {
	if e.ended {
		return
	}
	e.ended = true
	if e.cb.enc == e {
		e.cb.enc = nil
	}
	id := e.id
	e.id = 0
	if e.retained {
		withPool(func() {
			msgVoid(id, selEndEncoding)
			release(id)
		})
	} else {
		msgVoid(id, selEndEncoding) // in the command buffer's pool
	}
	e.cb.d.tally.End(&e.b)
}

// argBuf is a shared buffer setBytes data is copied into (see
// encoder.SetBytes). A command buffer takes argument buffers from its
// device's pool as it needs them and Wait returns them, so in the steady
// state no call allocates one.
type argBuf struct {
	id   objc.ID
	data []byte
	used int
}

const (
	argBufSize  = 64 << 10 // 64 KiB: more than a command buffer's 64 dispatches use
	argBufAlign = 256      // Apple: offsets of constant-address-space buffers are 256-byte aligned on macOS
)

// argPool is a device's idle argument buffers. It is safe for concurrent use.
type argPool struct {
	mu   sync.Mutex
	free []*argBuf
}

// get returns an idle argument buffer, or makes one (4 calls, counted).
func (p *argPool) get(d *device) (*argBuf, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		a := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		a.used = 0
		return a, nil
	}
	p.mu.Unlock()
	d.tally.Add(callsNewBuffer)
	b, err := d.NewBuffer(argBufSize)
	if err != nil {
		return nil, err
	}
	mb := b.(*buffer)
	return &argBuf{id: mb.id, data: mb.data}, nil
}

// put returns argument buffers the GPU is done with.
func (p *argPool) put(bufs []*argBuf) {
	if len(bufs) == 0 {
		return
	}
	p.mu.Lock()
	p.free = append(p.free, bufs...)
	p.mu.Unlock()
}

// release frees the idle argument buffers. Call it inside withPool.
func (p *argPool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.free {
		release(a.id)
	}
	p.free = nil
}

// argSlot returns room for n bytes of setBytes data in one of the command
// buffer's argument buffers: the buffer and the offset (argBufAlign-aligned).
func (c *commandBuffer) argSlot(n int) (*argBuf, int, error) {
	args := c.args
	if len(args) == 0 || args[len(args)-1].used+n > len(args[len(args)-1].data) {
		a, err := c.d.args.get(c.d)
		if err != nil {
			return nil, 0, err
		}
		c.args = append(c.args, a)
		args = c.args
	}
	a := args[len(args)-1]
	off := a.used
	a.used = (off + n + argBufAlign - 1) &^ (argBufAlign - 1)
	return a, off, nil
}
