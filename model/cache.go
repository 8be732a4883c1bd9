package model

import "github.com/ingot-llm/ingot/kernels"

// cache is the KV cache: per layer, K and V of shape (maxSeq, Hkv·Dh), f32 or
// f16, of which rows [0, len) are valid. Truncating is what lets a new prompt
// reuse a cached prefix (mlx-lm trim, ollama Remove).
type cache struct {
	k, v   []*kernels.Tensor // nil for linear-attention layers
	maxSeq int
	len    int
	bytes  int64

	// Linear-attention layers' recurrent state (nil elsewhere): the
	// convolution's last K−1 input rows (K−1, C) and the delta rule's
	// (nv·dk, dv). It cannot be cut back to an earlier token: truncate marks
	// it stale, and before the next tokens the session restores the newest
	// checkpoint (ck) at or before the cut, or the zero state (zeroConv,
	// zeroS), and runs the kept tokens after it again. See checkpoint.go for
	// when checkpoints are taken and how many are kept.
	conv, S         []*kernels.Tensor
	zeroConv, zeroS *kernels.Tensor
	stale           bool
	ck              *checkpoints // nil without linear layers
}

func newCache(b kernels.Backend, c *Config, maxSeq int, dt kernels.DType) *cache {
	kw := c.NumKVHeads * c.HeadDim
	kc := &cache{maxSeq: maxSeq, k: make([]*kernels.Tensor, c.NumLayers), v: make([]*kernels.Tensor, c.NumLayers)}
	for i := range kc.k {
		if c.linear(i) {
			C, K := 2*c.LinearKeyHeads*c.LinearKeyDim+c.LinearValueHeads*c.LinearValueDim, c.LinearConvKernel
			if kc.conv == nil {
				kc.conv, kc.S = make([]*kernels.Tensor, c.NumLayers), make([]*kernels.Tensor, c.NumLayers)
				kc.zeroConv, kc.zeroS = b.New(max(K-1, 1), C), b.New(c.LinearValueHeads*c.LinearKeyDim, c.LinearValueDim)
			}
			kc.S[i] = b.New(c.LinearValueHeads*c.LinearKeyDim, c.LinearValueDim)
			kc.conv[i] = kc.zeroConv.Rows(0, 0) // K = 1: no rows to carry
			if K > 1 {
				kc.conv[i] = b.New(K-1, C)
			}
			continue
		}
		if dt == kernels.DTypeF16 {
			kc.k[i], kc.v[i] = b.NewF16(maxSeq, kw), b.NewF16(maxSeq, kw)
		} else {
			kc.k[i], kc.v[i] = b.New(maxSeq, kw), b.New(maxSeq, kw)
		}
	}
	if kc.conv != nil {
		kc.ck = newCheckpoints(b, c)
	}
	kc.bytes = cacheBytes(c, maxSeq, dt)
	return kc
}

// cacheBytes is the size of the KV cache of maxSeq tokens of type dt, and of
// the linear-attention layers' state and its checkpoints.
func cacheBytes(c *Config, maxSeq int, dt kernels.DType) int64 {
	n := checkpointBytes(c)
	for i := range c.NumLayers {
		if c.linear(i) {
			n += linearStateBytes(c)
			continue
		}
		n += int64(2*maxSeq*c.NumKVHeads*c.HeadDim) * int64(dt.Bits()/8)
	}
	return n
}

// truncate forgets every row from n on; a recurrent state that has seen more
// goes stale, and the checkpoints past n are dropped.
func (c *cache) truncate(n int) {
	n = max(n, 0)
	if c.conv != nil && n < c.len {
		c.stale = true
		for k := range c.ck.snaps {
			if sn := &c.ck.snaps[k]; sn.pos > n {
				sn.pos, sn.pinned, sn.periodic = -1, false, false
			}
		}
	}
	c.len = min(c.len, n)
}

// reset zeroes the recurrent state and forgets every row.
func (c *cache) reset(b kernels.Backend) {
	for i := range c.conv {
		if c.conv[i] != nil {
			if n := c.conv[i].NumRows(); n > 0 {
				b.CopyRows(c.conv[i], c.zeroConv.Rows(0, n), 0)
			}
			b.CopyRows(c.S[i], c.zeroS, 0)
		}
	}
	c.len, c.stale = 0, false
}
