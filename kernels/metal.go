package kernels

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/ingot-llm/ingot/metal"
)

// Metal runs the op vocabulary on a [metal.Device]: Apple's GPU (package metal)
// or the MSL interpreter (internal/msl, the "metal-emu" backend). Both run the
// same kernels (package shaders) through this same dispatch code.
//
// Ops are encoded into a command buffer and run when [Metal.Sync] (or
// [Metal.Download], [Metal.Argmax], [Metal.TopK]) commits it and waits: one
// CPU wait per Sync. On a device that limits command buffers (Apple's GPU and
// the interpreter, see [metal.WorkLimiter]) the one being encoded is also
// committed, without a wait, at the start of each forward call ([Metal.Embed])
// and once its work reaches the device's limit, so a long prefill is many
// short command buffers the macOS watchdog leaves alone; CUDA, which replays
// whole command buffers as graphs, gets one per Sync. [Metal.ArgmaxAsync] commits without waiting, so the
// next token's command buffer can be queued behind it (see [Pipeliner]); the
// device runs committed command buffers in order. Dependent dispatches are
// separated by barriers, found by tracking which buffers each dispatch reads
// and writes. Activations are f32
// device buffers made by [Metal.New]. [Metal.Upload] binds weights in place when
// their bytes lie in a region registered with [Metal.Map] (an mmap'd file), and
// copies them into new device buffers otherwise. A Metal is not safe for
// concurrent use: each goroutine runs its own stream ([Metal.NewStream]).
type Metal struct {
	dev       metal.Device
	ownDev    bool                                             // opened by Open: Close releases it
	shape     kernelShape                                      // which shape of the hot kernels runs (see matvecNVNames); from the device
	nv        *nvTable                                         // the (scale, bias) pairs Upload made for shapeNVIDIA, shared with the streams
	nvGeom    func(dt DType, rows, K int) (laneShift, nsg int) // a fixed geometry instead of nvGeom's (tests; INGOT_NV_GEOM)
	nvNoStage bool                                             // tests: the matvec_*_nv kernels that read x from device memory
	nvInt     nvIntMode                                        // where the _nvi mat-vecs run (INGOT_NV_INT; tests)
	nvQX      metal.Buffer                                     // quantx's output, grown on demand
	nvTC8     bool                                             // q4/q8 prefill on the int8 tensor-core kernels (default; INGOT_NV_TC=bf16: the bf16 ones)
	nvQX8     metal.Buffer                                     // quantx_tc8's output, grown on demand
	noV16     bool                                             // tests: matvec_q4/q8_f32 instead of their _v16 forms
	noMVB     bool                                             // tests: MatMul at 2 ≤ L ≤ 8 on the prefill tiles, as before the small-batch mat-vec
	pipes     map[string]metal.Pipeline
	bufs      []metal.Buffer // every buffer this backend made, released by Close
	maps      []*mapping     // host regions wrapped by Map

	cb       metal.CommandBuffer // being encoded; nil until the first op after a commit
	enc      metal.Encoder
	pending  []metal.Buffer // buffers to release once cb completes
	last     string         // the last kernel encoded, for error messages
	err      error          // first encoding error, returned by Sync
	inflight []committed    // committed and not yet waited for, oldest first
	seq      int64          // command buffers committed so far
	lost     error          // the device failed (wraps metal.ErrDeviceLost): every later call returns it

	kvF16 bool // f16 is the KV cache default (see DefaultKV)

	// Command buffer splitting (see metal.WorkLimiter): work is the sum over
	// cb's dispatches of their estimated work: max(rows, 64), rows the tokens
	// of the forward call being encoded, or the op's own estimate (prefill
	// attention's grows with the KV length, see attnWork).
	workLimit, work, rows int

	// decodeSplit: a one-token forward is committed every decodeSplit
	// dispatches (decodeN so far), so the GPU runs the first layers while
	// the CPU encodes the rest (see cudaDecodeSplit; 0: one command buffer
	// per synchronization).
	decodeSplit, decodeN int

	// Hazard tracking since the last barrier (buffer granularity).
	written, read []metal.Buffer

	// The op being encoded (see begin … run); a field so ops allocate nothing.
	call struct {
		name  string
		pipe  metal.Pipeline
		args  [128]byte
		nargs int
		bufs  [16]callBuf
		nbufs int
		tg    [2]int
		work  int // the dispatch's estimated work; 0: max(rows, 64)
	}

	attnPart  metal.Buffer    // flash-decoding partials, grown on demand
	argmaxOut metal.Buffer    // 16 bytes: the Argmax result
	toks      tokenQueue      // ArgmaxAsync results (Pipeliner)
	topkPart  [2]metal.Buffer // TopK's pass outputs, grown on demand
	scratch   [8]byte         // host bytes read back from the device
	topkHost  []byte          // TopK's pairs read back, grown on demand
	stats     Stats
}

