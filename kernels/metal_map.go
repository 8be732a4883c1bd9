package kernels

import (
	"context"
	"fmt"
	"os"
	"slices"
	"unsafe"

	"github.com/ingot-llm/ingot/metal"
)

var _ Mapper = (*Metal)(nil)

// mapping is a host region wrapped as no-copy device buffers.
type mapping struct {
	base, end uintptr // the region's addresses [base, end)
	views     []mapView
}

// mapView is one device buffer over region bytes [off, off+n).
type mapView struct {
	off, n int
	buf    metal.Buffer
}

// Map wraps region as device buffers with [metal.Device.BufferNoCopy] (see
// [Mapper]): one buffer when it fits the device's maxBufferLength, else
// buffers of that length (in whole pages) starting every maxBufferLength −
// maxTensor bytes, so consecutive buffers overlap by the largest tensor. When
// maxTensor leaves no room for an overlap, the buffers just tile the region
// and a tensor that straddles two is copied by Upload.
func (m *Metal) Map(region []byte, maxTensor int) (func() error, error) {
	if len(region) == 0 {
		return func() error { return nil }, nil
	}
	page := os.Getpagesize()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(region)))
	limit := m.dev.MaxBufferLength() / page * page
	switch {
	case base%uintptr(page) != 0:
		return nil, fmt.Errorf("kernels: map: region at %#x is not aligned to the %d-byte page size", base, page)
	case limit <= 0:
		return nil, fmt.Errorf("kernels: map: device buffers of at most %d bytes are shorter than a %d-byte page", m.dev.MaxBufferLength(), page)
	}
	step := limit - (maxTensor+page-1)/page*page
	if step <= 0 {
		step = limit
	}
	mp := &mapping{base: base, end: base + uintptr(len(region))}
	for off := 0; ; off += step {
		n := min(limit, len(region)-off)
		b, err := m.dev.BufferNoCopy(region[off : off+n])
		if err != nil {
			for _, v := range mp.views {
				m.release(v.buf)
			}
			return nil, fmt.Errorf("kernels: map: bytes [%d, %d) of a %d-byte region: %w", off, off+n, len(region), err)
		}
		m.bufs = append(m.bufs, b)
		mp.views = append(mp.views, mapView{off: off, n: n, buf: b})
		if off+n == len(region) {
			break
		}
	}
	m.maps = append(m.maps, mp)
	return func() error { return m.unmap(mp) }, nil
}

// unmap waits for pending ops and releases mp's buffers, unless Close did.
func (m *Metal) unmap(mp *mapping) error {
	i := slices.Index(m.maps, mp)
	if i < 0 {
		return nil
	}
	err := m.Sync(context.Background())
	for _, v := range mp.views {
		m.release(v.buf)
	}
	m.maps = slices.Delete(m.maps, i, i+1)
	return err
}

// mapped returns the device buffer and offset of data when it lies inside a
// mapped region, within one of its buffers, at an offset that is a multiple
// of align (the kernels' element alignment; the buffers start on pages).
func (m *Metal) mapped(data []byte, align int) (metal.Buffer, int, bool) {
	if len(data) == 0 {
		return nil, 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	for _, mp := range m.maps {
		if p < mp.base || p+uintptr(len(data)) > mp.end {
			continue
		}
		off := int(p - mp.base)
		if off%align != 0 {
			return nil, 0, false
		}
		for _, v := range mp.views {
			if off >= v.off && off+len(data) <= v.off+v.n {
				return v.buf, off - v.off, true
			}
		}
		return nil, 0, false
	}
	return nil, 0, false
}
