package kernels

import (
	"context"
	"errors"
	"fmt"

	"github.com/ingot-llm/ingot/metal"
)

// argmaxArgs mirrors struct argmax_args in shaders/common.h.
type argmaxArgs struct {
	N, Pad0, Pad1, Pad2 uint32
}

var (
	_ Argmaxer  = (*Metal)(nil)
	_ Pipeliner = (*Metal)(nil)
)

// Argmax returns the smallest index of the largest element of x (argmax_f32),
// waiting for every enqueued op.
func (m *Metal) Argmax(x *Tensor) (int32, error) {
	m.argmax(x, m.argmaxOut)
	if err := m.Sync(context.Background()); err != nil {
		return 0, err
	}
	m.stats.ReadBytes += 4
	v, err := m.readU32(m.argmaxOut)
	return int32(v), err
}

// argmax enqueues argmax_f32 of x into out[0].
func (m *Metal) argmax(x *Tensor, out metal.Buffer) {
	n := x.Len()
	m.begin("argmax_f32")
	setArgs(m, argmaxArgs{N: uint32(n)})
	m.in(1, x)
	m.bind(2, out, 0, true)
	m.tgmem(0, 4*32)
	m.tgmem(1, 4*32)
	// One threadgroup; 1024 threads stride x.
	m.run(metal.Size{W: 1, H: 1, D: 1}, metal.Size{W: min(1024, max(32, (n+31)&^31)), H: 1, D: 1})
}

// tokenQueue holds the tokens of ArgmaxAsync calls not yet read by NextToken,
// in two device slots used in turn: the slot a step's argmax writes is never
// the one the host is about to read.
type tokenQueue struct {
	slot       [2]metal.Buffer // 16 bytes each: the token in the first 4
	seq        [2]int64        // the command buffer that writes each slot
	n          [2]int          // logits the argmax ran over: ids are below it
	head, size int             // the oldest queued slot; tokens queued
}

// ArgmaxAsync enqueues argmax_f32 of x into the next token slot and commits
// every enqueued op without waiting (see [Pipeliner]). Queuing a third token
// before reading one is a programmer error and panics.
func (m *Metal) ArgmaxAsync(x *Tensor) {
	q := &m.toks
	if q.size == len(q.slot) {
		panic(fmt.Sprintf("kernels: ArgmaxAsync: %d tokens already queued (read one with NextToken)", q.size))
	}
	s := (q.head + q.size) % len(q.slot)
	if q.slot[s] == nil {
		b, err := m.newBuffer(16)
		if err != nil {
			m.fail(err)
			return
		}
		q.slot[s] = b
	}
	m.argmax(x, q.slot[s])
	m.commit()
	q.seq[s], q.n[s] = m.seq, x.Len()
	q.size++
}

// EmbedArgmax gathers the row of table (V, D) for the token of the latest
// ArgmaxAsync into dst (1, D), times scale, reading the id on the device
// (embed_<table dtype>_f32, the kernel of Embed).
func (m *Metal) EmbedArgmax(dst, table *Tensor, scale float32) {
	q := &m.toks
	if q.size == 0 {
		panic("kernels: EmbedArgmax: no token queued (call ArgmaxAsync first)")
	}
	s := (q.head + q.size - 1) % len(q.slot)
	if V := table.Shape[0]; q.n[s] > V {
		panic(fmt.Sprintf("kernels: EmbedArgmax: the argmax over %d logits can pick rows past the table's %d", q.n[s], V))
	}
	mustShape("EmbedArgmax", "dst", dst, 1, table.Cols())
	if q.slot[s] == nil {
		return // ArgmaxAsync failed to allocate; the error is recorded
	}
	m.beginEmbed(dst, table, scale, 1)
	m.bind(2, q.slot[s], 0, false)
	m.runEmbed(table, 1)
}

// NextToken waits for the command buffer of the oldest queued token (and
// those before it), removes the token from the queue and returns it.
func (m *Metal) NextToken() (int32, error) {
	q := &m.toks
	if q.size == 0 {
		return 0, errors.New("kernels: NextToken: no token queued (call ArgmaxAsync first)")
	}
	s := q.head
	q.head, q.size = (q.head+1)%len(q.slot), q.size-1
	n := 0
	for n < len(m.inflight) && m.inflight[n].seq <= q.seq[s] {
		n++
	}
	err := m.wait(n)
	if m.err != nil {
		err = m.err
	}
	m.err = nil
	if err != nil {
		return 0, err
	}
	m.stats.ReadBytes += 4
	v, err := m.readU32(q.slot[s])
	return int32(v), err
}
