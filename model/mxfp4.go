package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// MXFP4 (OCP Microscaling FP4: blocks of 32 E2M1 codes sharing an E8M0
// scale byte) comes in two checkpoint forms, both repacked at load into
// [kernels.DTypeMXFP4]'s 17-byte blocks (scale byte, then the 16 code bytes
// as stored: element 2j in the low nibble of byte j):
//
//   - Hugging Face's openai/gpt-oss-*: config.json "quantization_config":
//     {"quant_method": "mxfp4", "modules_to_not_convert": […]}; the experts as
//     mlp.experts.gate_up_proj_blocks U8 [E, 2Fe, D/32, 16] with
//     gate_up_proj_scales U8 [E, 2Fe, D/32] (rows output-major, gate and up
//     interleaved as rows 2f and 2f+1 — transformers' convert_moe_packed_tensors
//     transposes the dequantized [E, 2Fe, D] into the float form's input-major
//     [E, D, 2Fe]), down_proj_blocks [E, D, Fe/32, 16] and down_proj_scales;
//     biases gate_up_proj_bias [E, 2Fe] and down_proj_bias [E, D] in float.
//   - MLX (mlx-lm's gpt_oss sanitize): "quantization": {"group_size": 32,
//     "bits": 4, "mode": "mxfp4"} (per-module overrides may say "affine");
//     mlp.experts.{gate,up}_proj.weight U32 [E, Fe, D/8] (the same bytes as
//     the blocks: 8 codes a little-endian word, low bits first) with .scales U8
//     [E, Fe, D/32] and .bias [E, Fe]; down_proj likewise [E, D, Fe/8]. Any
//     linear module of an mxfp4 MLX checkpoint loads this way (mxfp4Matrix).
//
// A scale byte of 255 is NaN in the spec: the load fails naming the tensor.

// checkQuantMode validates the quantization mode of q (field names it in
// errors): "" or "affine" for MLX affine, or "mxfp4" with 4 bits in groups
// of 32.
func checkQuantMode(field string, q *quantConfig) error {
	switch q.Mode {
	case "", "affine":
		return nil
	case "mxfp4":
		if q.Bits != 4 || q.GroupSize != cpu.MXFP4Block {
			return fmt.Errorf("model: config.json: %s: mode \"mxfp4\" needs bits 4 and group_size 32, not %d and %d", field, q.Bits, q.GroupSize)
		}
		return nil
	}
	return fmt.Errorf("model: config.json: %s.mode %q is not supported (ingot loads MLX affine and mxfp4)", field, q.Mode)
}

// packMXFP4 returns rows × cols/32 blocks of 17 bytes from codes (rows ×
// cols/2 bytes) and their scales (rows × cols/32 bytes), or an error naming
// scalesName at a scale byte of 255 (NaN).
func packMXFP4(codes, scales []byte, rows, cols int, scalesName string) ([]byte, error) {
	nb := rows * cols / cpu.MXFP4Block
	out := make([]byte, nb*cpu.MXFP4BlockBytes)
	for b := range nb {
		if scales[b] == 255 {
			return nil, fmt.Errorf("model: tensor %q: scale byte 255 (NaN) at row %d, block %d", scalesName, b/(cols/cpu.MXFP4Block), b%(cols/cpu.MXFP4Block))
		}
		o := out[b*cpu.MXFP4BlockBytes:]
		o[0] = scales[b]
		copy(o[1:cpu.MXFP4BlockBytes], codes[b*16:(b+1)*16])
	}
	return out, nil
}

// u8 returns the bytes of tensor name, which must be U8 of the given shape.
func (l *loader) u8(name string, shape ...int) (*stTensor, error) {
	st, ok := l.get(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", l.full(name))
	}
	if st.DType != "U8" {
		return nil, fmt.Errorf("model: tensor %q has dtype %s, want U8 (mxfp4)", st.Name, st.DType)
	}
	if !slices.Equal(st.Shape, shape) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies %v", st.Name, st.Shape, shape)
	}
	return st, nil
}

