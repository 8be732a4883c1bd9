// Command synthmodel writes a Hugging Face model directory (config.json and one
// model.safetensors) of a named shape with the synthetic weights of
// model.Synthetic, so that loading can be measured without a download:
//
//	go run ./scripts/synthmodel -shape llama-3.2-1b -dtype f16 -o /tmp/1b-f16
//	go run ./cmd/run quantize -model /tmp/1b-f16 -out /tmp/1b-q4 -bits 4
//	go run ./bench -model /tmp/1b-q4 -test load
//
// It writes dense Llama, Mistral and Qwen2 shapes (Qwen2 with q/k/v biases) as
// f32, f16 or bf16; MLX q4/q8 directories come from `run quantize`, as mlx-lm's
// come from its convert.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/model"
)

func main() {
	shape := flag.String("shape", "llama-3.2-1b", "model shape: one of model.ShapeNames")
	dtype := flag.String("dtype", "f16", "weights: f32, f16 or bf16")
	out := flag.String("o", "", "directory to write (must not exist)")
	seed := flag.Uint64("seed", 1, "seed of the weights")
	flag.Parse()
	if err := write(*out, *shape, *dtype, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "synthmodel:", err)
		os.Exit(1)
	}
}

// tensor is one entry of the file: a matrix made from the seed, or a vector of
// ones (norm weights) or zeros (biases).
type tensor struct {
	name       string
	rows, cols int // cols 0: a vector of rows elements
	one        bool
}

func write(dir, shape, dtype string, seed uint64) error {
	if dir == "" {
		return fmt.Errorf("-o: want a directory to write")
	}
	dts := map[string]struct {
		dt    kernels.DType
		st    string
		torch string
	}{"f32": {kernels.DTypeF32, "F32", "float32"}, "f16": {kernels.DTypeF16, "F16", "float16"}, "bf16": {kernels.DTypeBF16, "BF16", "bfloat16"}}
	d, ok := dts[dtype]
	if !ok {
		return fmt.Errorf("-dtype %q: want f32, f16 or bf16", dtype)
	}
	js, err := model.ShapeConfig(shape)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(js, &cfg); err != nil {
		return fmt.Errorf("shape %s: %v", shape, err)
	}
	var c struct {
		Arch   []string `json:"architectures"`
		D      int      `json:"hidden_size"`
		F      int      `json:"intermediate_size"`
		Layers int      `json:"num_hidden_layers"`
		H      int      `json:"num_attention_heads"`
		Hkv    int      `json:"num_key_value_heads"`
		Dh     int      `json:"head_dim"`
		V      int      `json:"vocab_size"`
		Tied   bool     `json:"tie_word_embeddings"`
		MoE    int      `json:"num_experts"`
	}
	if err := json.Unmarshal(js, &c); err != nil {
		return fmt.Errorf("shape %s: %v", shape, err)
	}
	bias := false
	switch {
	case c.MoE > 0:
		return fmt.Errorf("shape %s: a mixture of experts; synthmodel writes dense Llama, Mistral and Qwen2 shapes", shape)
	case slices.Contains(c.Arch, "Qwen2ForCausalLM"):
		bias = true
	case !slices.Contains(c.Arch, "LlamaForCausalLM") && !slices.Contains(c.Arch, "MistralForCausalLM"):
		return fmt.Errorf("shape %s: architecture %v; synthmodel writes dense Llama, Mistral and Qwen2 shapes", shape, c.Arch)
	}
	if c.Dh == 0 {
		c.Dh = c.D / c.H
	}
	ts := []tensor{{name: "model.embed_tokens.weight", rows: c.V, cols: c.D}}
	for i := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		ts = append(ts,
			tensor{name: p + "input_layernorm.weight", rows: c.D, one: true},
			tensor{name: p + "self_attn.q_proj.weight", rows: c.H * c.Dh, cols: c.D},
			tensor{name: p + "self_attn.k_proj.weight", rows: c.Hkv * c.Dh, cols: c.D},
			tensor{name: p + "self_attn.v_proj.weight", rows: c.Hkv * c.Dh, cols: c.D},
			tensor{name: p + "self_attn.o_proj.weight", rows: c.D, cols: c.H * c.Dh},
			tensor{name: p + "post_attention_layernorm.weight", rows: c.D, one: true},
			tensor{name: p + "mlp.gate_proj.weight", rows: c.F, cols: c.D},
			tensor{name: p + "mlp.up_proj.weight", rows: c.F, cols: c.D},
			tensor{name: p + "mlp.down_proj.weight", rows: c.D, cols: c.F})
		if bias {
			ts = append(ts,
				tensor{name: p + "self_attn.q_proj.bias", rows: c.H * c.Dh},
				tensor{name: p + "self_attn.k_proj.bias", rows: c.Hkv * c.Dh},
				tensor{name: p + "self_attn.v_proj.bias", rows: c.Hkv * c.Dh})
		}
	}
	ts = append(ts, tensor{name: "model.norm.weight", rows: c.D, one: true})
	if !c.Tied {
		ts = append(ts, tensor{name: "lm_head.weight", rows: c.V, cols: c.D})
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	cfg["torch_dtype"] = d.torch
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644); err != nil {
		return err
	}

	esize := d.dt.Bits() / 8
	hdr := map[string]any{}
	off := 0
	for _, t := range ts {
		n := t.rows * max(t.cols, 1) * esize
		shape := []int{t.rows}
		if t.cols > 0 {
			shape = []int{t.rows, t.cols}
		}
		hdr[t.name] = map[string]any{"dtype": d.st, "shape": shape, "data_offsets": []int{off, off + n}}
		off += n
	}
	hj, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	binary.Write(w, binary.LittleEndian, uint64(len(hj)))
	w.Write(hj)
	for i, t := range ts {
		if t.cols > 0 {
			w.Write(model.SyntheticMatrix(d.dt, t.rows, t.cols, seed+uint64(i)).Data)
			continue
		}
		var one uint32 // 1.0 in the dtype
		if t.one {
			one = map[kernels.DType]uint32{kernels.DTypeF32: math.Float32bits(1), kernels.DTypeF16: 0x3c00, kernels.DTypeBF16: 0x3f80}[d.dt]
		}
		v := make([]byte, t.rows*esize)
		for j := 0; j < len(v); j += esize {
			if esize == 4 {
				binary.LittleEndian.PutUint32(v[j:], one)
			} else {
				binary.LittleEndian.PutUint16(v[j:], uint16(one))
			}
		}
		w.Write(v)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