// committed is a command buffer the device may still be running.
type committed struct {
	cb      metal.CommandBuffer
	seq     int64
	last    string         // its last kernel
	release []metal.Buffer // to release once it completes
}

type callBuf struct {
	index int
	buf   metal.Buffer
	off   int
	write bool
	bytes []byte // setBytes data instead of a buffer (non-nil)
}

// Stats counts the work a [Metal] backend did since it was made or since the
// last [Metal.ResetStats]. Divide by the tokens run for per-token figures.
type Stats struct {
	Dispatches     int64         // kernels encoded
	Barriers       int64         // memory barriers between dependent dispatches
	CommandBuffers int64         // command buffers committed
	Waits          int64         // CPU waits for the device (one per Sync with work)
	WeightBytes    int64         // weight bytes the encoded kernels read (packed codes, scales, biases)
	GPUTime        time.Duration // device time of the committed command buffers

	ReadBytes int64 // bytes the host read back: Download, Argmax, NextToken, TopK

	MappedBytes int64 // weight bytes Upload bound in place in a region registered with Map (no copy)
	CopiedBytes int64 // weight bytes Upload copied into new device buffers
}

// cudaDecodeSplit is decodeSplit on the cuda device (INGOT_CUDA_SPLIT=N
// sets it, 0 turns it off). Encoding a decode step's ~150–290 dispatches
// and replaying its graph cost the CPU 0.3–1 ms a token during which the
// GPU idled (busy 0.60 of a 1B q4 step, 0.75 of an 8B one, H100); with the
// step in pieces of 32 each piece's graph runs while the next is encoded
// (busy 0.72, 0.90; docs/perf/cuda.md, 2026-11-28 second session). Each
// piece keeps a graph of its own (cudadev's findGraph).
const cudaDecodeSplit = 32

// NewMetal returns a backend running on dev. It compiles nothing up front:
// pipelines are looked up by kernel name on first use and cached.
func NewMetal(dev metal.Device) (*Metal, error) {
	if dev == nil {
		return nil, fmt.Errorf("kernels: metal: nil device")
	}
	m := &Metal{dev: dev, pipes: map[string]metal.Pipeline{}, shape: shapeOf(dev), nv: &nvTable{by: map[metal.Buffer][]nvPairs{}}, rows: 1,
		nvInt: nvIntFromEnv(os.Getenv("INGOT_NV_INT")), nvGeom: nvGeomFromEnv(os.Getenv("INGOT_NV_GEOM")),
		nvTC8: os.Getenv("INGOT_NV_TC") != "bf16"}
	if w, ok := dev.(metal.WorkLimiter); ok {
		m.workLimit = w.CommandBufferWork()
	}
	k, ok := dev.(interface{ Kind() string })
	m.kvF16 = !ok || k.Kind() != "cuda"
	if ok && k.Kind() == "cuda" {
		m.decodeSplit = cudaDecodeSplit
		if n, err := strconv.Atoi(os.Getenv("INGOT_CUDA_SPLIT")); err == nil && n >= 0 {
			m.decodeSplit = n
		}
	}
	var err error
	if m.argmaxOut, err = m.newBuffer(16); err != nil {
		return nil, err
	}
	return m, nil
}

// NewStream returns a backend on m's device with its own command buffers,
// buffers, pipeline cache and counters (see [Backend.NewStream]). The device
// is safe for concurrent use; two streams' command buffers are ordered only
// among their own.
func (m *Metal) NewStream() (Backend, error) {
	s, err := NewMetal(m.dev)
	if err != nil {
		return nil, err
	}
	s.shape, s.nv, s.nvInt, s.nvGeom, s.nvTC8 = m.shape, m.nv, m.nvInt, m.nvGeom, m.nvTC8 // the kernels m's uploads were made for
	return s, nil
}

