package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/ingot-llm/ingot/kernels"
)

// llama is the Llama-family decoder: Llama 2/3, Mistral, Qwen2/3, Qwen3-MoE,
// Gemma, Gemma 2, Gemma 3, Phi-3 and gpt-oss, told apart by [arch] switches
// and config.json.
type llama struct {
	cfg    *Config
	arch   arch
	act    kernels.Act
	embed  *kernels.Tensor // model.embed_tokens.weight (V, D)
	scale  float32         // embedding multiplier: √D for Gemma, else 1
	layers []layer
	norm   *kernels.Tensor // model.norm.weight (D)
	head   *kernels.Tensor // lm_head.weight (V, D), or embed when tied
	attn   []kernels.AttnParams
	local  []bool // layer i rotates with the sliding layers' own RoPE (Gemma 3)
}

// layer holds one decoder block's weights. Comments give the HF tensor name and shape.
type layer struct {
	attnNorm       *kernels.Tensor // model.layers.{i}.input_layernorm.weight (D)
	wq, wk, wv, wo *kernels.Tensor // ….self_attn.{q,k,v,o}_proj.weight (H·Dh|Hkv·Dh, D), o: (D, H·Dh)
	bq, bk, bv, bo *kernels.Tensor // ….{q,k,v,o}_proj.bias; nil unless biased
	qNorm, kNorm   *kernels.Tensor // ….self_attn.{q,k}_norm.weight (Dh); Qwen3, Gemma 3
	postAttnNorm   *kernels.Tensor // ….post_attention_layernorm.weight (D); Gemma 2, 3
	mlpNorm        *kernels.Tensor // ….post_attention_layernorm (pre_feedforward_layernorm for Gemma 2, 3) (D)
	postMLPNorm    *kernels.Tensor // ….post_feedforward_layernorm.weight (D); Gemma 2, 3
	gate, up, down *kernels.Tensor // ….mlp.{gate,up,down}_proj.weight (F, D), (F, D), (D, F)
	bg, bu, bd     *kernels.Tensor // ….mlp.{gate,up,down}_proj.bias; nil unless mlp_bias

	qkv, gu   []*kernels.Tensor // {wq, wk, wv} and {gate, up}, for one MatMuls each
	qkvB, guB []*kernels.Tensor // their biases

	wg  *kernels.Tensor // the gate rows of Qwen3.5's q_proj (H·Dh, D): attention × σ(x·wgᵀ)
	lin *linearAttn     // ….linear_attn: a Gated DeltaNet layer in place of attention (Qwen3.5)

	router  *kernels.Tensor // ….mlp.gate.weight (E, D), with ….mlp.shared_expert_gate.weight (1, D) as row E when there is a shared expert; nil unless a mixture-of-experts layer
	shared  *expert         // ….mlp.shared_expert: every token's, weighted by σ(its gate row) (Qwen3.5-MoE)
	routerB *kernels.Tensor // ….mlp.router.bias (E); gpt-oss
	experts []expert        // ….mlp.experts.{j}: in place of gate, up, down
}

// linearAttn is a Gated DeltaNet layer (Qwen3.5): C = 2·nk·dk + nv·dv.
type linearAttn struct {
	in   []*kernels.Tensor // ….in_proj_{qkv,z,b,a}.weight (C|nv·dv|nv|nv, D), one MatMuls
	conv *kernels.Tensor   // ….conv1d.weight [C, 1, K] as (C, K), f32
	norm *kernels.Tensor   // ….norm.weight (dv), applied as w
	out  *kernels.Tensor   // ….out_proj.weight (D, nv·dv)
	p    kernels.DeltaParams
}

// expert is one expert's SwiGLU MLP of a mixture-of-experts layer.
type expert struct {
	gu   []*kernels.Tensor // ….mlp.experts.{j}.{gate,up}_proj.weight (Fe, D)
	down *kernels.Tensor   // ….mlp.experts.{j}.down_proj.weight (D, Fe)
	guB  []*kernels.Tensor // gate and up biases (Fe); nil unless gpt-oss
	bd   *kernels.Tensor   // down bias (D); nil unless gpt-oss
}

