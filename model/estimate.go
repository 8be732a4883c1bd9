package model

import (
	"os"
	"path/filepath"
)

// Estimate returns, without loading, the bytes a model directory (or GGUF file) will occupy on a
// device with options o and one session with options so: the weights (from the
// safetensors files' sizes, scaled down when o.Quant quantizes them on load) and
// the session's KV cache and activations. It is what memory admission compares
// with a device's working-set limit.
func Estimate(dir string, o Options, so SessionOptions) (weights, session int64, err error) {
	if path, ok, err := GGUFFile(dir); err != nil {
		return 0, 0, err
	} else if ok {
		return estimateGGUF(path, o, so)
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return 0, 0, err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return 0, 0, err
		}
		weights += st.Size()
	}
	if o.Quant > 0 {
		// bf16/f16 → bits+1 per weight (codes plus a bf16 scale and bias per 64)
		weights = weights * int64(o.Quant+1) / 16
	}
	if err := so.fill(cfg); err != nil {
		return 0, 0, err
	}
	return weights, cacheBytes(cfg, so.Context, so.KV) + actsBytes(cfg, min(so.Batch, so.Context)) + actsBytes(cfg, 1), nil
}