// Name returns the device's kind and name: "metal:Apple M2",
// "metal:msl-interpreter", "cuda:NVIDIA H100 80GB HBM3".
func (m *Metal) Name() string {
	if k, ok := m.dev.(interface{ Kind() string }); ok {
		return k.Kind() + ":" + m.dev.Name()
	}
	return "metal:" + m.dev.Name()
}

// DefaultKV returns the KV cache type of a session on b whose caller did not
// choose one: f16 on Apple's GPU and the interpreter, where decode attention
// is bound by the bytes it reads (f16 halves them and the cache memory, and
// the kernels read f16 keys and values directly); f32 on the CPU and CUDA.
func DefaultKV(b Backend) DType {
	if m, ok := b.(*Metal); ok && m.kvF16 {
		return DTypeF16
	}
	return DTypeF32
}

// Device returns the device m runs on.
func (m *Metal) Device() metal.Device { return m.dev }

// Stats returns the counters (see [Stats]).
func (m *Metal) Stats() Stats { return m.stats }

// ResetStats zeroes the counters.
func (m *Metal) ResetStats() { m.stats = Stats{} }

func (m *Metal) newBuffer(n int) (metal.Buffer, error) {
	b, err := m.dev.NewBuffer(max(n, 16))
	if err != nil {
		return nil, fmt.Errorf("kernels: metal: new buffer of %d bytes: %w", n, err)
	}
	m.bufs = append(m.bufs, b)
	return b, nil
}

// New returns a zeroed f32 tensor in a new device buffer. It panics if the
// device cannot allocate it.
func (m *Metal) New(shape ...int) *Tensor { return m.alloc(DTypeF32, shape) }

// NewF16 returns a zeroed f16 tensor of the given shape in a new buffer.
func (m *Metal) NewF16(shape ...int) *Tensor { return m.alloc(DTypeF16, shape) }

func (m *Metal) alloc(dt DType, shape []int) *Tensor {
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...)}
	b, err := m.newBuffer(dt.Bits() / 8 * t.Len())
	if err != nil {
		panic(err)
	}
	t.Buf = b
	return t
}