// mxfp4Matrix loads an MLX mxfp4 module (rows, cols): weight U32 (rows,
// cols/8) (st), scales U8 (rows, cols/32), stacked or not (see isMatrix).
func (l *loader) mxfp4Matrix(module string, st *stTensor, rows, cols int) (*kernels.Tensor, error) {
	if strings.HasSuffix(module, "embed_tokens") {
		return nil, fmt.Errorf("model: tensor %q is mxfp4: ingot runs mxfp4 weights in matrix products, not as an embedding", st.Name)
	}
	if cols%cpu.MXFP4Block != 0 {
		return nil, fmt.Errorf("model: tensor %q: %d columns are not whole 32-element mxfp4 blocks", st.Name, cols)
	}
	if !isMatrix(st.Shape, rows, cols/8) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies [%d %d] for the mxfp4 codes of [%d %d]", st.Name, st.Shape, rows, cols/8, rows, cols)
	}
	name := module + ".scales"
	sc, ok := l.get(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", l.full(name))
	}
	if sc.DType != "U8" || !isMatrix(sc.Shape, rows, cols/cpu.MXFP4Block) {
		return nil, fmt.Errorf("model: tensor %q is %s%v, want U8 [%d %d] (mxfp4 scales)", sc.Name, sc.DType, sc.Shape, rows, cols/cpu.MXFP4Block)
	}
	b, err := packMXFP4(st.Data, sc.Data, rows, cols, sc.Name)
	if err != nil {
		return nil, err
	}
	return &kernels.Tensor{DType: kernels.DTypeMXFP4, Shape: []int{rows, cols}, Data: b}, nil
}

// hostFloats returns tensor name (of any float dtype, of the given shape) as
// f32.
func (l *loader) hostFloats(name string, shape ...int) ([]float32, error) {
	st, ok := l.get(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", l.full(name))
	}
	if !slices.Equal(st.Shape, shape) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, config.json implies %v", st.Name, st.Shape, shape)
	}
	return toF32(st)
}

// gptOssPacked reports whether layer p's gpt-oss experts are stored in one of
// the forms loadGptOssPacked reads rather than as float gate_up_proj.
func gptOssPacked(l *loader, p string) bool {
	return l.has(p+"mlp.experts.gate_up_proj_blocks") || l.has(p+"mlp.experts.gate_proj.weight")
}

