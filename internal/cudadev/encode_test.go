package cudadev

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/cuda"
	"github.com/ingot-llm/ingot/cuda/ptx"
	"github.com/ingot-llm/ingot/metal"
)

// TestEncode checks how an encoder maps Metal bindings onto an entry's
// parameters, without a driver: by-value arguments, device addresses with
// their offsets, setBytes to a pointer parameter (into the command buffer's
// constants, 16-byte aligned), threadgroup offsets and the dynamic shared
// memory, bindings that persist across dispatches, and the errors for an
// unbound buffer or oversized arguments.
func TestEncode(t *testing.T) {
	k := ptx.Kernel{Name: "k", Params: []ptx.Param{
		{Kind: ptx.Value, Index: 0, Size: 8, Align: 4},
		{Kind: ptx.Buffer, Index: 1, Size: 8, Align: 8},
		{Kind: ptx.Buffer, Index: 2, Size: 8, Align: 8},
		{Kind: ptx.Threadgroup, Index: 0, Size: 4, Align: 4},
		{Kind: ptx.Threadgroup, Index: 1, Size: 4, Align: 4},
	}}
	p := &pipeline{k: k}
	cb := &commandBuffer{}
	e := cb.Encoder().(*encoder)
	e.SetPipeline(p)
	e.SetBytes(0, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	e.SetBuffer(1, &buffer{p: 0x1000, n: 64}, 16)
	e.SetBytes(2, []byte{9, 9, 9})
	e.SetThreadgroupMemory(0, 20) // rounds to 32
	e.SetThreadgroupMemory(1, 4)
	e.Dispatch(metal.Size{W: 3, H: 2, D: 1}, metal.Size{W: 64, H: 1, D: 1})
	e.SetBytes(2, []byte{7}) // persists: buffer 1 and the rest stay bound
	e.Dispatch(metal.Size{W: 1, H: 1, D: 1}, metal.Size{W: 32, H: 1, D: 1})
	if cb.err != nil {
		t.Fatal(cb.err)
	}
	if len(cb.launches) != 2 {
		t.Fatalf("%d launches", len(cb.launches))
	}
	l := cb.launches[0]
	if l.grid != (cuda.Dim3{X: 3, Y: 2, Z: 1}) || l.block != (cuda.Dim3{X: 64, Y: 1, Z: 1}) || l.shared != 32+16 {
		t.Errorf("launch 0: grid %v block %v shared %d", l.grid, l.block, l.shared)
	}
	args := cb.args[l.off:]
	if !bytes.Equal(args[:8], []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("by-value argument % x", args[:8])
	}
	if a := binary.LittleEndian.Uint64(args[8:]); a != 0x1010 {
		t.Errorf("buffer 1 at %#x, want 0x1010 (the buffer plus its offset)", a)
	}
	if o0, o1 := binary.LittleEndian.Uint32(args[24:]), binary.LittleEndian.Uint32(args[28:]); o0 != 0 || o1 != 32 {
		t.Errorf("threadgroup offsets %d, %d; want 0, 32", o0, o1)
	}
	if len(l.fix) != 1 || l.fix[0] != (constRef{param: 2, off: 0}) || len(cb.launches[1].fix) != 1 || cb.launches[1].fix[0].off != 16 {
		t.Errorf("constant fix-ups %v, %v", l.fix, cb.launches[1].fix)
	}
	if !bytes.Equal(cb.consts, []byte{9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}) {
		t.Errorf("constants % x", cb.consts)
	}
	if a := binary.LittleEndian.Uint64(cb.args[cb.launches[1].off+8:]); a != 0x1010 {
		t.Errorf("launch 1: buffer 1 at %#x: a binding persists", a)
	}

	for _, tc := range []struct {
		bind func(e *encoder)
		want string
	}{
		{func(e *encoder) { e.SetBytes(0, make([]byte, 8)) }, "[[buffer(1)]] is not bound"},
		{func(e *encoder) {
			e.SetBytes(0, make([]byte, 12))
			e.SetBuffer(1, &buffer{}, 0)
			e.SetBuffer(2, &buffer{}, 0)
		}, "needs 8 bytes"},
	} {
		cb := &commandBuffer{}
		e := cb.Encoder().(*encoder)
		e.SetPipeline(p)
		tc.bind(e)
		e.Dispatch(metal.Size{W: 1, H: 1, D: 1}, metal.Size{W: 32, H: 1, D: 1})
		if cb.err == nil || !strings.Contains(cb.err.Error(), tc.want) || len(cb.launches) != 0 {
			t.Errorf("error %v with %d launches, want %q", cb.err, len(cb.launches), tc.want)
		}
		cb.Commit() // launches nothing: Wait returns the encoding error
		if err := cb.Wait(); err != cb.err {
			t.Errorf("Wait: %v", err)
		}
	}
}
