package model

import "github.com/ingot-llm/ingot/kernels"

// cache is the KV cache: per layer, K and V of shape (maxSeq, Hkv·Dh), of which
// rows [0, len) are valid. Truncating is what lets a new prompt reuse a cached
// prefix (mlx-lm trim, ollama Remove).
type cache struct {
	k, v   []*kernels.Tensor
	maxSeq int
	len    int
	bytes  int64
}

func newCache(b kernels.Backend, c *Config, maxSeq int) *cache {
	kw := c.NumKVHeads * c.HeadDim
	kc := &cache{maxSeq: maxSeq, k: make([]*kernels.Tensor, c.NumLayers), v: make([]*kernels.Tensor, c.NumLayers)}
	for i := range kc.k {
		kc.k[i], kc.v[i] = b.New(maxSeq, kw), b.New(maxSeq, kw)
	}
	kc.bytes = int64(2*c.NumLayers*maxSeq*kw) * 4
	return kc
}

// put writes k and v (L, Hkv·Dh) of layer i at rows [pos, pos+L).
func (c *cache) put(b kernels.Backend, i, pos int, k, v *kernels.Tensor) {
	b.CopyRows(c.k[i], k, pos)
	b.CopyRows(c.v[i], v, pos)
	c.len = max(c.len, pos+k.NumRows())
}

// truncate forgets every row from n on.
func (c *cache) truncate(n int) { c.len = min(c.len, max(n, 0)) }
