package model

import "github.com/ingot-llm/ingot/kernels"

// cache is the KV cache: per layer, K and V of shape (maxSeq, Hkv·Dh), f32 or
// f16, of which rows [0, len) are valid. Truncating is what lets a new prompt
// reuse a cached prefix (mlx-lm trim, ollama Remove).
type cache struct {
	k, v   []*kernels.Tensor
	maxSeq int
	len    int
	bytes  int64
}

func newCache(b kernels.Backend, c *Config, maxSeq int, dt kernels.DType) *cache {
	kw := c.NumKVHeads * c.HeadDim
	kc := &cache{maxSeq: maxSeq, k: make([]*kernels.Tensor, c.NumLayers), v: make([]*kernels.Tensor, c.NumLayers)}
	for i := range kc.k {
		if dt == kernels.DTypeF16 {
			kc.k[i], kc.v[i] = b.NewF16(maxSeq, kw), b.NewF16(maxSeq, kw)
		} else {
			kc.k[i], kc.v[i] = b.New(maxSeq, kw), b.New(maxSeq, kw)
		}
	}
	kc.bytes = cacheBytes(c, maxSeq, dt)
	return kc
}

// cacheBytes is the size of the KV cache of maxSeq tokens of type dt.
func cacheBytes(c *Config, maxSeq int, dt kernels.DType) int64 {
	return int64(2*c.NumLayers*maxSeq*c.NumKVHeads*c.HeadDim) * int64(dt.Bits()/8)
}

// truncate forgets every row from n on.
func (c *cache) truncate(n int) { c.len = min(c.len, max(n, 0)) }
