//go:build linux && (amd64 || arm64)

package cuda_test

import (
	"os"
	"testing"

	"github.com/ingot-llm/ingot/cuda"
	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/shaders"
)

// interp runs the kernel checks on the MSL interpreter: the same kernels
// and bindings as on the GPU, so a reference or harness mistake shows here
// first, on any machine with clang.
type interp struct {
	d    *msl.Device
	bufs []metal.Buffer
}

func newInterp(tb testing.TB, strict bool) *interp {
	tb.Helper()
	var files []msl.File
	for _, f := range shaders.Files() {
		files = append(files, msl.File{Name: f.Name, Source: f.Source})
	}
	test, err := msl.ReadFiles(os.DirFS("testdata"), "*.metal")
	if err != nil {
		tb.Fatal(err)
	}
	return &interp{d: msltest.OpenOptions(tb, msl.Options{Strict: strict}, append(files, test...)...)}
}

func (g *interp) upload(tb testing.TB, b []byte) cuda.DevicePtr {
	tb.Helper()
	buf, err := g.d.NewBuffer(max(len(b), 16))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(buf.Release)
	copy(buf.Contents(), b)
	g.bufs = append(g.bufs, buf)
	return cuda.DevicePtr(len(g.bufs)) // a handle: index + 1
}

func (g *interp) poisoned(tb testing.TB, n int) cuda.DevicePtr {
	p := g.upload(tb, nil)
	buf, err := g.d.NewBuffer(max(n, 16))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(buf.Release)
	for i := range buf.Contents() {
		buf.Contents()[i] = 0xff
	}
	g.bufs[p-1] = buf
	return p
}

func (g *interp) read(tb testing.TB, p cuda.DevicePtr, n int) []byte {
	return append([]byte(nil), g.bufs[p-1].Contents()[:n]...)
}

func size(d cuda.Dim3) metal.Size { return metal.Size{W: max(d.X, 1), H: max(d.Y, 1), D: max(d.Z, 1)} }

func (g *interp) run(tb testing.TB, kernel string, grid, block cuda.Dim3, b bindings) {
	tb.Helper()
	p, err := g.d.Pipeline(kernel)
	if err != nil {
		tb.Fatal(err)
	}
	cb, err := g.d.CommandBuffer()
	if err != nil {
		tb.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(p)
	for i, h := range b.bufs {
		e.SetBuffer(i, g.bufs[h-1], 0)
	}
	for i, v := range b.bytes {
		e.SetBytes(i, v)
	}
	for i, n := range b.tg {
		e.SetThreadgroupMemory(i, (n+15)&^15)
	}
	e.Dispatch(size(grid), size(block))
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		tb.Fatal(err)
	}
}

// TestInterpKernels runs every kernel check on the interpreter at small
// shapes (strict, except for the collectives, which read past partial
// simdgroups on purpose and skip those lanes).
func TestInterpKernels(t *testing.T) {
	if testing.Short() {
		t.Skip("interpreter runs take a while")
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.f(t, newInterp(t, c.name != "Collectives"), false) })
	}
}
