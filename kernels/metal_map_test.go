package kernels

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
)

// TestMetalMap places weights in an anonymous mapping at chosen offsets, maps
// it on a device whose buffers hold only 4 pages, and checks which uploads
// are bound in place and which are copied, and that mat-vecs read the right
// bytes either way.
func TestMetalMap(t *testing.T) {
	pg := os.Getpagesize()
	region, err := unix.Mmap(-1, 0, 16*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(region)

	// Each weight is (8, 64): 2 KB in f32, 1 KB in f16, 256 bytes of q4 codes:
	// at most half a 4 KB page, so an overlap of maxTensor rounded up to a
	// page holds any of them.
	const N, K = 8, 64
	f32w, _ := hostFloat(DTypeF32, N, K, 1)
	f16w, _ := hostFloat(DTypeF16, N, K, 2)
	q4w := hostQuant(DTypeQ4, N, K, 32, 3)
	type placed struct {
		name   string
		host   *Tensor // moved into region below; the reference uses orig
		off    int     // byte offset in region
		mapped bool    // with an overlap of maxTensor
		noOvl  bool    // with buffers that just tile the region (maxTensor too large)
	}
	at := func(w *Tensor, off int) *Tensor {
		c := *w
		c.Data = region[off : off+len(w.Data) : off+len(w.Data)]
		copy(c.Data, w.Data)
		return &c
	}
	cases := []placed{
		{"f32 at 0", f32w, 0, true, true},
		{"f32 at 2 (misaligned: copied)", f32w, 4*pg + 1024 + 2, false, false},
		{"f16 at 2 mod 4 (2-byte aligned: mapped)", f16w, 2*pg + 2, true, true},
		{"f16 at 1 (misaligned: copied)", f16w, 5*pg + 1, false, false},
		{"q4 at 6 (misaligned codes: copied)", q4w, 6*pg + 6, false, false},
		{"q4 straddling a 4-page boundary", q4w, 4*pg - 128, true, false},
		{"f32 straddling an 8-page boundary", f32w, 8*pg - 1024, true, false},
		{"f32 in the last page", f32w, 16*pg - 2048, true, true},
	}
	orig := make([]*Tensor, len(cases))
	for i := range cases {
		orig[i], cases[i].host = cases[i].host, at(cases[i].host, cases[i].off)
	}
	x := randn(K, 9)
	for _, overlap := range []bool{true, false} {
		t.Run(fmt.Sprintf("overlap=%v", overlap), func(t *testing.T) {
			dev := msltest.OpenOptions(t, msl.Options{Strict: true, Threads: 2, MaxBufferLength: 4 * pg}, ShaderFiles()...)
			m, err := NewMetal(dev)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			maxTensor := 2048
			if !overlap {
				maxTensor = 4 * pg // no room for an overlap: the buffers tile the region
			}
			unmap, err := m.Map(region, maxTensor)
			if err != nil {
				t.Fatal(err)
			}
			mp := m.maps[0]
			if want := map[bool]int{true: 5, false: 4}[overlap]; len(mp.views) != want {
				t.Errorf("%d views, want %d", len(mp.views), want)
			}
			var wantMapped, wantCopied int64
			for i, c := range cases {
				mapped := c.mapped
				if !overlap {
					mapped = c.noOvl
				}
				s0 := m.Stats()
				w, err := m.Upload(c.host)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				s := m.Stats()
				gotMapped := s.MappedBytes > s0.MappedBytes
				inPlace := &bufOf("test", w).Contents()[w.Off] == &region[c.off]
				if gotMapped != mapped || inPlace != mapped {
					t.Errorf("%s: mapped %v (bound in place %v), want %v", c.name, gotMapped, inPlace, mapped)
				}
				n := int64(len(c.host.Data))
				if mapped {
					wantMapped += n
				} else {
					wantCopied += n
				}
				if c.host.Scales != nil {
					wantCopied += int64(len(c.host.Scales.Data) + len(c.host.Biases.Data)) // heap f32: copied
				}
				want := make([]float32, N)
				cpuRef(func(cp *CPU) {
					wc, _ := cp.Upload(FromF32(dequant(orig[i]), N, K))
					cp.MatMul(FromF32(want, 1, N), FromF32(x, 1, K), wc)
				})
				y := m.New(1, N)
				m.MatMul(y, put(m, x, 1, K), w)
				t.Run(c.name, func(t *testing.T) { closeTo(t, get(t, m, y), want, matmulTol) })
			}
			if s := m.Stats(); s.MappedBytes != wantMapped || s.CopiedBytes != wantCopied {
				t.Errorf("MappedBytes %d, CopiedBytes %d; want %d, %d", s.MappedBytes, s.CopiedBytes, wantMapped, wantCopied)
			}
			if err := unmap(); err != nil {
				t.Fatal(err)
			}
			if len(m.maps) != 0 || len(m.bufs) == 0 {
				t.Errorf("after unmap: %d maps, %d buffers", len(m.maps), len(m.bufs))
			}
			for _, v := range mp.views {
				if v.buf.Contents() != nil {
					t.Errorf("view [%d, %d) not released", v.off, v.off+v.n)
				}
			}
			s0 := m.Stats()
			if _, err := m.Upload(cases[0].host); err != nil {
				t.Fatal(err)
			}
			if s := m.Stats(); s.MappedBytes != s0.MappedBytes {
				t.Error("Upload after unmap bound the region in place")
			}
			if err := unmap(); err != nil {
				t.Errorf("second unmap: %v", err)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		c := NewCPU(1)
		defer c.Close()
		if _, err := c.Upload(cases[3].host); err == nil || !strings.Contains(err.Error(), "not 2-byte aligned") {
			t.Errorf("CPU Upload of misaligned f16: %v, want an alignment error", err)
		}
		m := testMetal(t)
		if _, err := m.Map(region[8:], 0); err == nil || !strings.Contains(err.Error(), "kernels: map: region at") {
			t.Errorf("Map of a region off a page boundary: %v", err)
		}
		unmap, err := m.Map(region[:0], 0)
		if err != nil || unmap() != nil {
			t.Errorf("Map of an empty region: %v", err)
		}
		dev := msltest.OpenOptions(t, msl.Options{Strict: true, MaxBufferLength: pg / 2}, ShaderFiles()...)
		small, err := NewMetal(dev)
		if err != nil {
			t.Fatal(err)
		}
		defer small.Close()
		if _, err := small.Map(region, 0); err == nil || !strings.Contains(err.Error(), "shorter than a") {
			t.Errorf("Map with buffers under a page: %v", err)
		}
		// Close releases the views; unmap afterwards does nothing.
		m2, _ := NewMetal(msltest.Open(t, ShaderFiles()...))
		unmap, err = m2.Map(region, 0)
		if err != nil {
			t.Fatal(err)
		}
		m2.Close()
		if err := unmap(); err != nil {
			t.Errorf("unmap after Close: %v", err)
		}
	})
}
