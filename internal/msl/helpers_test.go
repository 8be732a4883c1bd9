package msl_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/metal"
)

// files reads testdata files by name.
func files(tb testing.TB, names ...string) []msl.File {
	tb.Helper()
	var out []msl.File
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, msl.File{Name: n, Source: string(b)})
	}
	return out
}

func open(tb testing.TB, names ...string) *msl.Device {
	tb.Helper()
	return msltest.Open(tb, files(tb, names...)...)
}

func f32Buffer(tb testing.TB, d metal.Device, xs []float32) metal.Buffer {
	tb.Helper()
	b, err := d.NewBuffer(4 * max(1, len(xs)))
	if err != nil {
		tb.Fatal(err)
	}
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], math.Float32bits(x))
	}
	tb.Cleanup(b.Release)
	return b
}

func u32Buffer(tb testing.TB, d metal.Device, xs []uint32) metal.Buffer {
	tb.Helper()
	b, err := d.NewBuffer(4 * max(1, len(xs)))
	if err != nil {
		tb.Fatal(err)
	}
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b.Contents()[4*i:], x)
	}
	tb.Cleanup(b.Release)
	return b
}

func f32s(b metal.Buffer) []float32 {
	c := b.Contents()
	out := make([]float32, len(c)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(c[4*i:]))
	}
	return out
}

func u32s(b metal.Buffer) []uint32 {
	c := b.Contents()
	out := make([]uint32, len(c)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(c[4*i:])
	}
	return out
}

func u32Bytes(xs ...uint32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// dispatch runs one kernel and returns the command buffer's error.
func dispatch(tb testing.TB, d metal.Device, name string, groups, threads metal.Size, bind func(e metal.Encoder)) error {
	tb.Helper()
	p, err := d.Pipeline(name)
	if err != nil {
		tb.Fatal(err)
	}
	cb, err := d.CommandBuffer()
	if err != nil {
		tb.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(p)
	bind(e)
	e.Dispatch(groups, threads)
	e.End()
	cb.Commit()
	return cb.Wait()
}

func size(w int) metal.Size { return metal.Size{W: w, H: 1, D: 1} }

// randn returns n deterministic pseudo-random values in [-1, 1).
func randn(n int, seed uint64) []float32 {
	out := make([]float32, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = float32(x>>40)/float32(1<<24)*2 - 1
	}
	return out
}

// openOpts opens a strict device with explicit parallelism and fiber seed.
func openOpts(tb testing.TB, threads int, seed int64, names ...string) *msl.Device {
	tb.Helper()
	return msltest.OpenOptions(tb, msl.Options{Strict: true, Threads: threads, Seed: seed}, files(tb, names...)...)
}

// openLax opens a non-strict device.
func openLax(tb testing.TB, names ...string) *msl.Device {
	tb.Helper()
	return msltest.OpenOptions(tb, msl.Options{}, files(tb, names...)...)
}