// newLlama loads every weight through l, checking shapes against the config.
func newLlama(c *Config, a arch, l *loader) (*llama, error) {
	act := c.Activation()
	if c.HiddenAct == "" && c.HiddenActivation == "" {
		act = a.defaultAct
	}
	if a.gemma && c.HiddenActivation == "" && act == "gelu" {
		act = "gelu_pytorch_tanh" // transformers' Gemma uses the tanh approximation for legacy "gelu"
	}
	kact, err := kernels.ParseAct(act)
	if err != nil {
		return nil, fmt.Errorf("model: config.json: hidden_act: %w", err)
	}
	if a.gptOss {
		kact = kernels.ActSwiGLUClamp // its experts' own, whatever hidden_act says
	}
	// A session builds its own rotary embedding (longrope chooses its factors
	// by the session's context window); a bad rope config fails here, at load.
	if _, err := newRoPE(c, c.DefaultContext()); err != nil {
		return nil, err
	}
	local, err := newLocalRoPE(c, c.DefaultContext())
	if err != nil {
		return nil, err
	}
	m := &llama{cfg: c, arch: a, act: kact, scale: 1}
	if a.gemma {
		m.scale = float32(math.Sqrt(float64(c.HiddenSize)))
	}
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	H, Hkv, Dh := c.NumHeads, c.NumKVHeads, c.HeadDim
	if m.embed, err = l.matrix("model.embed_tokens", V, D); err != nil {
		return nil, err
	}
	norm := func(name string, n int) (*kernels.Tensor, error) { return l.vector(name, n, a.gemma || a.qwen35) }
	bias := func(module string, n int) (*kernels.Tensor, error) { return l.vector(module+".bias", n, false) }

	m.layers = make([]layer, c.NumLayers)
	for i := range m.layers {
		ly, p := &m.layers[i], fmt.Sprintf("model.layers.%d.", i)
		load := func(dst **kernels.Tensor, module string, rows, cols int) {
			if err == nil {
				*dst, err = l.matrix(p+module, rows, cols)
			}
		}
		vec := func(dst **kernels.Tensor, f func(string, int) (*kernels.Tensor, error), name string, n int) {
			if err == nil {
				*dst, err = f(p+name, n)
			}
		}
		vec(&ly.attnNorm, norm, "input_layernorm.weight", D)
		sparse := c.sparse(i)
		switch { // the mixer
		case c.linear(i):
			err = m.loadLinearAttn(ly, l, p)
		case a.qwen35:
			err = m.loadGatedQ(ly, l, p)
			load(&ly.wk, "self_attn.k_proj", Hkv*Dh, D)
			load(&ly.wv, "self_attn.v_proj", Hkv*Dh, D)
		case a.fusedPhi3:
			err = m.loadPhi3(ly, l, p) // and gate/up
		default:
			load(&ly.wq, "self_attn.q_proj", H*Dh, D)
			load(&ly.wk, "self_attn.k_proj", Hkv*Dh, D)
			load(&ly.wv, "self_attn.v_proj", Hkv*Dh, D)
		}
		switch { // the MLP
		case sparse && a.gptOss:
			load(&ly.router, "mlp.router", c.NumExperts, D)
			vec(&ly.routerB, bias, "mlp.router", c.NumExperts)
			if err == nil {
				err = m.loadGptOssExperts(ly, l, p)
			}
		case sparse:
			if err == nil {
				err = m.loadRouter(ly, l, p)
			}
			if err == nil {
				err = m.loadExperts(ly, l, p)
			}
		case a.fusedPhi3:
		default:
			load(&ly.gate, "mlp.gate_proj", F, D)
			load(&ly.up, "mlp.up_proj", F, D)
		}
		if !c.linear(i) {
			load(&ly.wo, "self_attn.o_proj", D, H*Dh)
		}
		if !sparse {
			load(&ly.down, "mlp.down_proj", D, F)
		}
		if a.qkvBias || c.AttentionBias {
			vec(&ly.bq, bias, "self_attn.q_proj", H*Dh)
			vec(&ly.bk, bias, "self_attn.k_proj", Hkv*Dh)
			vec(&ly.bv, bias, "self_attn.v_proj", Hkv*Dh)
		}
		if c.AttentionBias && !a.qkvBias {
			vec(&ly.bo, bias, "self_attn.o_proj", D)
		}
		if c.MLPBias {
			vec(&ly.bg, bias, "mlp.gate_proj", F)
			vec(&ly.bu, bias, "mlp.up_proj", F)
			vec(&ly.bd, bias, "mlp.down_proj", D)
		}
		if a.qkNorm && !c.linear(i) {
			vec(&ly.qNorm, norm, "self_attn.q_norm.weight", Dh)
			vec(&ly.kNorm, norm, "self_attn.k_norm.weight", Dh)
		}
		if a.sandwich {
			vec(&ly.postAttnNorm, norm, "post_attention_layernorm.weight", D)
			vec(&ly.mlpNorm, norm, "pre_feedforward_layernorm.weight", D)
			vec(&ly.postMLPNorm, norm, "post_feedforward_layernorm.weight", D)
		} else {
			vec(&ly.mlpNorm, norm, "post_attention_layernorm.weight", D)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (layer %d)", err, i)
		}
		ly.qkv, ly.qkvB = []*kernels.Tensor{ly.wq, ly.wk, ly.wv}, []*kernels.Tensor{ly.bq, ly.bk, ly.bv}
		if ly.wg != nil {
			ly.qkv = append(ly.qkv, ly.wg) // q, k, v and the gate in one MatMuls
		}
		ly.gu, ly.guB = []*kernels.Tensor{ly.gate, ly.up}, []*kernels.Tensor{ly.bg, ly.bu}
	}
	if m.norm, err = norm("model.norm.weight", D); err != nil {
		return nil, err
	}
	tied := !l.has("lm_head.weight") || (c.TieEmbeddings != nil && *c.TieEmbeddings)
	if tied {
		m.head = m.embed
	} else if m.head, err = l.matrix("lm_head", V, D); err != nil {
		return nil, err
	}

	scale := float32(1 / math.Sqrt(float64(Dh)))
	if c.QueryPreAttnScalar > 0 {
		scale = float32(1 / math.Sqrt(c.QueryPreAttnScalar))
	}
	m.attn = make([]kernels.AttnParams, c.NumLayers)
	m.local = make([]bool, c.NumLayers)
	for i := range m.attn {
		m.attn[i] = kernels.AttnParams{Heads: H, KVHeads: Hkv, HeadDim: Dh, Scale: scale,
			Window: c.windowOf(i), Softcap: float32(c.AttnSoftcap)}
		if a.gptOss {
			if m.attn[i].Sinks, err = l.hostVector(fmt.Sprintf("model.layers.%d.self_attn.sinks", i), H); err != nil {
				return nil, err
			}
		}
		m.local[i] = local != nil && len(c.LayerTypes) > 0 && c.LayerTypes[i] == "sliding_attention"
	}
	return m, nil
}