// loadGptOssPacked loads gpt-oss's experts from Hugging Face's MXFP4 blocks
// or from MLX's per-projection stacks (mxfp4, affine or float), as per-expert
// row views; the MXFP4 weights stay MXFP4 on the device.
func (m *llama) loadGptOssPacked(ly *layer, l *loader, p string) error {
	c := m.cfg
	E, Fe, D := c.NumExperts, c.MoEIntermediate, c.HiddenSize
	ly.experts = make([]expert, E)
	for e := range ly.experts {
		ly.experts[e].gu, ly.experts[e].guB = make([]*kernels.Tensor, 2), make([]*kernels.Tensor, 2)
	}
	q := p + "mlp.experts."
	var gate, up, down *kernels.Tensor // (E·Fe, D), (E·Fe, D), (E·D, Fe) on the host
	var bg, bu, bd []float32           // (E·Fe), (E·Fe), (E·D)
	var err error
	if l.has(q + "gate_up_proj_blocks") { // Hugging Face
		if D%cpu.MXFP4Block != 0 || Fe%cpu.MXFP4Block != 0 {
			return fmt.Errorf("model: config.json: hidden_size (%d) and intermediate_size (%d) must be multiples of 32 for mxfp4 experts", D, Fe)
		}
		var gu *kernels.Tensor // (E·2Fe, D), gate and up rows interleaved
		if gu, err = l.hfBlocks(q+"gate_up_proj", E, 2*Fe, D); err != nil {
			return err
		}
		if down, err = l.hfBlocks(q+"down_proj", E, D, Fe); err != nil {
			return err
		}
		gate, up = gatherRows(gu, evenOdd(E*Fe, 0)), gatherRows(gu, evenOdd(E*Fe, 1))
		gub, err := l.hostFloats(q+"gate_up_proj_bias", E, 2*Fe)
		if err != nil {
			return err
		}
		bg, bu = make([]float32, E*Fe), make([]float32, E*Fe)
		for i := range bg {
			bg[i], bu[i] = gub[2*i], gub[2*i+1]
		}
		if bd, err = l.hostFloats(q+"down_proj_bias", E, D); err != nil {
			return err
		}
	} else { // MLX
		for _, w := range []struct {
			dst        **kernels.Tensor
			b          *[]float32
			name       string
			rows, cols int
		}{{&gate, &bg, "gate_proj", Fe, D}, {&up, &bu, "up_proj", Fe, D}, {&down, &bd, "down_proj", D, Fe}} {
			if *w.dst, err = l.hostMatrix(q+w.name, E*w.rows, w.cols); err != nil {
				return err
			}
			if *w.b, err = l.hostFloats(q+w.name+".bias", E, w.rows); err != nil {
				return err
			}
		}
	}
	for e := range ly.experts {
		ex, name := &ly.experts[e], fmt.Sprintf("%smlp.experts.%d", p, e)
		for _, t := range []struct {
			dst  **kernels.Tensor
			host *kernels.Tensor
		}{
			{&ex.gu[0], gate.Rows(e*Fe, (e+1)*Fe)}, {&ex.gu[1], up.Rows(e*Fe, (e+1)*Fe)}, {&ex.down, down.Rows(e*D, (e+1)*D)},
			{&ex.guB[0], kernels.FromF32(bg[e*Fe:(e+1)*Fe], Fe)}, {&ex.guB[1], kernels.FromF32(bu[e*Fe:(e+1)*Fe], Fe)},
			{&ex.bd, kernels.FromF32(bd[e*D:(e+1)*D], D)},
		} {
			if *t.dst, err = l.upload(name, t.host); err != nil {
				return err
			}
		}
	}
	return nil
}

// hfBlocks loads Hugging Face's MXFP4 pair module_blocks U8 [E, rows,
// cols/32, 16] and module_scales U8 [E, rows, cols/32] as a host MXFP4
// matrix (E·rows, cols).
func (l *loader) hfBlocks(module string, E, rows, cols int) (*kernels.Tensor, error) {
	nb := cols / cpu.MXFP4Block
	bl, err := l.u8(module+"_blocks", E, rows, nb, 16)
	if err != nil {
		return nil, err
	}
	sc, err := l.u8(module+"_scales", E, rows, nb)
	if err != nil {
		return nil, err
	}
	b, err := packMXFP4(bl.Data, sc.Data, E*rows, cols, sc.Name)
	if err != nil {
		return nil, err
	}
	return &kernels.Tensor{DType: kernels.DTypeMXFP4, Shape: []int{E * rows, cols}, Data: b}, nil
}

// evenOdd returns the n one-row ranges of rows 2i+parity, i < n.
func evenOdd(n, parity int) [][2]int {
	r := make([][2]int, n)
	for i := range r {
		r[i] = [2]int{2*i + parity, 2*i + parity + 1}
	}
	return r
}

// String names the quantization for the load line: "none", "mxfp4" or
// "q4/g64" (MLX affine), and how many modules are quantized otherwise or not
// at all.
func (q *quantConfig) String() string {
	if q == nil {
		return "none"
	}
	s := fmt.Sprintf("q%d/g%d", q.Bits, q.GroupSize)
	if q.Mode == "mxfp4" {
		s = "mxfp4"
	}
	switch n := len(q.override); n {
	case 0:
	case 1:
		s += ", 1 module overridden"
	default:
		s += fmt.Sprintf(", %d modules overridden", n)
	}
	return s
}
