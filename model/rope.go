package model

import (
	"fmt"
	"math"

	"github.com/ingot-llm/ingot/kernels"
)

// newRoPE builds the rotary embedding of a config for a context window of ctxLen
// tokens: inverse frequencies with the configured scaling applied, as transformers'
// ROPE_INIT_FUNCTIONS compute them (in float32). Unknown rope types are an error
// naming the type.
func newRoPE(c *Config, ctxLen int) (*kernels.RoPE, error) { return ropeOf(c, c.rope(), ctxLen) }

// newLocalRoPE builds the sliding layers' own rotary embedding (Gemma 3), or
// returns nil where they share the full layers'.
func newLocalRoPE(c *Config, ctxLen int) (*kernels.RoPE, error) {
	p, ok := c.localRope()
	if !ok {
		return nil, nil
	}
	return ropeOf(c, p, ctxLen)
}

// ropeOf builds the rotary embedding of parameters p (of config c).
func ropeOf(c *Config, p RopeParams, ctxLen int) (*kernels.RoPE, error) {
	dim := int(float64(c.HeadDim) * p.PartialRotaryFactor)
	if dim <= 0 || dim > c.HeadDim || dim%2 != 0 {
		return nil, fmt.Errorf("model: partial_rotary_factor %g gives rotary dim %d for head_dim %d", p.PartialRotaryFactor, dim, c.HeadDim)
	}
	if p.Theta <= 0 || math.IsInf(p.Theta, 0) || math.IsNaN(p.Theta) {
		return nil, fmt.Errorf("model: rope_theta (%g) must be positive", p.Theta)
	}
	r := &kernels.RoPE{HeadDim: c.HeadDim, RotaryDim: dim, InvFreq: make([]float32, dim/2), Scale: 1}
	// default: 1 / base^(2i/dim), every step in float32.
	inv := make([]float64, dim/2)
	for i := range inv {
		e := float32(2*i) / float32(dim)
		inv[i] = float64(1 / float32(math.Pow(p.Theta, float64(e))))
	}
	needFactor := func() error {
		if p.Factor <= 0 || math.IsNaN(p.Factor) || math.IsInf(p.Factor, 0) {
			return fmt.Errorf("model: rope type %q needs a positive factor, got %g", p.Type, p.Factor)
		}
		return nil
	}
	switch p.Type {
	case "default":
	case "linear":
		if err := needFactor(); err != nil {
			return nil, err
		}
		for i := range inv {
			inv[i] /= p.Factor
		}
	case "llama3":
		if err := needFactor(); err != nil {
			return nil, err
		}
		if p.OriginalMax <= 0 || p.LowFreqFactor <= 0 || p.HighFreqFactor <= p.LowFreqFactor {
			return nil, fmt.Errorf("model: llama3 rope needs original_max_position_embeddings > 0 and 0 < low_freq_factor < high_freq_factor (got %d, %g, %g)",
				p.OriginalMax, p.LowFreqFactor, p.HighFreqFactor)
		}
		old := float64(p.OriginalMax)
		lowWave, highWave := old/p.LowFreqFactor, old/p.HighFreqFactor
		for i, f := range inv {
			wave := 2 * math.Pi / f
			switch {
			case wave < highWave: // high frequency: unchanged
			case wave > lowWave: // low frequency: interpolated
				inv[i] = f / p.Factor
			default: // in between: smoothed
				s := (old/wave - p.LowFreqFactor) / (p.HighFreqFactor - p.LowFreqFactor)
				inv[i] = (1-s)*f/p.Factor + s*f
			}
		}
	case "yarn":
		if err := needFactor(); err != nil {
			return nil, err
		}
		r.Scale = float32(yarn(inv, p, float64(dim), c.MaxPositions))
	case "longrope", "su":
		scale, err := longrope(inv, p, c, ctxLen)
		if err != nil {
			return nil, err
		}
		r.Scale = float32(scale)
	default:
		return nil, fmt.Errorf("model: unsupported rope type %q (ingot supports default, linear, llama3, yarn, longrope)", p.Type)
	}
	for i, f := range inv {
		r.InvFreq[i] = float32(f)
	}
	return r, nil
}

// yarn rewrites inv (the default frequencies) in place as transformers'
// _compute_yarn_parameters does and returns the attention factor for cos/sin.
func yarn(inv []float64, p RopeParams, dim float64, maxPos int) float64 {
	orig := float64(p.OriginalMax)
	if orig == 0 {
		orig = float64(maxPos)
	}
	mscale := func(scale, m float64) float64 {
		if scale <= 1 {
			return 1
		}
		return 0.1*m*math.Log(scale) + 1
	}
	var attn float64
	switch {
	case p.AttentionFactor != nil:
		attn = *p.AttentionFactor
	case p.MScale != 0 && p.MScaleAllDim != 0:
		attn = mscale(p.Factor, p.MScale) / mscale(p.Factor, p.MScaleAllDim)
	default:
		attn = mscale(p.Factor, 1)
	}
	fast, slow := p.BetaFast, p.BetaSlow
	if fast == 0 {
		fast = 32
	}
	if slow == 0 {
		slow = 1
	}
	corr := func(rot float64) float64 {
		return dim * math.Log(orig/(rot*2*math.Pi)) / (2 * math.Log(p.Theta))
	}
	lo, hi := corr(fast), corr(slow)
	if p.Truncate == nil || *p.Truncate {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	lo, hi = max(lo, 0), min(hi, dim-1)
	if lo == hi {
		hi += 0.001
	}
	for i, f := range inv {
		ramp := min(max((float64(i)-lo)/(hi-lo), 0), 1)
		extra := 1 - ramp // weight of the unscaled (extrapolated) frequency
		inv[i] = f/p.Factor*(1-extra) + f*extra
	}
	return attn
}

// longrope divides inv (the default frequencies) by Phi-3's per-frequency factors and
// returns the cos/sin scale (transformers' _compute_longrope_parameters). transformers
// switches from short to long factors when a forward pass runs past
// original_max_position_embeddings; with a KV cache that would mix rotations, so
// ingot chooses once, by the context window, as llama.cpp does.
func longrope(inv []float64, p RopeParams, c *Config, ctxLen int) (float64, error) {
	orig := c.OriginalMaxPos
	if orig == 0 {
		orig = p.OriginalMax
	}
	factor := p.Factor
	if orig > 0 && c.MaxPositions > 0 {
		factor = float64(c.MaxPositions) / float64(orig)
	} else {
		orig = c.MaxPositions
	}
	ext := p.ShortFactor
	if ctxLen > orig {
		ext = p.LongFactor
	}
	if len(ext) != len(inv) {
		return 0, fmt.Errorf("model: longrope needs %d long_factor and short_factor entries, got %d and %d", len(inv), len(p.LongFactor), len(p.ShortFactor))
	}
	for i := range inv {
		if !(ext[i] > 0) {
			return 0, fmt.Errorf("model: longrope factor %d (%g) must be positive", i, ext[i])
		}
		inv[i] /= ext[i]
	}
	switch {
	case p.AttentionFactor != nil:
		return *p.AttentionFactor, nil
	case factor <= 1 || orig <= 1:
		return 1, nil
	}
	return math.Sqrt(1 + math.Log(factor)/math.Log(float64(orig))), nil
}
