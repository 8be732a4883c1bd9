package metal

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync/atomic"
)

// Apple GPU families (MTLGPUFamily): the kernels need Apple7 (M1 and A14)
// or later for simdgroup matrices.
const (
	FamilyApple7 = 1007
	FamilyApple9 = 1009
)

// checkGPU reports why a Metal GPU cannot run ingot's kernels, or nil: the
// process must be arm64 (a darwin/amd64 build runs on an Intel Mac, or under
// Rosetta with 4 KiB pages the no-copy weight mapping does not expect), the GPU
// Apple7 or later (family: the highest supported, 0 if none), with unified
// memory and a SIMD width (threadExecutionWidth) of 32, which the kernels'
// simdgroup row mapping assumes: another width computes wrong rows silently.
func checkGPU(arch string, family int, unified bool, simdWidth int) error {
	var why []string
	if arch != "arm64" {
		why = append(why, fmt.Sprintf("this is a darwin/%s build (an Intel Mac, or Rosetta): use the darwin/arm64 build on Apple silicon", arch))
	}
	if family < FamilyApple7 {
		why = append(why, "the GPU is not Apple7 or later (M1/A14 or newer)")
	}
	if !unified {
		why = append(why, "the GPU has no unified memory")
	}
	if simdWidth != 32 {
		why = append(why, fmt.Sprintf("the GPU's SIMD width is %d, not 32", simdWidth))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (use -backend cpu)", ErrUnavailable, strings.Join(why, "; "))
}

// CommandBufferWork is the work after which Apple's GPU and the interpreter
// ask for the command buffer being encoded to be committed (see
// [WorkLimiter]): 64 dispatches of a one-token decode step, 8 of a 512-token
// prefill chunk. ggml-metal commits every 64 nodes and MLX every 40–50 ops;
// scaling by the tokens keeps a prefill command buffer at a fraction of a
// layer of an 8B model (≈ 0.1–0.3 s on an M2), well under the watchdog.
const CommandBufferWork = 64 * 64

// A WorkLimiter is a [Device] whose command buffers must stay short. macOS
// ends a command buffer that holds the GPU for more than about a second
// while the display is in use (status 5, "Impacting Interactivity"), so the
// backend commits the one it is encoding, without waiting for it, once its
// work reaches CommandBufferWork: the sum over its dispatches of the rows
// (tokens) of the forward call they belong to, counted as at least 64 each
// (prefill attention counts more per row as the KV grows, and runs its rows
// in blocks that fit: see package kernels' attnWork).
// Devices that replay whole
// command buffers (CUDA graphs keyed by their kernel sequence) do not
// implement it, and get one command buffer per synchronization.
type WorkLimiter interface {
	CommandBufferWork() int
}

// Counts is what a device's command buffers did since it was opened.
type Counts struct {
	CommandBuffers int64 // command buffers committed
	Dispatches     int64 // threadgroup grids dispatched
	Calls          int64 // Objective-C calls made to encode, commit and wait: messages and autorelease-pool push/pop (the interpreter counts the ones Apple's device makes)
}

// A Counter is a [Device] that counts its work. Both Apple's device and the
// interpreter count Objective-C calls with the same bookkeeping ([Bindings]).
type Counter interface {
	Counts() Counts
}

// Tally is a device's [Counts], safe for concurrent use. Devices embed it.
type Tally struct {
	cbs, dispatches, calls atomic.Int64
}

// Counts returns the totals.
func (t *Tally) Counts() Counts {
	return Counts{CommandBuffers: t.cbs.Load(), Dispatches: t.dispatches.Load(), Calls: t.calls.Load()}
}

// Calls per command-buffer event, as Apple's device makes them
// (metal_darwin.go) on darwin/arm64: Objective-C messages plus the
// autorelease-pool push and pop sent through purego around them (the
// command buffer's pool is open from CommandBuffer to Commit; the thread is
// identified without a call). The interpreter adds the same numbers.
const (
	callsCommandBuffer = 3 // push, commandBufferWithUnretainedReferences, retain
	callsEncoder       = 1 // computeCommandEncoderWithDispatchType: (lives in the pool)
	callsEnd           = 1 // endEncoding
	callsCommit        = 2 // commit, pop
	callsWait          = 7 // push, waitUntilCompleted, status, GPUStartTime, GPUEndTime, release, pop (error only after a failure)
	callsNewBuffer     = 5 // push, newBufferWithLength:options:, contents, length, pop: an argument buffer, made while the pool has none idle
)

// CommandBuffer counts a command buffer made.
func (t *Tally) CommandBuffer() { t.calls.Add(callsCommandBuffer) }

// Encoder counts an encoder made.
func (t *Tally) Encoder() { t.calls.Add(callsEncoder) }

// End counts an encoder ended, adding the calls its [Bindings] sent.
func (t *Tally) End(b *Bindings) {
	t.calls.Add(callsEnd + b.Calls)
	t.dispatches.Add(b.Dispatches)
	b.Calls, b.Dispatches = 0, 0
}

// Commit counts a command buffer committed.
func (t *Tally) Commit() { t.cbs.Add(1); t.calls.Add(callsCommit) }

// Wait counts a command buffer waited for.
func (t *Tally) Wait() { t.calls.Add(callsWait) }

// Add counts n calls made outside the events above.
func (t *Tally) Add(n int64) { t.calls.Add(n) }

// maxIndex is the size of Metal's argument tables: [[buffer(0..30)]],
// [[threadgroup(0..30)]].
const maxIndex = 31

// maxSameBytes is the longest setBytes data Bindings remembers to skip an
// identical call (argument structs; token ids are longer and always sent).
const maxSameBytes = 64

// Bindings is an encoder's argument table as the device last saw it. A device
// asks it which calls each dispatch needs, skips the ones that change nothing
// (Metal keeps bindings across dispatches within an encoder), and it counts
// the calls sent. Apple's device and the interpreter use the same Bindings,
// so the interpreter counts the calls a Mac would make.
//
// Buffer bindings are sent with the dispatch, not when set: Dispatch returns
// the [[buffer(i)]] indices to bind as a mask, whose runs of consecutive
// indices are one call each (setBuffers:offsets:withRange:, or
// setBuffer:offset:atIndex: for a run of one). setBytes data goes the same
// way: Apple's device copies it into an argument buffer of the command buffer
// and binds that (see [Bindings.Bytes]), so a kernel's arguments, its
// argument struct at [[buffer(0)]] included, are one call when its indices
// are consecutive.
//
// The zero value is an encoder with nothing bound.
type Bindings struct {
	Calls      int64 // calls sent since the last Tally.End
	Dispatches int64

	pipe  Pipeline
	bufs  [maxIndex]bound
	set   uint32 // [[buffer(i)]] indices set since the last dispatch, changed or not
	dirty uint32 // those of them whose binding changed
	tg    [maxIndex]int
	tgSet uint32 // [[threadgroup(i)]] lengths set since the last dispatch
	tgSum int    // their total in bytes
}

type bound struct {
	buf   Buffer
	off   int
	nb    int // bytes of setBytes data in b (0: a buffer, or data too long to remember)
	bytes [maxSameBytes]byte
}

// Pipeline reports whether setComputePipelineState: must be sent.
func (b *Bindings) Pipeline(p Pipeline) bool {
	if b.pipe == p {
		return false
	}
	b.pipe = p
	b.Calls++
	return true
}

// Buffer reports whether the binding of [[buffer(index)]] changes; if so it
// is bound with the next dispatch.
func (b *Bindings) Buffer(index int, buf Buffer, off int) bool {
	b.set |= 1 << index
	x := &b.bufs[index]
	if x.buf == buf && x.off == off && x.nb == 0 && buf != nil {
		return false
	}
	x.buf, x.off, x.nb = buf, off, 0
	b.dirty |= 1 << index
	return true
}

// Bytes reports whether setBytes data v at [[buffer(index)]] changes the
// binding: not when the same short data is bound there already. If so, the
// device binds a copy of v with the next dispatch (Apple's device: in the
// command buffer's argument buffer, at an offset of its own; the interpreter:
// in a buffer of its own).
func (b *Bindings) Bytes(index int, v []byte) bool {
	b.set |= 1 << index
	x := &b.bufs[index]
	if x.nb > 0 && x.nb == len(v) && string(x.bytes[:x.nb]) == string(v) {
		return false
	}
	x.buf, x.off, x.nb = nil, 0, 0
	if len(v) <= maxSameBytes {
		x.nb = copy(x.bytes[:], v)
	}
	b.dirty |= 1 << index
	return true
}

// ThreadgroupMemory reports whether setThreadgroupMemoryLength:atIndex: must
// be sent, and adds n to the next dispatch's total.
func (b *Bindings) ThreadgroupMemory(index, n int) bool {
	if b.tgSet&(1<<index) == 0 {
		b.tgSet |= 1 << index
		b.tgSum += n
	} else {
		b.tgSum += n - b.tg[index]
	}
	if b.tg[index] == n {
		return false
	}
	b.tg[index] = n
	b.Calls++
	return true
}

// Dispatch counts dispatchThreadgroups:threadsPerThreadgroup: and the buffer
// bindings sent before it, and checks the threadgroup memory of the
// dispatch: the lengths set since the previous dispatch (the kernel's
// [[threadgroup(i)]] arguments) plus the pipeline's static threadgroup memory
// must fit limit bytes (maxThreadgroupMemoryLength; ≤ 0: unchecked).
//
// bind is the mask of [[buffer(i)]] indices to bind before the dispatch, one
// call per run of consecutive indices (see [Runs]): each changed index, and
// an unchanged one between two changed ones when this dispatch set it too
// (its buffer is one the caller holds, so rebinding it is safe and joins two
// runs into one). On error nothing is counted and bind is 0.
func (b *Bindings) Dispatch(static, limit int) (bind uint32, err error) {
	sum := b.tgSum
	set, dirty := b.set, b.dirty
	b.tgSet, b.tgSum, b.set, b.dirty = 0, 0, 0, 0
	if limit > 0 && sum+static > limit {
		return 0, fmt.Errorf("threadgroup memory %d bytes ([[threadgroup]] arguments) + %d (static) exceeds maxThreadgroupMemoryLength %d", sum, static, limit)
	}
	bind = bridge(set|dirty, dirty)
	b.Calls += int64(Runs(bind)) + 1
	b.Dispatches++
	return bind, nil
}

// bridge returns dirty plus the bits of set that lie between two bits of
// dirty with only bits of set between them.
func bridge(set, dirty uint32) uint32 {
	bind := dirty
	for rest := dirty; rest != 0; {
		lo := bits.TrailingZeros32(rest)
		rest &^= 1 << lo
		if rest == 0 {
			break
		}
		next := bits.TrailingZeros32(rest)
		gap := uint32(1)<<next - uint32(1)<<(lo+1) // the bits strictly between lo and next
		if set&gap == gap {
			bind |= gap
		}
	}
	return bind
}

// Runs returns the number of runs of consecutive set bits in mask: the calls
// that bind it.
func Runs(mask uint32) int { return bits.OnesCount32(mask &^ (mask << 1)) }

// NextRun returns the first run of consecutive set bits in mask, as its
// lowest index and length, and mask without it; n is 0 when mask is 0.
func NextRun(mask uint32) (lo, n int, rest uint32) {
	if mask == 0 {
		return 0, 0, 0
	}
	lo = bits.TrailingZeros32(mask)
	n = bits.TrailingZeros32(^(mask >> lo))
	return lo, n, mask &^ (uint32(1)<<(lo+n) - uint32(1)<<lo)
}

// Barrier counts memoryBarrierWithScope:.
func (b *Bindings) Barrier() { b.Calls++ }

// ErrDeviceLost is wrapped by the errors of a device after a command buffer
// failed on it: Apple's GPU ignores a process's later submissions after such
// an error, so the device refuses them and must be opened again.
var ErrDeviceLost = errors.New("metal: device lost")

// MTLCommandBufferError codes (MTLCommandBufferErrorDomain).
const (
	CodeInternal    = 1
	CodeTimeout     = 2
	CodePageFault   = 3
	CodeIgnored     = 4 // AccessRevoked / SubmissionsIgnored: after earlier errors
	CodeOutOfMemory = 8
)

// A CommandBufferError is a command buffer the GPU ended with an error
// (MTLCommandBufferStatusError). It wraps [ErrDeviceLost].
type CommandBufferError struct {
	Code       int    // NSError code in MTLCommandBufferErrorDomain (see Code*)
	Text       string // its localized description, e.g. "Impacting Interactivity (0000000e:kIOGPUCommandBufferCallbackErrorImpactingInteractivity)"
	Dispatches int    // dispatches in the command buffer
	Kernel     string // the last one's kernel
	Encoders   string // per-encoder execution status, when errorOptions asked for it (-v)
}

// Cause names what went wrong and how to avoid it, from the code and the
// IOGPU status in the text (0xe is the interactivity watchdog).
func (e *CommandBufferError) Cause() string {
	t := strings.ToLower(e.Text)
	switch {
	case strings.Contains(t, "impactinginteractivity") || strings.Contains(t, "0000000e") || strings.Contains(t, "impacting interactivity"):
		return "the macOS GPU watchdog stopped a command buffer that held the GPU too long while the display was in use; " +
			"use a shorter prompt or smaller prompt chunks, or a smaller model"
	case e.Code == CodeTimeout || strings.Contains(t, "timeout"):
		return "the GPU timed out; use a shorter prompt or smaller prompt chunks, or a smaller model"
	case e.Code == CodeOutOfMemory || strings.Contains(t, "outofmemory") || strings.Contains(t, "out of memory"):
		return "the GPU ran out of memory; use a smaller context (-ctx), a smaller model, or close other apps using the GPU"
	case e.Code == CodeIgnored || strings.Contains(t, "submissionsignored"):
		return "the GPU ignores this process's work after an earlier error; restart it"
	case e.Code == CodePageFault:
		return "a kernel read or wrote outside its buffers (a bug: please report it with `run selftest -backend metal`)"
	}
	return "GPU error"
}

func (e *CommandBufferError) Error() string {
	s := fmt.Sprintf("metal: command buffer failed (%d dispatches, last kernel %s): %s (code %d): %s; the device is lost, load the model again",
		e.Dispatches, e.Kernel, e.Text, e.Code, e.Cause())
	if e.Encoders != "" {
		s += "; encoders: " + e.Encoders
	}
	return s
}

func (e *CommandBufferError) Unwrap() error { return ErrDeviceLost }

// Lost holds the error that made a device unusable, safe for concurrent use.
// Devices embed it: after Set, their CommandBuffer returns Err.
type Lost struct {
	err atomic.Pointer[CommandBufferError]
}

// Set records e unless an error is recorded already.
func (l *Lost) Set(e *CommandBufferError) { l.err.CompareAndSwap(nil, e) }

// Err returns the recorded error, or nil.
func (l *Lost) Err() error {
	if e := l.err.Load(); e != nil {
		return e
	}
	return nil
}
