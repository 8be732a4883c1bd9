package kernels

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/ingot-llm/ingot/metal"
)

// topkArgs mirrors struct topk_args in shaders/common.h.
type topkArgs struct {
	N, K, Pad0, Pad1 uint32
}

// tkChunk is TK_C in shaders/topk.metal: elements sorted per threadgroup.
const tkChunk = 1024

var _ TopKer = (*Metal)(nil)

// TopK selects the k = len(ids) largest elements of x on the device (see
// [TopKer]) and copies back k (value, id) pairs. topk_f32 reduces each chunk
// of 1024 logits to its best k, then topk_merge_f32 reduces chunks of 1024
// of those pairs until one list of k is left: ⌈log_{1024/k}(V/k)⌉ + 1
// dispatches (3 for V = 128k, k = 64), in one command buffer.
func (m *Metal) TopK(ids []int32, vals []float32, x *Tensor) (int, error) {
	k, err := checkTopK(ids, vals, x)
	if err != nil {
		return 0, err
	}
	n := x.Len()
	groups := (n + tkChunk - 1) / tkChunk
	a, b := m.topkBuffers(8 * groups * k)
	if a == nil {
		return 0, m.Sync(context.Background()) // the allocation error
	}
	m.begin("topk_f32")
	setArgs(m, topkArgs{N: uint32(n), K: uint32(k)})
	m.in(1, x)
	m.bind(2, a, 0, true)
	m.tgmem(0, 4*tkChunk)
	m.tgmem(1, 4*tkChunk)
	m.run(metal.Size{W: groups, H: 1, D: 1}, metal.Size{W: tkChunk / 2, H: 1, D: 1})
	for groups > 1 {
		pairs := groups * k
		groups = (pairs + tkChunk - 1) / tkChunk
		m.begin("topk_merge_f32")
		setArgs(m, topkArgs{N: uint32(pairs), K: uint32(k)})
		m.bind(1, a, 0, false)
		m.bind(2, b, 0, true)
		m.tgmem(0, 4*tkChunk)
		m.tgmem(1, 4*tkChunk)
		m.run(metal.Size{W: groups, H: 1, D: 1}, metal.Size{W: tkChunk / 2, H: 1, D: 1})
		a, b = b, a
	}
	if err := m.Sync(context.Background()); err != nil {
		return 0, err
	}
	out := min(k, n)
	if cap(m.topkHost) < 8*out {
		m.topkHost = make([]byte, 8*out)
	}
	c := m.topkHost[:8*out]
	if err := readBuf(a, 0, c); err != nil {
		return 0, err
	}
	for j := range out {
		vals[j] = math.Float32frombits(binary.LittleEndian.Uint32(c[8*j:]))
		ids[j] = int32(binary.LittleEndian.Uint32(c[8*j+4:]))
	}
	m.stats.ReadBytes += int64(8 * out)
	return out, nil
}

// topkBuffers returns the two scratch buffers of TopK's passes, grown to at
// least n bytes each, or nils after recording an allocation error.
func (m *Metal) topkBuffers(n int) (metal.Buffer, metal.Buffer) {
	for i, b := range m.topkPart {
		if b != nil && b.Len() >= n {
			continue
		}
		if b != nil {
			m.pending = append(m.pending, b) // in use until the ops before are done
		}
		nb, err := m.newBuffer(max(n, 8*MaxTopK))
		if err != nil {
			m.fail(err)
			return nil, nil
		}
		m.topkPart[i] = nb
	}
	return m.topkPart[0], m.topkPart[1]
}
