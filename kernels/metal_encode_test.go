package kernels_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/model"
)

// recorder is a device that runs nothing: its encoder keeps the argument
// table with metal.Bindings and counts the Objective-C calls exactly as
// Apple's device does (metal_darwin.go), so the host cost of encoding — calls
// and allocations per dispatch — can be measured anywhere.
type recorder struct {
	tally metal.Tally
	pipes map[string]*recPipe
	enc   *recEnc // open, if any
}

type (
	recBuf  struct{ b []byte }
	recPipe struct{ name string }
	recCB   struct {
		d   *recorder
		enc *recEnc
	}
	recEnc struct {
		d *recorder
		b metal.Bindings
	}
)

func newRecorder() *recorder { return &recorder{pipes: map[string]*recPipe{}} }

func (d *recorder) Name() string                                { return "recorder" }
func (d *recorder) NewBuffer(n int) (metal.Buffer, error)       { return &recBuf{make([]byte, n)}, nil }
func (d *recorder) BufferNoCopy(b []byte) (metal.Buffer, error) { return &recBuf{b}, nil }
func (d *recorder) MaxWorkingSet() int64                        { return 1 << 40 }
func (d *recorder) MaxBufferLength() int                        { return math.MaxInt }
func (d *recorder) Release()                                    {}

// Counts includes the calls of the open encoder, which the tally adds at End.
func (d *recorder) Counts() metal.Counts {
	c := d.tally.Counts()
	if d.enc != nil {
		c.Calls += d.enc.b.Calls
		c.Dispatches += d.enc.b.Dispatches
	}
	return c
}
func (d *recorder) CommandBufferWork() int { return metal.CommandBufferWork }
func (d *recorder) Pipeline(name string) (metal.Pipeline, error) {
	p, ok := d.pipes[name]
	if !ok {
		p = &recPipe{name}
		d.pipes[name] = p
	}
	return p, nil
}
func (d *recorder) CommandBuffer() (metal.CommandBuffer, error) {
	d.tally.CommandBuffer()
	return &recCB{d: d}, nil
}

func (b *recBuf) Contents() []byte { return b.b }
func (b *recBuf) Len() int         { return len(b.b) }
func (b *recBuf) Release()         {}

func (p *recPipe) Name() string    { return p.name }
func (p *recPipe) MaxThreads() int { return 1024 }

func (c *recCB) Encoder() metal.Encoder {
	c.d.tally.Encoder()
	c.enc = &recEnc{d: c.d}
	c.d.enc = c.enc
	return c.enc
}
func (c *recCB) Commit()                    { c.d.tally.Commit() }
func (c *recCB) Wait() error                { c.d.tally.Wait(); return nil }
func (c *recCB) GPUDuration() time.Duration { return 0 }

func (e *recEnc) SetPipeline(p metal.Pipeline)             { e.b.Pipeline(p) }
func (e *recEnc) SetBuffer(i int, b metal.Buffer, off int) { e.b.Buffer(i, b, off) }
func (e *recEnc) SetBytes(i int, v []byte)                 { e.b.Bytes(i, v) }
func (e *recEnc) SetThreadgroupMemory(i, n int)            { e.b.ThreadgroupMemory(i, n) }
func (e *recEnc) Dispatch(groups, threads metal.Size)      { e.b.Dispatch(0, 32768) }
func (e *recEnc) Barrier()                                 { e.b.Barrier() }
func (e *recEnc) End()                                     { e.d.tally.End(&e.b); e.d.enc = nil }

// TestMetalEncodeCost measures the host side of encoding on the recorder:
// the same op dispatched again in one encoder (the steady state of a loop
// over layers) makes at most 4 Objective-C calls and allocates nothing; a
// whole decode step of tinycode-llama-q4 (its command buffer, encoder,
// commit and wait included) makes at most 4 per dispatch on average (review
// #2) and allocates nothing per dispatch either.
func TestMetalEncodeCost(t *testing.T) {
	dev := newRecorder()
	b, err := kernels.NewMetal(unlimited{dev})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x, w, y := b.New(4, 256), b.New(256), b.New(4, 256)
	b.RMSNorm(y, x, w, 1e-5) // the command buffer and encoder are made here
	before := dev.Counts()
	const n = 100
	allocs := testing.AllocsPerRun(n, func() { b.RMSNorm(y, x, w, 1e-5) })
	after := dev.Counts() // the same encoder: no command-buffer calls
	if err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := after.Dispatches - before.Dispatches
	perDispatch := float64(after.Calls-before.Calls) / float64(d)
	t.Logf("the same op again: %.2f Objective-C calls and %.2f allocations per dispatch", perDispatch, allocs)
	if allocs != 0 {
		t.Errorf("%.2f allocations per dispatch, want 0", allocs)
	}
	if perDispatch > 4 {
		t.Errorf("%.2f Objective-C calls per dispatch, want ≤ 4", perDispatch)
	}

	// A decode step of a real model, on a recorder that commits as Apple's does.
	dev = newRecorder()
	mb, err := kernels.NewMetal(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	s := loadOpts(t, filepath.Join(refDir, "tinycode-llama-q4"), model.Options{Backend: mb}, model.SessionOptions{Context: 16})
	step := func() {
		s.Truncate(1)
		if _, err := s.Forward(context.Background(), []int32{2}); err != nil {
			t.Fatal(err)
		}
	}
	step()
	before = dev.Counts()
	allocs = testing.AllocsPerRun(10, step)
	after = dev.Counts()
	steps := int64(11) // AllocsPerRun runs once more to warm up
	d = (after.Dispatches - before.Dispatches) / steps
	perDispatch = float64(after.Calls-before.Calls) / float64(steps) / float64(d)
	t.Logf("a tinycode-llama-q4 decode step: %d dispatches in %d command buffers, %.2f Objective-C calls per dispatch (command buffers included), %.1f allocations per step",
		d, (after.CommandBuffers-before.CommandBuffers)/steps, perDispatch, allocs)
	if perDispatch > 4 {
		t.Errorf("a decode step: %.2f Objective-C calls per dispatch, want ≤ 4", perDispatch)
	}
	if cbs := (after.CommandBuffers - before.CommandBuffers) / steps; d > 64 && cbs < 2 {
		t.Errorf("a decode step of %d dispatches ran as %d command buffer, want one per 64 dispatches", d, cbs)
	}
	if perStep := allocs / float64(d); perStep > 0.1 {
		t.Errorf("%.1f allocations per decode step of %d dispatches, want none per dispatch (a few per command buffer)", allocs, d)
	}
}
