package metal

import (
	"fmt"
	"sync/atomic"
)

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
// (tokens) of the forward call they belong to. Devices that replay whole
// command buffers (CUDA graphs keyed by their kernel sequence) do not
// implement it, and get one command buffer per synchronization.
type WorkLimiter interface {
	CommandBufferWork() int
}

// Counts is what a device's command buffers did since it was opened.
type Counts struct {
	CommandBuffers int64 // command buffers committed
	Dispatches     int64 // threadgroup grids dispatched
	Calls          int64 // Objective-C messages sent to encode, commit and wait (the interpreter counts the ones Apple's device sends)
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

// Objective-C messages per command-buffer event, as Apple's device sends them
// (metal_darwin.go): the interpreter adds the same numbers.
const (
	callsCommandBuffer = 2 // commandBufferWithUnretainedReferences, retain
	callsEncoder       = 2 // computeCommandEncoderWithDispatchType:, retain
	callsEnd           = 2 // endEncoding, release
	callsCommit        = 1 // commit
	callsWait          = 6 // waitUntilCompleted, status, error, GPUStartTime, GPUEndTime, release
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

// maxIndex is the size of Metal's argument tables: [[buffer(0..30)]],
// [[threadgroup(0..30)]].
const maxIndex = 31

// maxSameBytes is the longest setBytes data Bindings remembers to skip an
// identical call (argument structs; token ids are longer and always sent).
const maxSameBytes = 64

// Bindings is an encoder's argument table as the device last saw it. A device
// asks it before each call whether the call changes anything, and skips the
// ones that do not (Metal keeps bindings across dispatches within an
// encoder); it counts the calls sent. Apple's device and the interpreter use
// the same Bindings, so the interpreter counts the calls a Mac would make.
// The zero value is an encoder with nothing bound.
type Bindings struct {
	Calls      int64 // calls sent since the last Tally.End
	Dispatches int64

	pipe  Pipeline
	bufs  [maxIndex]bound
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

// Buffer reports whether setBuffer:offset:atIndex: must be sent.
func (b *Bindings) Buffer(index int, buf Buffer, off int) bool {
	x := &b.bufs[index]
	if x.buf == buf && x.off == off && x.nb == 0 && buf != nil {
		return false
	}
	x.buf, x.off, x.nb = buf, off, 0
	b.Calls++
	return true
}

// Bytes reports whether setBytes:length:atIndex: must be sent: not when the
// same short data is bound at index already.
func (b *Bindings) Bytes(index int, v []byte) bool {
	x := &b.bufs[index]
	if x.nb > 0 && x.nb == len(v) && string(x.bytes[:x.nb]) == string(v) {
		return false
	}
	x.buf, x.off, x.nb = nil, 0, 0
	if len(v) <= maxSameBytes {
		x.nb = copy(x.bytes[:], v)
	}
	b.Calls++
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

// Dispatch counts dispatchThreadgroups:threadsPerThreadgroup: and checks the
// threadgroup memory of the dispatch: the lengths set since the previous
// dispatch (the kernel's [[threadgroup(i)]] arguments) plus the pipeline's
// static threadgroup memory must fit limit bytes (maxThreadgroupMemoryLength;
// ≤ 0: unchecked). On error nothing is counted.
func (b *Bindings) Dispatch(static, limit int) error {
	sum := b.tgSum
	b.tgSet, b.tgSum = 0, 0
	if limit > 0 && sum+static > limit {
		return fmt.Errorf("threadgroup memory %d bytes ([[threadgroup]] arguments) + %d (static) exceeds maxThreadgroupMemoryLength %d", sum, static, limit)
	}
	b.Calls++
	b.Dispatches++
	return nil
}

// Barrier counts memoryBarrierWithScope:.
func (b *Bindings) Barrier() { b.Calls++ }