// Upload makes a host weight (1-D or 2-D; f32, f16, bf16 or affine-quantized
// with f32, f16 or bf16 scales and biases) usable on the device and returns
// the device tensor. Bytes inside a region registered with [Metal.Map], at an
// offset the kernels can read (4-byte aligned; 2 for f16 and bf16, affine
// scales and biases included; 16 for the codes of NVIDIA-shaped mat-vecs),
// are bound in place; others are copied into a new buffer. Stats.MappedBytes
// and Stats.CopiedBytes count which path each byte took.
//
// Apple-shaped kernels read affine scales and biases as stored (MLX's bf16 or
// f16: a q4 g64 weight is 4.5 bits a weight; see affineNames). NVIDIA-shaped
// ones get f32 scales and biases (16-bit ones widened here, a copy: the
// prefill matmul_<w>_f32_nv reads f32), and for a q4 or q8 matrix also its
// scales and biases as interleaved pairs, 16-bit where they are exact (see
// matvecNVNames).
func (m *Metal) Upload(t *Tensor) (*Tensor, error) {
	if _, _, err := checkWeight(t); err != nil { // the same checks as the CPU backend
		return nil, err
	}
	if t.DType.Quantized() && t.GroupSize%8 != 0 {
		return nil, fmt.Errorf("kernels: upload: %s%v: group size %d is not a multiple of 8 (the metal kernels read 8 codes at a time)", t.DType, t.Shape, t.GroupSize)
	}
	d := &Tensor{DType: t.DType, Shape: append([]int(nil), t.Shape...), GroupSize: t.GroupSize}
	nv := m.shape == shapeNVIDIA && nvQuant(t)
	align := elemAlign(t.DType)
	if nv {
		align = 16 // matvec_*_nv loads 16 bytes of codes
	}
	if b, off, ok := m.mapped(t.Data, align); ok {
		d.Buf, d.Off = b, off
		m.stats.MappedBytes += int64(len(t.Data))
	} else {
		b, err := m.upload(t.Data)
		if err != nil {
			return nil, err
		}
		d.Buf = b
		m.stats.CopiedBytes += int64(len(t.Data))
	}
	if t.Scales != nil {
		if m.shape == shapeNVIDIA {
			t = WidenAffine(t)
		}
		var err error
		if d.Scales, err = m.Upload(t.Scales); err != nil {
			return nil, err
		}
		if d.Biases, err = m.Upload(t.Biases); err != nil {
			return nil, err
		}
		if nv {
			if err := m.makePairs(d, t); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

func (m *Metal) upload(data []byte) (metal.Buffer, error) {
	b, err := m.newBuffer(len(data))
	if err != nil {
		return nil, err
	}
	if err := writeBuf(b, 0, data); err != nil {
		return nil, err
	}
	return b, nil
}

// readBuf copies len(dst) bytes of b at off into dst: through Contents where
// the host addresses device memory (Apple GPUs, the interpreter), else by a
// copy (metal.HostCopier: a discrete GPU).
func readBuf(b metal.Buffer, off int, dst []byte) error {
	if c := b.Contents(); c != nil {
		copy(dst, c[off:])
		return nil
	}
	if h, ok := b.(metal.HostCopier); ok {
		return h.ReadAt(dst, off)
	}
	return fmt.Errorf("kernels: metal: a %T is neither host-visible nor a metal.HostCopier", b)
}

// writeBuf copies src into b at off (see readBuf).
func writeBuf(b metal.Buffer, off int, src []byte) error {
	if c := b.Contents(); c != nil {
		copy(c[off:], src)
		return nil
	}
	if h, ok := b.(metal.HostCopier); ok {
		return h.WriteAt(src, off)
	}
	return fmt.Errorf("kernels: metal: a %T is neither host-visible nor a metal.HostCopier", b)
}

// readU32 reads the little-endian uint32 at the start of b.
func (m *Metal) readU32(b metal.Buffer) (uint32, error) {
	if err := readBuf(b, 0, m.scratch[:4]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(m.scratch[:4]), nil
}

// Download waits for every enqueued op and copies the f32 tensor src to dst.
func (m *Metal) Download(dst []float32, src *Tensor) error {
	if src.DType != DTypeF32 {
		panic("kernels: Download of " + src.DType.String() + " tensor")
	}
	if err := m.Sync(context.Background()); err != nil {
		return err
	}
	b := bufOf("Download", src)
	n := min(len(dst), src.Len())
	if n == 0 {
		return nil
	}
	if err := readBuf(b, src.Off, unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*n)); err != nil {
		return fmt.Errorf("kernels: metal: download: %w", err)
	}
	m.stats.ReadBytes += int64(4 * n)
	return nil
}

// Sync commits the command buffer of the ops enqueued since the last commit,
// waits for every committed command buffer and returns the first encoding or
// device error.
func (m *Metal) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.commit()
	err := m.wait(len(m.inflight))
	if m.err != nil {
		err = m.err // the encoding error explains the device's
	}
	m.err = nil
	if m.lost != nil {
		return m.lost
	}
	return err
}

// commit ends the command buffer being encoded, if any, and commits it without
// waiting.
func (m *Metal) commit() {
	if m.cb == nil {
		return
	}
	m.enc.End()
	m.cb.Commit()
	m.seq++
	m.stats.CommandBuffers++
	m.inflight = append(m.inflight, committed{cb: m.cb, seq: m.seq, last: m.last, release: m.pending})
	m.cb, m.enc, m.last, m.pending, m.work, m.decodeN = nil, nil, "", nil, 0, 0
	m.written, m.read = m.written[:0], m.read[:0]
}

// wait blocks until the n oldest committed command buffers completed (one CPU
// wait), releases their transient buffers and returns the first device error.
func (m *Metal) wait(n int) error {
	if n == 0 {
		return nil
	}
	m.stats.Waits++
	var err error
	for _, c := range m.inflight[:n] {
		werr := c.cb.Wait()
		m.stats.GPUTime += c.cb.GPUDuration()
		for _, b := range c.release {
			m.release(b)
		}
		if werr != nil && err == nil {
			err = fmt.Errorf("kernels: metal: command buffer (last kernel %s): %w", c.last, werr)
			if errors.Is(werr, metal.ErrDeviceLost) && m.lost == nil {
				m.lost = err
			}
		}
	}
	m.inflight = append(m.inflight[:0], m.inflight[n:]...)
	return err
}

// release frees b, which this backend made.
func (m *Metal) release(b metal.Buffer) {
	for i, x := range m.bufs {
		if x == b {
			m.bufs[i] = m.bufs[len(m.bufs)-1]
			m.bufs = m.bufs[:len(m.bufs)-1]
			break
		}
	}
	b.Release()
}

// Close waits for pending work and releases every buffer this backend made;
// tensors from New and Upload are invalid afterwards. A backend [Open] made
// also releases its device (close its streams first).
func (m *Metal) Close() error {
	err := m.Sync(context.Background())
	for _, b := range m.bufs {
		b.Release()
	}
	m.bufs, m.maps = nil, nil
	if m.ownDev {
		m.dev.Release()
		m.ownDev = false
	}
	return err
}

// bufOf returns the device buffer of t, made by a Metal backend.
func bufOf(op string, t *Tensor) metal.Buffer {
	b, ok := t.Buf.(metal.Buffer)
	if !ok || b == nil {
		panic(fmt.Sprintf("kernels: %s: %s%v tensor is not on the metal device (Buf %T)", op, t.DType, t.Shape, t.Buf))
	}
	return b
}

// pipeline returns the cached pipeline of a kernel, or nil after recording the
// error for Sync.
func (m *Metal) pipeline(name string) metal.Pipeline {
	if p, ok := m.pipes[name]; ok {
		return p
	}
	p, err := m.dev.Pipeline(name)
	if err != nil {
		m.fail(fmt.Errorf("kernels: metal: pipeline %s: %w", name, err))
		return nil
	}
	if p.MaxThreads() <= 0 {
		m.fail(fmt.Errorf("kernels: metal: pipeline %s: maxTotalThreadsPerThreadgroup is %d", name, p.MaxThreads()))
		return nil
	}
	m.pipes[name] = p
	return p
}

func (m *Metal) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// begin starts encoding one dispatch of the named kernel. Bind arguments with
// args, in, out, bytes and tgmem, then call run.
func (m *Metal) begin(name string) {
	c := &m.call
	c.name, c.pipe, c.nargs, c.nbufs, c.tg, c.work = name, m.pipeline(name), 0, 0, [2]int{}, 0
}

// setArgs makes v (a mirror of a common.h struct) the kernel's [[buffer(0)]].
func setArgs[T any](m *Metal, v T) {
	c := &m.call
	c.nargs = copy(c.args[:], unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)))
}