// loadRouter loads a mixture-of-experts layer's router mlp.gate (E, D) and,
// with a shared expert, its gate mlp.shared_expert_gate (1, D) as one more
// row (one MatMul and one download give both), and the shared expert.
func (m *llama) loadRouter(ly *layer, l *loader, p string) error {
	c := m.cfg
	E, D, Fs := c.NumExperts, c.HiddenSize, c.SharedExpertIntermediate
	r, err := l.hostMatrix(p+"mlp.gate", E, D)
	if err != nil {
		return err
	}
	if Fs == 0 {
		ly.router, err = l.upload(p+"mlp.gate.weight", r)
		return err
	}
	g, err := l.hostMatrix(p+"mlp.shared_expert_gate", 1, D)
	if err != nil {
		return err
	}
	if g.DType != r.DType || g.GroupSize != r.GroupSize {
		return fmt.Errorf("model: tensor %q is %s, %q %s: want them alike", l.full(p+"mlp.gate.weight"), r.DType, l.full(p+"mlp.shared_expert_gate.weight"), g.DType)
	}
	if ly.router, err = l.upload(p+"mlp.gate.weight", concatRows(r, g)); err != nil {
		return err
	}
	sh := &expert{gu: make([]*kernels.Tensor, 2)}
	q := p + "mlp.shared_expert."
	for _, w := range []struct {
		dst        **kernels.Tensor
		name       string
		rows, cols int
	}{{&sh.gu[0], "gate_proj", Fs, D}, {&sh.gu[1], "up_proj", Fs, D}, {&sh.down, "down_proj", D, Fs}} {
		if *w.dst, err = l.matrix(q+w.name, w.rows, w.cols); err != nil {
			return err
		}
	}
	ly.shared = sh
	return nil
}

// concatRows returns the host matrix of a's rows then b's (alike in dtype,
// columns and group; scales and biases in any one float dtype, else widened).
func concatRows(a, b *kernels.Tensor) *kernels.Tensor {
	n := a.Shape[0] + b.Shape[0]
	out := &kernels.Tensor{DType: a.DType, Shape: []int{n, a.Cols()}, GroupSize: a.GroupSize, Data: append(append([]byte(nil), a.Data...), b.Data...)}
	if a.Scales != nil {
		if a.Scales.DType != b.Scales.DType {
			a, b = kernels.WidenAffine(a), kernels.WidenAffine(b)
		}
		out.Scales, out.Biases = concatRows(a.Scales, b.Scales), concatRows(a.Biases, b.Biases)
	}
	return out
}

