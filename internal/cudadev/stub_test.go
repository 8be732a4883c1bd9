//go:build linux && (amd64 || arm64) && !nogpu

package cudadev_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/cuda"
	"github.com/ingot-llm/ingot/cuda/cudatest"
	"github.com/ingot-llm/ingot/cuda/ptx"
	"github.com/ingot-llm/ingot/internal/cudadev"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
)

// TestStub runs the seam against the stub driver (no GPU): buffers round
// trip through device memory; the Metal dispatch code runs an RMSNorm and
// the stub records its launch with the geometry and parameters the kernel's
// PTX entry takes (the by-value argument struct, three device addresses, a
// threadgroup offset); a missing driver is cuda.ErrUnavailable.
func TestStub(t *testing.T) {
	d, err := cudadev.Open(cudadev.Options{Library: cudatest.Stub(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	buf, err := d.NewBuffer(12)
	if err != nil {
		t.Fatal(err)
	}
	h := buf.(metal.HostCopier)
	if err := h.WriteAt([]byte{1, 2, 3, 4}, 4); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 12)
	if err := h.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if string(got) != "\x00\x00\x00\x00\x01\x02\x03\x04\x00\x00\x00\x00" || buf.Contents() != nil {
		t.Errorf("buffer holds % x", got)
	}
	if err := h.ReadAt(got, 4); err == nil {
		t.Error("a read past the end: no error")
	}
	buf.Release()

	b, err := kernels.NewMetal(d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.HasPrefix(b.Name(), "cuda:") {
		t.Errorf("backend name %q", b.Name())
	}
	const rows, n = 3, 97 // not a multiple of 4: rmsnorm_f32, not the NVIDIA-shaped rmsnorm_vec_f32
	x, dst := b.New(rows, n), b.New(rows, n)
	w, err := b.Upload(kernels.FromF32(make([]float32, n), n))
	if err != nil {
		t.Fatal(err)
	}
	cudatest.Call(t, "stub_reset")
	b.RMSNorm(dst, x, w, 1e-5)
	if err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	ls := cudatest.Launches(t)
	if len(ls) != 1 || ls[0].Name != "rmsnorm_f32" {
		t.Fatalf("launches %+v", ls)
	}
	k, _ := ptx.Lookup("rmsnorm_f32")
	if ls[0].Dims != [7]uint32{rows, 1, 1, (n + 31) &^ 31, 1, 1, 4 * 32} {
		t.Errorf("dims %v", ls[0].Dims)
	}
	p := ls[0].Params
	if len(p) != 8+3*8+4 || len(k.Params) != 5 {
		t.Fatalf("%d parameter bytes for %s", len(p), k)
	}
	if binary.LittleEndian.Uint32(p) != n || math.Float32frombits(binary.LittleEndian.Uint32(p[4:])) != 1e-5 {
		t.Errorf("arguments % x, want n=%d eps=1e-5", p[:8], n)
	}
	ptrs := map[uint64]bool{}
	for i := range 3 {
		ptrs[binary.LittleEndian.Uint64(p[8+8*i:])] = true
	}
	if len(ptrs) != 3 || ptrs[0] {
		t.Errorf("device addresses % x: want three distinct", p[8:32])
	}

	if _, err := cudadev.Open(cudadev.Options{Library: t.TempDir() + "/libcuda.so.1"}); !errors.Is(err, cuda.ErrUnavailable) {
		t.Errorf("no driver: %v", err)
	}
}

// TestStubGraphs: a command buffer of 8 or more launches runs as a CUDA
// graph; the next one of the same kernels replays it with the arguments that
// changed (a different eps, a different grid) updated in the nodes, so the
// launches the stub runs carry exactly what was encoded each time. On the
// stub's compute capability 9.0 every launch is a programmatic dependent one
// but with NoPDL.
func TestStubGraphs(t *testing.T) {
	for i, noGraphs := range []bool{false, true, false} {
		noPDL := i == 2
		d, err := cudadev.Open(cudadev.Options{Library: cudatest.Stub(t), NoGraphs: noGraphs, NoPDL: noPDL})
		if err != nil {
			t.Fatal(err)
		}
		b, err := kernels.NewMetal(d)
		if err != nil {
			t.Fatal(err)
		}
		const n = 64
		x, dst := b.New(4, n), b.New(4, n)
		w, err := b.Upload(kernels.FromF32(make([]float32, n), n))
		if err != nil {
			t.Fatal(err)
		}
		for step, rows := range []int{4, 4, 2} {
			cudatest.Call(t, "stub_reset")
			for i := range 10 {
				eps := float32(i+1) * 1e-3
				if step == 1 && i == 3 {
					eps = 0.5
				}
				b.RMSNorm(dst.Rows(0, rows), x.Rows(0, rows), w, eps)
			}
			if err := b.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			ls := cudatest.Launches(t)
			if len(ls) != 10 {
				t.Fatalf("graphs %v, step %d: %d launches", !noGraphs, step, len(ls))
			}
			for i, l := range ls {
				want := float32(i+1) * 1e-3
				if step == 1 && i == 3 {
					want = 0.5
				}
				if got := math.Float32frombits(binary.LittleEndian.Uint32(l.Params[4:])); got != want || l.Dims[0] != uint32(rows) {
					t.Errorf("graphs %v, step %d, launch %d: eps %v over %d rows, want %v over %d", !noGraphs, step, i, got, l.Dims[0], want, rows)
				}
				if l.Dependent == noPDL {
					t.Errorf("graphs %v, NoPDL %v, step %d, launch %d: dependent %v", !noGraphs, noPDL, step, i, l.Dependent)
				}
			}
		}
		b.Close()
		d.Release()
	}
}

// TestStubProfile: with a profiler every command buffer runs launch by launch
// behind the blocker, and Release reports each kernel's launches.
func TestStubProfile(t *testing.T) {
	var out strings.Builder
	d, err := cudadev.Open(cudadev.Options{Library: cudatest.Stub(t), Profile: &out, ProfileBlock: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kernels.NewMetal(d)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	x, dst := b.New(1, n), b.New(1, n)
	w, err := b.Upload(kernels.FromF32(make([]float32, n), n))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cudatest.Call(t, "stub_reset")
		for range 10 {
			b.RMSNorm(dst, x, w, 1e-5)
			b.Add(dst, dst, x)
		}
		if err := b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if ls := cudatest.Launches(t); len(ls) != 20 {
			t.Fatalf("%d launches, want 20", len(ls))
		}
	}
	b.Close()
	d.Release()
	rep := out.String()
	for _, want := range []string{"40 launches in 2 command buffers", "blocker 1 MiB", "\nrmsnorm_vec_f32 ", "\nadd_f32 "} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	for _, l := range strings.Split(rep, "\n") {
		if f := strings.Fields(l); len(f) == 5 && (f[0] == "rmsnorm_vec_f32" || f[0] == "add_f32") && f[1] != "20" {
			t.Errorf("%s: %s launches, want 20", f[0], f[1])
		}
	}
}

// TestStubGraphPieces: a one-token forward is committed in pieces of 32
// dispatches (kernels' cudaDecodeSplit), and pieces of the same kernels over
// different buffers (a decode step's layers) each keep a graph of their own:
// replaying the step instantiates nothing and updates no node, and each
// launch still reads its own piece's weights.
func TestStubGraphPieces(t *testing.T) {
	d, err := cudadev.Open(cudadev.Options{Library: cudatest.Stub(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	b, err := kernels.NewMetal(d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n, per, pieces = 64, 32, 4
	x, dst := b.New(1, n), b.New(1, n)
	var ws [pieces]*kernels.Tensor
	for i := range ws {
		if ws[i], err = b.Upload(kernels.FromF32(make([]float32, n), n)); err != nil {
			t.Fatal(err)
		}
	}
	step := func() {
		for _, w := range ws {
			for range per {
				b.RMSNorm(dst, x, w, 1e-5)
			}
		}
		if err := b.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	cudatest.Call(t, "stub_reset")
	step() // captures a graph a piece
	first := cudatest.Launches(t)
	if len(first) != pieces*per || string(first[0].Params) == string(first[per].Params) {
		t.Fatalf("%d launches, want %d, each piece over its own weights", len(first), pieces*per)
	}
	for range 2 {
		cudatest.Call(t, "stub_reset")
		before := b.Stats().CommandBuffers
		step()
		if got := b.Stats().CommandBuffers - before; got != pieces {
			t.Errorf("a step of %d dispatches committed %d command buffers, want %d", pieces*per, got, pieces)
		}
		if u, g := cudatest.Call(t, "stub_node_updates"), cudatest.Call(t, "stub_graph_instances"); u != 0 || g != 0 {
			t.Errorf("replaying the step updated %d nodes and instantiated %d graphs, want 0 and 0", u, g)
		}
		ls := cudatest.Launches(t)
		if len(ls) != len(first) {
			t.Fatalf("%d launches, want %d", len(ls), len(first))
		}
		for i, l := range ls {
			if l.Name != first[i].Name || string(l.Params) != string(first[i].Params) {
				t.Fatalf("launch %d (piece %d) ran %q %x with other arguments than it was encoded with: %q %x", i, i/per, l.Name, l.Params, first[i].Name, first[i].Params)
			}
		}
	}
}

// TestStubGraphConsts: two command buffers of the same kernels whose
// setBytes constants sit at different offsets (a longer one first in A, a
// shorter one in B) replay one graph alternately, and each launch still
// points at its own constants: a node whose arguments differ only in a
// constant's offset is updated.
func TestStubGraphConsts(t *testing.T) {
	d, err := cudadev.Open(cudadev.Options{Library: cudatest.Stub(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	p, err := d.Pipeline("rmsnorm_f32")
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.NewBuffer(256)
	if err != nil {
		t.Fatal(err)
	}
	y, err := d.NewBuffer(256)
	if err != nil {
		t.Fatal(err)
	}
	const launches = 8
	encode := func(first int) metal.CommandBuffer {
		cb, err := d.CommandBuffer()
		if err != nil {
			t.Fatal(err)
		}
		e := cb.Encoder()
		e.SetPipeline(p)
		e.SetBytes(0, make([]byte, 8))
		e.SetBuffer(2, w, 0)
		e.SetBuffer(3, y, 0)
		e.SetThreadgroupMemory(0, 128)
		for i := range launches {
			n := 16
			if i == 0 {
				n = first
			}
			e.SetBytes(1, make([]byte, n)) // x: into the constants
			e.Dispatch(metal.Size{W: 1, H: 1, D: 1}, metal.Size{W: 32, H: 1, D: 1})
		}
		e.End()
		return cb
	}
	for round, first := range []int{64, 16, 64, 16} {
		cudatest.Call(t, "stub_reset")
		cb := encode(first)
		cb.Commit()
		if err := cb.Wait(); err != nil {
			t.Fatal(err)
		}
		ls := cudatest.Launches(t)
		if len(ls) != launches {
			t.Fatalf("round %d: %d launches", round, len(ls))
		}
		x0 := binary.LittleEndian.Uint64(ls[0].Params[8:])
		for i, l := range ls[1:] {
			want := uint64((first+15)&^15 + 16*i)
			if got := binary.LittleEndian.Uint64(l.Params[8:]) - x0; got != want {
				t.Errorf("round %d (first constant %d bytes), launch %d: x at +%d from launch 0's, want +%d", round, first, i+1, got, want)
			}
		}
	}
}