// in binds tensor t, read by the kernel, at [[buffer(i)]].
func (m *Metal) in(i int, t *Tensor) { m.bind(i, bufOf(m.call.name, t), t.Off, false) }

// out binds tensor t, written by the kernel, at [[buffer(i)]].
func (m *Metal) out(i int, t *Tensor) { m.bind(i, bufOf(m.call.name, t), t.Off, true) }

func (m *Metal) bind(i int, b metal.Buffer, off int, write bool) {
	c := &m.call
	c.bufs[c.nbufs] = callBuf{index: i, buf: b, off: off, write: write}
	c.nbufs++
}

// bytes binds a small constant array (≤ 4 kB, copied at encoding) at [[buffer(i)]].
func (m *Metal) bytes(i int, v []byte) {
	c := &m.call
	c.bufs[c.nbufs] = callBuf{index: i, bytes: v}
	c.nbufs++
}

// tgmem sets the length of [[threadgroup(i)]] memory, rounded up to 16 bytes.
func (m *Metal) tgmem(i, n int) { m.call.tg[i] = (n + 15) &^ 15 }

// run encodes the dispatch begun by begin: groups threadgroups of threads
// threads each, after a barrier if it depends on an earlier dispatch.
//
// Nothing is encoded after an error is recorded (until Sync returns it): a
// dispatch whose binding failed would read the previous dispatch's buffer.
func (m *Metal) run(groups, threads metal.Size) {
	c := &m.call
	if m.err != nil || m.lost != nil {
		return // the error is recorded
	}
	if n := threads.W * threads.H * threads.D; n > c.pipe.MaxThreads() {
		m.fail(fmt.Errorf("kernels: metal: dispatch %s: %d threads per threadgroup exceeds pipeline max %d", c.name, n, c.pipe.MaxThreads()))
		return
	}
	if m.cb == nil {
		cb, err := m.dev.CommandBuffer()
		if err != nil {
			err = fmt.Errorf("kernels: metal: command buffer: %w", err)
			if errors.Is(err, metal.ErrDeviceLost) {
				m.lost = err
			}
			m.fail(err)
			return
		}
		m.cb, m.enc = cb, cb.Encoder()
	}
	if m.hazard() {
		m.enc.Barrier()
		m.stats.Barriers++
		m.written, m.read = m.written[:0], m.read[:0]
	}
	e := m.enc
	e.SetPipeline(c.pipe)
	if c.nargs > 0 {
		e.SetBytes(0, c.args[:c.nargs])
	}
	for _, b := range c.bufs[:c.nbufs] {
		switch {
		case b.bytes != nil:
			e.SetBytes(b.index, b.bytes)
		case b.write:
			e.SetBuffer(b.index, b.buf, b.off)
			m.written = append(m.written, b.buf)
		default:
			e.SetBuffer(b.index, b.buf, b.off)
			m.read = append(m.read, b.buf)
		}
	}
	for i, n := range c.tg {
		if n > 0 {
			e.SetThreadgroupMemory(i, n)
		}
	}
	e.Dispatch(groups, threads)
	m.last = c.name
	m.stats.Dispatches++
	if m.decodeSplit > 0 && m.rows == 1 {
		if m.decodeN++; m.decodeN >= m.decodeSplit {
			m.commit()
		}
	} else if m.workLimit > 0 {
		w := c.work
		if w == 0 {
			w = max(m.rows, 64)
		}
		if m.work += w; m.work >= m.workLimit {
			m.commit() // after the dispatch: its transient buffers go with it
		}
	}
}