// loadExperts loads a mixture-of-experts layer's experts: Hugging Face's
// mlp.experts.{j}.{gate,up,down}_proj, or mlx-lm's stacked
// mlp.switch_mlp.{gate,up,down}_proj [E, Fe, D] / [E, D, Fe] (f32/f16/bf16 or
// MLX affine), split into per-expert row views (no copy).
func (m *llama) loadExperts(ly *layer, l *loader, p string) error {
	c := m.cfg
	E, Fe, D := c.NumExperts, c.MoEIntermediate, c.HiddenSize
	ly.experts = make([]expert, E)
	for j := range ly.experts {
		ly.experts[j].gu = make([]*kernels.Tensor, 2)
	}
	if !l.has(p + "mlp.switch_mlp.gate_proj.weight") {
		for j := range ly.experts {
			e, q := &ly.experts[j], fmt.Sprintf("%smlp.experts.%d.", p, j)
			var err error
			for _, w := range []struct {
				dst        **kernels.Tensor
				name       string
				rows, cols int
			}{{&e.gu[0], "gate_proj", Fe, D}, {&e.gu[1], "up_proj", Fe, D}, {&e.down, "down_proj", D, Fe}} {
				if *w.dst, err = l.matrix(q+w.name, w.rows, w.cols); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, w := range []struct {
		name       string
		rows, cols int
		dst        func(e *expert) **kernels.Tensor
	}{
		{"gate_proj", Fe, D, func(e *expert) **kernels.Tensor { return &e.gu[0] }},
		{"up_proj", Fe, D, func(e *expert) **kernels.Tensor { return &e.gu[1] }},
		{"down_proj", D, Fe, func(e *expert) **kernels.Tensor { return &e.down }},
	} {
		module := p + "mlp.switch_mlp." + w.name
		all, err := l.hostMatrix(module, E*w.rows, w.cols)
		if err != nil {
			return err
		}
		for j := range ly.experts {
			if *w.dst(&ly.experts[j]), err = l.upload(module+".weight", all.Rows(j*w.rows, (j+1)*w.rows)); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadGptOssExperts loads gpt-oss's experts: mlp.experts.gate_up_proj
// [E, D, 2Fe] input-major, gate and up interleaved (columns 2f and 2f+1),
// gate_up_proj_bias [E, 2Fe], down_proj [E, Fe, D] input-major,
// down_proj_bias [E, D] (float dtypes), transposed to ingot's (out, in)
// rows at load; or the published MXFP4 form and MLX's (see loadGptOssPacked).
func (m *llama) loadGptOssExperts(ly *layer, l *loader, p string) error {
	if gptOssPacked(l, p) {
		return m.loadGptOssPacked(ly, l, p)
	}
	c := m.cfg
	E, Fe, D := c.NumExperts, c.MoEIntermediate, c.HiddenSize
	host := func(name string, shape ...int) ([]float32, error) {
		st, ok := l.get(p + name)
		if !ok {
			return nil, fmt.Errorf("model: missing tensor %q", l.full(p+name))
		}
		if !slices.Equal(st.Shape, shape) {
			return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies %v", st.Name, st.Shape, shape)
		}
		return toF32(st)
	}
	gu, err := host("mlp.experts.gate_up_proj", E, D, 2*Fe)
	if err != nil {
		return err
	}
	gub, err := host("mlp.experts.gate_up_proj_bias", E, 2*Fe)
	if err != nil {
		return err
	}
	dn, err := host("mlp.experts.down_proj", E, Fe, D)
	if err != nil {
		return err
	}
	dnb, err := host("mlp.experts.down_proj_bias", E, D)
	if err != nil {
		return err
	}
	ly.experts = make([]expert, E)
	for e := range E {
		ex := &ly.experts[e]
		gate, up, down := make([]float32, Fe*D), make([]float32, Fe*D), make([]float32, D*Fe)
		bg, bu := make([]float32, Fe), make([]float32, Fe)
		for f := range Fe {
			for d := range D {
				gate[f*D+d] = gu[(e*D+d)*2*Fe+2*f]
				up[f*D+d] = gu[(e*D+d)*2*Fe+2*f+1]
				down[d*Fe+f] = dn[(e*Fe+f)*D+d]
			}
			bg[f], bu[f] = gub[e*2*Fe+2*f], gub[e*2*Fe+2*f+1]
		}
		ex.gu, ex.guB = make([]*kernels.Tensor, 2), make([]*kernels.Tensor, 2)
		name := fmt.Sprintf("%smlp.experts.%d", p, e)
		for _, t := range []struct {
			dst  **kernels.Tensor
			host *kernels.Tensor
		}{
			{&ex.gu[0], kernels.FromF32(gate, Fe, D)}, {&ex.gu[1], kernels.FromF32(up, Fe, D)}, {&ex.down, kernels.FromF32(down, D, Fe)},
			{&ex.guB[0], kernels.FromF32(bg, Fe)}, {&ex.guB[1], kernels.FromF32(bu, Fe)}, {&ex.bd, kernels.FromF32(slices.Clone(dnb[e*D:(e+1)*D]), D)},
		} {
			if *t.dst, err = l.upload(name, t.host); err != nil {
				return err
			}
		}
	}
	return nil
}

// linearC returns the channels of a linear-attention layer's convolution,
// 2·nk·dk + nv·dv, or 0 for a config without such layers.
func linearC(c *Config) int {
	for i := range c.NumLayers {
		if c.linear(i) {
			return 2*c.LinearKeyHeads*c.LinearKeyDim + c.LinearValueHeads*c.LinearValueDim
		}
	}
	return 0
}

// loadGatedQ splits Qwen3.5's q_proj (2·H·Dh, D), each head's query rows then
// its gate rows, into wq and wg (H·Dh, D) each.
func (m *llama) loadGatedQ(ly *layer, l *loader, p string) error {
	c := m.cfg
	H, Dh := c.NumHeads, c.HeadDim
	t, err := l.hostMatrix(p+"self_attn.q_proj", 2*H*Dh, c.HiddenSize)
	if err != nil {
		return err
	}
	q, g := make([][2]int, H), make([][2]int, H)
	for h := range H {
		q[h], g[h] = [2]int{2 * h * Dh, 2*h*Dh + Dh}, [2]int{2*h*Dh + Dh, 2 * (h + 1) * Dh}
	}
	if ly.wq, err = l.upload(p+"self_attn.q_proj.weight", gatherRows(t, q)); err != nil {
		return err
	}
	ly.wg, err = l.upload(p+"self_attn.q_proj.weight", gatherRows(t, g))
	return err
}

// gatherRows returns a host matrix of t's row ranges, in order (codes and
// their scales and biases alike).
func gatherRows(t *kernels.Tensor, ranges [][2]int) *kernels.Tensor {
	rb := t.DType.RowBytes(t.Cols())
	n := 0
	for _, r := range ranges {
		n += r[1] - r[0]
	}
	out := &kernels.Tensor{DType: t.DType, Shape: []int{n, t.Cols()}, GroupSize: t.GroupSize, Data: make([]byte, 0, n*rb)}
	for _, r := range ranges {
		out.Data = append(out.Data, t.Data[r[0]*rb:r[1]*rb]...)
	}
	if t.Scales != nil {
		out.Scales, out.Biases = gatherRows(t.Scales, ranges), gatherRows(t.Biases, ranges)
	}
	return out
}

// loadLinearAttn loads a Gated DeltaNet layer's weights (Qwen3.5).
func (m *llama) loadLinearAttn(ly *layer, l *loader, p string) error {
	c := m.cfg
	nk, dk, nv, dv, K, D := c.LinearKeyHeads, c.LinearKeyDim, c.LinearValueHeads, c.LinearValueDim, c.LinearConvKernel, c.HiddenSize
	C := 2*nk*dk + nv*dv
	la := &linearAttn{in: make([]*kernels.Tensor, 4), p: kernels.DeltaParams{KeyHeads: nk, KeyDim: dk, ValueHeads: nv, ValueDim: dv}}
	q := p + "linear_attn."
	var err error
	for i, w := range []struct {
		name string
		rows int
	}{{"in_proj_qkv", C}, {"in_proj_z", nv * dv}, {"in_proj_b", nv}, {"in_proj_a", nv}} {
		if la.in[i], err = l.matrix(q+w.name, w.rows, D); err != nil {
			return err
		}
	}
	if la.out, err = l.matrix(q+"out_proj", D, nv*dv); err != nil {
		return err
	}
	if la.norm, err = l.vector(q+"norm.weight", dv, false); err != nil {
		return err
	}
	if la.p.ALog, err = l.hostVector(q+"A_log", nv); err != nil {
		return err
	}
	if la.p.DTBias, err = l.hostVector(q+"dt_bias", nv); err != nil {
		return err
	}
	var conv []float32 // [C, 1, K] as (C, K), widened to f32
	if l.synth != nil {
		conv = l.synth.vector(q+"conv1d.weight", C*K)
	} else if st, ok := l.get(q + "conv1d.weight"); !ok {
		return fmt.Errorf("model: missing tensor %q", l.full(q+"conv1d.weight"))
	} else if !isMatrix(st.Shape, C, K) {
		return fmt.Errorf("model: tensor %q has shape %v, config.json implies [%d 1 %d]", st.Name, st.Shape, C, K)
	} else if conv, err = toF32(st); err != nil {
		return err
	}
	if la.conv, err = l.upload(q+"conv1d.weight", kernels.FromF32(conv, C, K)); err != nil {
		return err
	}
	ly.lin = la
	return nil
}

// loadPhi3 splits Phi-3's fused projections into row views (no copy):
// qkv_proj (H·Dh + 2·Hkv·Dh, D) and gate_up_proj (2F, D), gate first.
func (m *llama) loadPhi3(ly *layer, l *loader, p string) error {
	c := m.cfg
	D, F := c.HiddenSize, c.IntermediateSize
	q, kv := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	qkv, err := l.hostMatrix(p+"self_attn.qkv_proj", q+2*kv, D)
	if err != nil {
		return err
	}
	gu, err := l.hostMatrix(p+"mlp.gate_up_proj", 2*F, D)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		dst    **kernels.Tensor
		t      *kernels.Tensor
		r0, r1 int
		name   string
	}{
		{&ly.wq, qkv, 0, q, "self_attn.qkv_proj"}, {&ly.wk, qkv, q, q + kv, "self_attn.qkv_proj"}, {&ly.wv, qkv, q + kv, q + 2*kv, "self_attn.qkv_proj"},
		{&ly.gate, gu, 0, F, "mlp.gate_up_proj"}, {&ly.up, gu, F, 2 * F, "mlp.gate_up_proj"},
	} {
		if *s.dst, err = l.upload(p+s.name+".weight", s.t.Rows(s.r0, s.r1)); err != nil {
			return err
		}
	}
	return nil
}

// acts holds every activation of one forward call of up to cap(L) tokens, so a
// step allocates nothing (llama2.c's RunState). Views for a shorter L are cut once.
type acts struct {
	L         int
	x, h      *kernels.Tensor   // (L, D) residual stream, normed / block output
	q, att    *kernels.Tensor   // (L, H·Dh)
	k, v      *kernels.Tensor   // (L, Hkv·Dh)
	qh, kh    *kernels.Tensor   // q, k viewed as (L·H, Dh), (L·Hkv, Dh) for the Qwen3 per-head norm
	g, u      *kernels.Tensor   // (L, F)
	qkv, gu   []*kernels.Tensor // {q, k, v} and {g, u}: the outputs of one MatMuls each
	last      *kernels.Tensor   // (1, D) final norm of the last token
	lastX     *kernels.Tensor   // (1, D) view of x's last row
	logits    *kernels.Tensor   // (1, V)
	hostLogit []float32         // (V) logits on the host
	rope      *kernels.RoPE     // the session's rotary embedding
	ropeLocal *kernels.RoPE     // the sliding layers' own, or nil (Gemma 3)

	gate *kernels.Tensor   // (L, H·Dh) Qwen3.5's attention gate, or nil
	qkvg []*kernels.Tensor // {q, k, v, gate}
	// Qwen3.5's linear attention, nil without: its input projections
	// {lqkv (L, C), lz (L, nv·dv), lb, la (L, nv)}, the convolution's
	// output lc (L, C) and the delta rule's lo (L, nv·dv).
	lin                      []*kernels.Tensor
	lqkv, lz, lb, la, lc, lo *kernels.Tensor

	// Mixture of experts, nil without: router logits (L, E) on the device and
	// the host, an expert's gathered tokens (L, D), its g, u (L, Fe) and
	// output (L, D), the layer's output (L, D) and zeros to clear it with.
	rl, xe, ge, ue, oe, mo, zero *kernels.Tensor
	sg, su                       *kernels.Tensor // the shared expert's g, u (L, Fs), or nil
	hostRL, probs                []float32
	route                        []routed          // per token: its experts and weights
	byExpert                     [][]int           // per expert: the rows routed to it
	egu                          []*kernels.Tensor // {g, u} of the expert running

	lora *loraActs // the session's LoRA adapter and its scratch; nil: none
	taps *tapState // the residual stream and final norm to copy out; nil: none
}

// routed is one token's k experts and their weights.
type routed struct {
	ids []int
	w   []float32
}

func newActs(b kernels.Backend, c *Config, L int, rope, ropeLocal *kernels.RoPE) *acts {
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	qw, kw := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	s := &acts{L: L,
		x: b.New(L, D), h: b.New(L, D), q: b.New(L, qw), att: b.New(L, qw),
		k: b.New(L, kw), v: b.New(L, kw), g: b.New(L, F), u: b.New(L, F),
		last: b.New(1, D), logits: b.New(1, V), hostLogit: make([]float32, V), rope: rope, ropeLocal: ropeLocal,
	}
	if architectures[c.Arch()].qwen35 {
		s.gate = b.New(L, qw)
	}
	if linearC(c) > 0 {
		C, nv, dv := linearC(c), c.LinearValueHeads, c.LinearValueDim
		s.lqkv, s.lz, s.lb, s.la, s.lc, s.lo = b.New(L, C), b.New(L, nv*dv), b.New(L, nv), b.New(L, nv), b.New(L, C), b.New(L, nv*dv)
	}
	if E, Fe := c.NumExperts, c.MoEIntermediate; E > 0 {
		W := E
		if Fs := c.SharedExpertIntermediate; Fs > 0 {
			W++ // the shared expert's gate
			s.sg, s.su = b.New(L, Fs), b.New(L, Fs)
		}
		s.rl, s.xe, s.ge, s.ue, s.oe, s.mo, s.zero = b.New(L, W), b.New(L, D), b.New(L, Fe), b.New(L, Fe), b.New(L, D), b.New(L, D), b.New(L, D)
		s.hostRL, s.probs, s.egu = make([]float32, L*W), make([]float32, E), make([]*kernels.Tensor, 2)
		s.route = make([]routed, L)
		for i := range s.route {
			s.route[i] = routed{ids: make([]int, c.ExpertsPerToken), w: make([]float32, c.ExpertsPerToken)}
		}
		s.byExpert = make([][]int, E)
	}
	s.cut()
	return s
}

// actsBytes is the device memory of newActs(…, L, …): its f32 tensors.
func actsBytes(c *Config, L int) int64 {
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	qw, kw := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	n := int64(L*(2*D+2*qw+2*kw+2*F) + D + V)
	if architectures[c.Arch()].qwen35 {
		n += int64(L * qw)
	}
	if C := linearC(c); C > 0 {
		n += int64(L * (2*C + 2*c.LinearValueHeads*c.LinearValueDim + 2*c.LinearValueHeads))
	}
	if E, Fe := c.NumExperts, c.MoEIntermediate; E > 0 {
		n += int64(L * (E + 5*D + 2*Fe + 1 + 2*c.SharedExpertIntermediate))
	}
	return 4 * n
}

// rows returns a view of s for the first L rows (L ≤ s.L).
func (s *acts) rows(L int) *acts {
	if L == s.L {
		return s
	}
	v := *s
	v.L = L
	for _, t := range []**kernels.Tensor{&v.x, &v.h, &v.q, &v.att, &v.k, &v.v, &v.g, &v.u} {
		*t = (*t).Rows(0, L)
	}
	if v.rl != nil {
		for _, t := range []**kernels.Tensor{&v.rl, &v.xe, &v.ge, &v.ue, &v.oe, &v.mo, &v.zero} {
			*t = (*t).Rows(0, L)
		}
		if v.sg != nil {
			v.sg, v.su = v.sg.Rows(0, L), v.su.Rows(0, L)
		}
	}
	if v.gate != nil {
		v.gate = v.gate.Rows(0, L)
	}
	if v.lora != nil {
		v.lora = v.lora.rows(L)
	}
	if v.lqkv != nil {
		for _, t := range []**kernels.Tensor{&v.lqkv, &v.lz, &v.lb, &v.la, &v.lc, &v.lo} {
			*t = (*t).Rows(0, L)
		}
	}
	v.cut()
	return &v
}

// cut makes the reshaped and last-row views.
func (s *acts) cut() {
	s.lastX = s.x.Rows(s.L-1, s.L)
	s.qh, s.kh = reshape(s.q), reshape(s.k)
	s.qkv, s.gu = []*kernels.Tensor{s.q, s.k, s.v}, []*kernels.Tensor{s.g, s.u}
	if s.gate != nil {
		s.qkvg = []*kernels.Tensor{s.q, s.k, s.v, s.gate}
	}
	if s.lqkv != nil {
		s.lin = []*kernels.Tensor{s.lqkv, s.lz, s.lb, s.la}
	}
}

// reshape views an (L, n·Dh) activation as a flat (L·n·Dh) row set; RMSNorm with a
// (Dh) weight then normalizes each head.
func reshape(t *kernels.Tensor) *kernels.Tensor {
	v := *t
	v.Shape = []int{t.Len()}
	return &v
}

// forward runs tokens at positions [pos, pos+L) through the decoder, writes K and V
// into the cache, and leaves the last token's logits in s.logits.
func (m *llama) forward(b kernels.Backend, s *acts, c *cache, tokens []int32, pos int) {
	b.Embed(s.x, m.embed, tokens, m.scale) // (L, D)
	m.decoder(b, s, c, pos)
}

// forwardArgmax is forward of one token at pos (s is the 1-row state): the
// token p's latest ArgmaxAsync left on the device.
func (m *llama) forwardArgmax(p kernels.Pipeliner, b kernels.Backend, s *acts, c *cache, pos int) {
	p.EmbedArgmax(s.x, m.embed, m.scale) // (1, D)
	m.decoder(b, s, c, pos)
}

// decoder runs the embedded tokens in s.x at positions [pos, pos+L) through the
// blocks and the head. Each residual add goes with the norm after it (the next
// block's or the final one) into one AddRMSNorm, and the rotation of q and k
// with the cache write into one RoPEStore: a decode step's small ops are
// launches on a GPU, each costing more than its work.
func (m *llama) decoder(b kernels.Backend, s *acts, c *cache, pos int) {
	cfg := m.cfg
	eps := cfg.RMSNormEps
	L := s.x.NumRows()
	if s.taps != nil {
		s.taps.take(b, 0, s.x) // the embedding
	}
	b.RMSNorm(s.h, s.x, m.layers[0].attnNorm, eps) // (L, D); later blocks' come with the residual add
	c.len = max(c.len, pos+L)
	for i := range m.layers {
		l := &m.layers[i]
		if l.lin != nil {
			m.linearAttn(b, s, c, l, i) // (L, D) → (L, D)
		} else {
			qkv := s.qkv
			if l.wg != nil {
				qkv = s.qkvg // and the gate (L, H·Dh)
			}
			linears(b, qkv, s.h, l.qkv, l.qkvB) // q (L, H·Dh), k and v (L, Hkv·Dh)
			if s.lora != nil {
				s.lora.apply(b, i, slotQ, s.q, s.h, true)
				s.lora.apply(b, i, slotK, s.k, s.h, false)
				s.lora.apply(b, i, slotV, s.v, s.h, false)
				if l.wg != nil {
					s.lora.apply(b, i, slotAttnGate, s.gate, s.h, false)
				}
			}
			if l.qNorm != nil {
				b.RMSNorm(s.qh, s.qh, l.qNorm, eps) // per head (Dh)
				b.RMSNorm(s.kh, s.kh, l.kNorm, eps)
			}
			rope := s.rope
			if m.local[i] {
				rope = s.ropeLocal
			}
			b.RoPEStore(s.q, s.k, s.v, c.k[i], c.v[i], pos, rope)
			b.Attention(s.att, s.q, c.k[i], c.v[i], pos, &m.attn[i]) // (L, H·Dh)
			if l.wg != nil {
				b.GLU(s.att, s.gate, s.att, kernels.ActSigmoid) // σ(gate)·attention
			}
			linear(b, s.h, s.att, l.wo, l.bo) // (L, D)
			s.lora.apply(b, i, slotO, s.h, s.att, true)
		}
		if s.taps != nil {
			s.taps.take(b, s.taps.mixer(i), s.h) // the mixer's output
		}
		if l.postAttnNorm != nil {
			b.RMSNorm(s.h, s.h, l.postAttnNorm, eps)
		}
		b.AddRMSNorm(s.h, s.x, s.h, l.mlpNorm, eps) // x += h (residual); h = norm(x) (L, D)
		out := s.h                                  // the MLP's output (L, D)
		if l.router != nil {
			out = m.moe(b, s, l)
		} else {
			if s.lora == nil && l.bg == nil && l.bu == nil {
				b.MatMulGLU(s.g, s.u, s.h, l.gu[0], l.gu[1], m.act) // act(g)·u (L, F)
			} else {
				linears(b, s.gu, s.h, l.gu, l.guB) // g and u (L, F)
				if s.lora != nil {
					s.lora.apply(b, i, slotGate, s.g, s.h, true)
					s.lora.apply(b, i, slotUp, s.u, s.h, false)
				}
				b.GLU(s.g, s.g, s.u, m.act) // act(g)·u
			}
			linear(b, s.h, s.g, l.down, l.bd) // (L, D)
			s.lora.apply(b, i, slotDown, s.h, s.g, true)
		}
		if s.taps != nil {
			s.taps.take(b, s.taps.mlp(i), out) // the MLP's output
		}
		if l.postMLPNorm != nil {
			b.RMSNorm(out, out, l.postMLPNorm, eps)
		}
		switch {
		case i+1 < len(m.layers):
			b.AddRMSNorm(s.h, s.x, out, m.layers[i+1].attnNorm, eps) // residual; the next block's norm
		case L == 1:
			b.AddRMSNorm(s.last, s.x, out, m.norm, eps) // residual; the final norm
		default:
			b.Add(s.x, s.x, out)                    // residual
			b.RMSNorm(s.last, s.lastX, m.norm, eps) // (1, D): only the last token needs logits
		}
		if s.taps != nil {
			s.taps.take(b, i+1, s.x) // layer i's output
		}
	}
	if s.taps != nil && s.taps.tapNorm() {
		last := s.last
		if s.taps.all {
			b.RMSNorm(s.h, s.x, m.norm, eps) // every row's (L, D); s.h is free here
			last = s.h
		}
		s.taps.take(b, len(m.layers)+1, last)
	}
	b.MatMul(s.logits, s.last, m.head) // (1, V)
	if cfg.FinalSoftcap > 0 {
		b.Softcap(s.logits, float32(cfg.FinalSoftcap))
	}
}

// linearAttn runs layer i's Gated DeltaNet (Qwen3.5) on the normed rows s.h
// into s.h: the four input projections in one MatMuls, the causal
// convolution with SiLU and the gated delta rule carrying the layer's state
// in c, RMSNorm per value head times SiLU(z), the output projection.
func (m *llama) linearAttn(b kernels.Backend, s *acts, c *cache, l *layer, i int) {
	la := l.lin
	b.MatMuls(s.lin, s.h, la.in)                       // qkv (L, C), z (L, nv·dv), b, a (L, nv)
	b.CausalConvSiLU(s.lc, s.lqkv, la.conv, c.conv[i]) // (L, C)
	b.GatedDeltaNet(s.lo, s.lc, s.la, s.lb, c.S[i], &la.p)
	b.RMSNorm(s.lo, s.lo, la.norm, m.cfg.RMSNormEps) // per value head (dv)
	b.GLU(s.lo, s.lz, s.lo, kernels.ActSiLU)         // silu(z)·o
	b.MatMul(s.h, s.lo, la.out)                      // (L, D)
}

// moe runs layer l's mixture of experts on the normed rows s.h and returns
// its output (s.mo), as transformers' Qwen3MoeSparseMoeBlock computes it:
// router logits → softmax (float32) → the k largest weights, renormalized to
// sum 1 with norm_topk_prob; then for each expert hit, in expert order, its
// SwiGLU on the rows routed to it, added into the output times each row's
// weight. Only those experts' weights are read. The routing happens on the
// host (one wait for the router logits a layer); a device error there shows
// at the step's next Sync or Download, where the backend reports it.
func (m *llama) moe(b kernels.Backend, s *acts, l *layer) *kernels.Tensor {
	E, L := m.cfg.NumExperts, s.L
	W := l.router.Shape[0]        // E, or E+1 with the shared expert's gate (as s.rl)
	b.MatMul(s.rl, s.h, l.router) // (L, W)
	if l.routerB != nil {
		b.Add(s.rl, s.rl, l.routerB)
	}
	b.CopyRows(s.mo, s.zero, 0)
	if err := b.Download(s.hostRL[:L*W], s.rl); err != nil {
		return s.mo
	}
	for e := range s.byExpert {
		s.byExpert[e] = s.byExpert[e][:0]
	}
	for t := range L {
		r := &s.route[t]
		if m.arch.gptOss {
			routeTopK(r, s.hostRL[t*W:t*W+E])
		} else {
			route(r, s.probs, s.hostRL[t*W:t*W+E], m.cfg.NormTopKProb || m.arch.qwen35)
		}
		for _, e := range r.ids {
			s.byExpert[e] = append(s.byExpert[e], t)
		}
	}
	for e, rows := range s.byExpert {
		if len(rows) == 0 {
			continue
		}
		n, x := len(rows), s.h
		if L > 1 { // gather the expert's rows
			for j, t := range rows {
				b.CopyRows(s.xe, s.h.Rows(t, t+1), j)
			}
			x = s.xe.Rows(0, n)
		}
		ex := &l.experts[e]
		if L == 1 { // a decode step: the whole tensors, no views (it allocates nothing)
			s.egu[0], s.egu[1] = s.ge, s.ue
			b.MatMuls(s.egu, x, ex.gu) // (1, Fe)
			if ex.guB != nil {
				b.Add(s.ge, s.ge, ex.guB[0])
				b.Add(s.ue, s.ue, ex.guB[1])
			}
			b.GLU(s.ge, s.ge, s.ue, m.act)
			b.MatMul(s.oe, s.ge, ex.down) // (1, D)
			if ex.bd != nil {
				b.Add(s.oe, s.oe, ex.bd)
			}
			b.AddScaled(s.mo, s.oe, s.route[0].weight(e))
			continue
		}
		g, u, o := s.ge.Rows(0, n), s.ue.Rows(0, n), s.oe.Rows(0, n)
		s.egu[0], s.egu[1] = g, u
		b.MatMuls(s.egu, x, ex.gu) // (n, Fe)
		if ex.guB != nil {
			b.Add(g, g, ex.guB[0])
			b.Add(u, u, ex.guB[1])
		}
		b.GLU(g, g, u, m.act)
		b.MatMul(o, g, ex.down) // (n, D)
		if ex.bd != nil {
			b.Add(o, o, ex.bd)
		}
		for j, t := range rows {
			b.AddScaled(s.mo.Rows(t, t+1), o.Rows(j, j+1), s.route[t].weight(e))
		}
	}
	if sh := l.shared; sh != nil { // every token's, × σ(its gate logit, column E)
		s.egu[0], s.egu[1] = s.sg, s.su
		b.MatMuls(s.egu, s.h, sh.gu) // (L, Fs)
		b.GLU(s.sg, s.sg, s.su, m.act)
		b.MatMul(s.oe, s.sg, sh.down) // (L, D)
		for t := range L {
			w := float32(1 / (1 + math.Exp(-float64(s.hostRL[t*W+E]))))
			if L == 1 {
				b.AddScaled(s.mo, s.oe, w)
			} else {
				b.AddScaled(s.mo.Rows(t, t+1), s.oe.Rows(t, t+1), w)
			}
		}
	}
	return s.mo
}

// route sets r to the len(r.ids) experts of largest softmax(logits) and
// their probabilities, renormalized to sum 1 with renorm, as transformers'
// Qwen3-MoE routes; p is scratch of len(logits).
func route(r *routed, p, logits []float32, renorm bool) {
	routeSoftmax(p, logits)
	largest(r.ids, p)
	for j, e := range r.ids {
		r.w[j] = p[e]
	}
	if renorm {
		scaleToOne(r.w)
	}
}

// routeTopK sets r to the len(r.ids) experts of largest logits and the
// softmax of those logits, as gpt-oss routes.
func routeTopK(r *routed, logits []float32) {
	largest(r.ids, logits)
	for j, e := range r.ids {
		r.w[j] = logits[e]
	}
	routeSoftmax(r.w, r.w)
}

// routeSoftmax sets dst to the softmax of router logits x (float32; dst may
// be x).
func routeSoftmax(dst, x []float32) {
	mx := slices.Max(x)
	for i, v := range x {
		dst[i] = float32(math.Exp(float64(v - mx)))
	}
	scaleToOne(dst)
}

// scaleToOne divides x by its sum.
func scaleToOne(x []float32) {
	var sum float32
	for _, v := range x {
		sum += v
	}
	for i := range x {
		x[i] /= sum
	}
}

// largest sets ids to the indices of the len(ids) largest values of v, the
// largest first (ties: the lower index).
func largest(ids []int, v []float32) {
	for j := range ids {
		best := -1
		for i, x := range v {
			if !slices.Contains(ids[:j], i) && (best < 0 || x > v[best]) {
				best = i
			}
		}
		ids[j] = best
	}
}

// idleExpertBytes returns the bytes of the experts a token does not read:
// (E − k)/E of every mixture-of-experts layer's expert weights.
func (m *llama) idleExpertBytes() int64 {
	var idle int64
	for i := range m.layers {
		var all int64
		for _, e := range m.layers[i].experts {
			for _, t := range append([]*kernels.Tensor{e.down, e.bd}, append(e.gu, e.guB...)...) {
				if t != nil {
					all += int64(kernels.WeightBytes(t))
				}
			}
		}
		if n := len(m.layers[i].experts); n > 0 {
			idle += all * int64(n-m.cfg.ExpertsPerToken) / int64(n)
		}
	}
	return idle
}

// weight is expert e's routing weight (e is one of r's experts).
func (r *routed) weight(e int) float32 {
	return r.w[slices.Index(r.ids, e)]
}

// linears computes dst[i] = x·w[i]ᵀ (+ bias[i] unless nil) in one MatMuls.
func linears(b kernels.Backend, dst []*kernels.Tensor, x *kernels.Tensor, w, bias []*kernels.Tensor) {
	b.MatMuls(dst, x, w)
	for i, bi := range bias {
		if bi != nil {
			b.Add(dst[i], dst[i], bi)
		}
	}
}

// linear computes dst = x·wᵀ (+ bias).
func linear(b kernels.Backend, dst, x, w, bias *kernels.Tensor) {
	b.MatMul(dst, x, w)
	if bias != nil {
		b.Add(dst, dst, bias)
	}
}