// startCall begins a forward call of rows tokens (Embed): on a device that
// limits command buffers, the work before it is committed, so every prefill
// chunk starts a command buffer of its own.
func (m *Metal) startCall(rows int) {
	m.rows = max(rows, 1)
	if m.workLimit > 0 && m.cb != nil {
		m.commit()
	}
}

// attnKeys is the number of keys over which a query row of prefill attention
// counts as one unit of command-buffer work, like one token through one
// mat-mul dispatch. An estimate: per row and key, attention does 4·H·Dh
// flops in a scalar kernel, where a projection does 2·D per output row in
// simdgroup matrices, several times faster a flop; at a few thousand keys a
// row of attention costs tens of projection rows, and it grows with the KV.
const attnKeys = 256

// attnWork is the estimated command-buffer work of one query row of
// prefill attention over n keys (see metal.WorkLimiter).
func attnWork(n int) int { return max(1, (n+attnKeys-1)/attnKeys) }

// hazard reports whether the dispatch being encoded reads a buffer written, or
// writes a buffer read or written, since the last barrier.
func (m *Metal) hazard() bool {
	c := &m.call
	for _, b := range c.bufs[:c.nbufs] {
		if b.buf == nil {
			continue
		}
		if contains(m.written, b.buf) || b.write && contains(m.read, b.buf) {
			return true
		}
	}
	return false
}

func contains(s []metal.Buffer, b metal.Buffer) bool {
	for _, x := range s {
		if x == b {
			return true
		}
	}
	return false
}

// transient returns a buffer holding data that lives until the next Sync.
func (m *Metal) transient(data []byte) metal.Buffer {
	b, err := m.upload(data)
	if err != nil {
		m.fail(err)
		return nil
	}
	m.pending = append(m.pending, b)
	return b
}

// weightBytes returns the bytes of rows of w a kernel reads: packed codes plus
// scales and biases, in their device dtype.
func weightBytes(w *Tensor, rows int) int64 {
	n := int64(rows) * int64(w.DType.RowBytes(w.Cols()))
	if w.Scales != nil {
		n += int64(rows) * int64(w.Scales.DType.RowBytes(w.Scales.Cols())+w.Biases.DType.RowBytes(w.Biases.Cols()))
	}
	return n
}

// grid1 is the geometry of an elementwise kernel over n elements: threadgroups
// of 256 threads, one element per thread.
func grid1(n int) (groups, threads metal.Size) {
	return metal.Size{W: max(1, (n+255)/256), H: 1, D: 1}, metal.Size{W: 256, H: 1, D: 1}
}

// Compile-time check.
var _ Backend = (*Metal)(nil)
