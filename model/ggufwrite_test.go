package model

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/gguf"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// ggufWriter builds a GGUF v3 file the way gguf-py's GGUFWriter does
// (gguf-py/gguf/gguf_writer.py): metadata in the order added, a key added
// twice keeping its first place with the last value (add_key_value
// overwrites), tensor infos in the order added with dimensions reversed from
// numpy's, data padded to 32 bytes.
type ggufWriter struct {
	kvs     []gguf.KV
	tensors []ggufWTensor
}

type ggufWTensor struct {
	name string
	dims []uint64 // GGUF order: the contiguous dimension first
	typ  gguf.Type
	data []byte
}

func (w *ggufWriter) set(key string, typ, elem gguf.ValueType, v any) {
	kv := gguf.KV{Key: key, Type: typ, Elem: elem, Value: v}
	if i := slices.IndexFunc(w.kvs, func(kv gguf.KV) bool { return kv.Key == key }); i >= 0 {
		w.kvs[i] = kv
		return
	}
	w.kvs = append(w.kvs, kv)
}

func (w *ggufWriter) u32(key string, v int)        { w.set(key, gguf.TypeUint32, 0, uint32(v)) }
func (w *ggufWriter) f32(key string, v float64)    { w.set(key, gguf.TypeFloat32, 0, float32(v)) }
func (w *ggufWriter) str(key, v string)            { w.set(key, gguf.TypeString, 0, v) }
func (w *ggufWriter) bools(key string, v []bool)   { w.set(key, gguf.TypeArray, gguf.TypeBool, v) }
func (w *ggufWriter) f32s(key string, v []float32) { w.set(key, gguf.TypeArray, gguf.TypeFloat32, v) }

// tensor adds values of numpy shape shape as typ (F32 or F16, rounded to
// nearest even as numpy's astype(float16)).
func (w *ggufWriter) tensor(name string, shape []int, typ gguf.Type, values []float32) {
	dims := make([]uint64, len(shape))
	for i, d := range shape {
		dims[len(shape)-1-i] = uint64(d)
	}
	var data []byte
	for _, v := range values {
		switch typ {
		case gguf.TypeF32:
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		case gguf.TypeF16:
			data = binary.LittleEndian.AppendUint16(data, cpu.F32ToF16(v))
		default:
			panic("ggufWriter: type " + typ.String())
		}
	}
	w.tensors = append(w.tensors, ggufWTensor{name, dims, typ, data})
}

// bytes returns the file.
func (w *ggufWriter) bytes() []byte {
	le := binary.LittleEndian
	var b []byte
	str := func(s string) { b = le.AppendUint64(b, uint64(len(s))); b = append(b, s...) }
	b = append(b, "GGUF"...)
	b = le.AppendUint32(b, 3)
	b = le.AppendUint64(b, uint64(len(w.tensors)))
	b = le.AppendUint64(b, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		str(kv.Key)
		b = le.AppendUint32(b, uint32(kv.Type))
		switch v := kv.Value.(type) {
		case uint32:
			b = le.AppendUint32(b, v)
		case float32:
			b = le.AppendUint32(b, math.Float32bits(v))
		case string:
			str(v)
		case []bool:
			b = le.AppendUint32(b, uint32(kv.Elem))
			b = le.AppendUint64(b, uint64(len(v)))
			for _, x := range v {
				b = append(b, map[bool]byte{false: 0, true: 1}[x])
			}
		case []float32:
			b = le.AppendUint32(b, uint32(kv.Elem))
			b = le.AppendUint64(b, uint64(len(v)))
			for _, x := range v {
				b = le.AppendUint32(b, math.Float32bits(x))
			}
		default:
			panic(fmt.Sprintf("ggufWriter: key %q: %T", kv.Key, v))
		}
	}
	var off uint64
	for _, t := range w.tensors {
		str(t.name)
		b = le.AppendUint32(b, uint32(len(t.dims)))
		for _, d := range t.dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint32(b, uint32(t.typ))
		b = le.AppendUint64(b, off)
		off += (uint64(len(t.data)) + 31) / 32 * 32
	}
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	for _, t := range w.tensors {
		b = append(b, t.data...)
		for len(b)%32 != 0 {
			b = append(b, 0)
		}
	}
	return b
}

// convertOptions are convert_hf_to_gguf.py's choices that the tests vary.
type convertOptions struct {
	outtype string // "f32" (LlamaFileType.ALL_F32) or "f16" (MOSTLY_F16)
	round16 bool   // write f32 tensors holding the values an f16 file holds (a test aid, not the converter)
}

// ggufTensorNames maps each converted architecture's per-layer Hugging Face
// names to GGUF names, as gguf-py's TensorNameMap does for that
// architecture's MODEL_TENSORS (gguf-py/gguf/tensor_mapping.py, constants.py).
// Gemma 2 and 3 have no FFN_NORM, so post_attention_layernorm maps to
// ATTN_POST_NORM (post_attention_norm) and pre_feedforward_layernorm to
// FFN_PRE_NORM, whose GGUF name is ffn_norm.
var ggufTensorNames = map[string]map[string]string{
	"llama": {
		"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
		"self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
		"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
	},
	"gemma": {
		"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
		"self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
		"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
	},
	"gemma2": {
		"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
		"self_attn.o_proj": "attn_output", "post_attention_layernorm": "post_attention_norm",
		"pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
		"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
	},
	"gemma3": {
		"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
		"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
		"self_attn.o_proj": "attn_output", "post_attention_layernorm": "post_attention_norm",
		"pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
		"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
	},
	"phi3": {
		"input_layernorm": "attn_norm", "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
		"post_attention_layernorm": "ffn_norm", "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
	},
}

// convertHF writes the GGUF that llama.cpp's convert_hf_to_gguf.py writes for
// the Hugging Face model in dir (tokenizer aside: the reference folders have
// none, so only tokenizer.ggml.bos/eos_token_id are written, from config.json),
// and returns its path. It follows the converter's classes (conversion/*.py):
//
//   - LlamaModel (LlamaForCausalLM, MistralForCausalLM; conversion/llama.py):
//     TextModel.set_gguf_parameters' keys, then vocab_size and
//     rope.dimension_count = head_dim; q_proj and k_proj rows permuted by
//     LlamaModel.permute (k with num_key_value_heads).
//   - GemmaModel, Gemma2Model (conversion/gemma.py): their own
//     set_gguf_parameters (no rope.freq_base; Gemma 2 adds
//     attn_logit_softcapping, final_logit_softcapping, sliding_window);
//     lm_head.weight skipped; every "*norm.weight" + 1 (modify_tensors).
//   - Gemma3Model: TextModel.set_gguf_parameters (rope scaling and freq_base of
//     the full_attention parameters, freq_base_swa of the sliding_attention
//     ones), then context_length, head_count, rms eps, key/value_length,
//     freq_base again, final_logit_softcapping when set, sliding_window unless
//     sliding_window_pattern is 1, head_count_kv; "*norm.weight" + 1
//     (norm_shift), q_norm and k_norm included. (It also cuts the embedding
//     to the tokenizer's size, which here is vocab_size.)
//   - Phi3MiniModel (conversion/phi.py): its own set_gguf_parameters
//     (rope.scaling.original_context_length, rope.dimension_count =
//     int(partial_rotary_factor·D)//H, sliding_window 0 when null); qkv_proj
//     and gate_up_proj kept fused.
//
// Tensors (ModelBase.prepare_tensors in conversion/base.py): bf16 sources
// become f32 before modify_tensors (so the +1 is an f32 add); 1-D tensors and
// "*_norm.weight" are F32, the rest F32 or F16 by outtype.
func convertHF(t *testing.T, dir string, o convertOptions) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hp map[string]any
	if err := json.Unmarshal(b, &hp); err != nil {
		t.Fatal(err)
	}
	num := func(k string) (float64, bool) { v, ok := hp[k].(float64); return v, ok }
	integer := func(k string) int {
		v, ok := num(k)
		if !ok {
			t.Fatalf("config.json: no %s", k)
		}
		return int(v)
	}
	hfArch := hp["architectures"].([]any)[0].(string)
	arch := map[string]string{"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "GemmaForCausalLM": "gemma",
		"Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3", "Phi3ForCausalLM": "phi3"}[hfArch]
	if arch == "" {
		t.Fatalf("convertHF: %s is not one of the converter classes emulated here", hfArch)
	}
	// TextModel.__init__: rope_parameters (or rope_scaling), with rope_theta and
	// original_max_position_embeddings mirrored in when not per layer type.
	rope, _ := hp["rope_parameters"].(map[string]any)
	if rope == nil {
		rope = map[string]any{}
	}
	if _, perType := rope["full_attention"]; !perType {
		if _, ok := rope["rope_theta"]; !ok && hp["rope_theta"] != nil {
			rope["rope_theta"] = hp["rope_theta"]
		}
		if _, ok := rope["original_max_position_embeddings"]; !ok && hp["original_max_position_embeddings"] != nil {
			rope["original_max_position_embeddings"] = hp["original_max_position_embeddings"]
		}
	}
	full := rope
	if f, ok := rope["full_attention"].(map[string]any); ok {
		full = f
	}
	D, H, L := integer("hidden_size"), integer("num_attention_heads"), integer("num_hidden_layers")
	Hkv := H
	if v, ok := num("num_key_value_heads"); ok {
		Hkv = int(v)
	}

	w := &ggufWriter{}
	w.str("general.architecture", arch)
	w.str("general.type", "model")
	w.str("general.name", filepath.Base(dir))
	k := func(s string) string { return arch + "." + s }
	textModel := func() { // TextModel.set_gguf_parameters
		w.u32(k("block_count"), L)
		w.u32(k("context_length"), integer("max_position_embeddings"))
		w.u32(k("embedding_length"), D)
		w.u32(k("feed_forward_length"), integer("intermediate_size"))
		w.u32(k("attention.head_count"), H)
		if _, ok := num("num_key_value_heads"); ok {
			w.u32(k("attention.head_count_kv"), Hkv)
		}
		if typ, ok := full["rope_type"].(string); ok {
			if f, ok := full["factor"].(float64); ok && (typ == "linear" || typ == "yarn") {
				w.str(k("rope.scaling.type"), typ)
				w.f32(k("rope.scaling.factor"), f)
				if typ == "yarn" {
					w.u32(k("rope.scaling.original_context_length"), int(full["original_max_position_embeddings"].(float64)))
				}
			}
		}
		if theta, ok := full["rope_theta"].(float64); ok {
			w.f32(k("rope.freq_base"), theta)
		}
		if s, ok := rope["sliding_attention"].(map[string]any); ok && s["rope_theta"] != nil {
			w.f32(k("rope.freq_base_swa"), s["rope_theta"].(float64))
		}
		w.f32(k("attention.layer_norm_rms_epsilon"), hp["rms_norm_eps"].(float64))
		if hd, ok := num("head_dim"); ok {
			w.u32(k("attention.key_length"), int(hd))
			w.u32(k("attention.value_length"), int(hd))
		}
	}
	gemma := func() { // GemmaModel.set_gguf_parameters (and the start of Gemma2Model's)
		w.u32(k("context_length"), integer("max_position_embeddings"))
		w.u32(k("embedding_length"), D)
		w.u32(k("block_count"), L)
		w.u32(k("feed_forward_length"), integer("intermediate_size"))
		w.u32(k("attention.head_count"), H)
		w.u32(k("attention.head_count_kv"), Hkv)
		w.f32(k("attention.layer_norm_rms_epsilon"), hp["rms_norm_eps"].(float64))
		w.u32(k("attention.key_length"), integer("head_dim"))
		w.u32(k("attention.value_length"), integer("head_dim"))
	}
	switch arch {
	case "llama":
		textModel()
		w.u32(k("vocab_size"), integer("vocab_size"))
		rd := D / H
		if hd, ok := num("head_dim"); ok {
			rd = int(hd)
		}
		w.u32(k("rope.dimension_count"), rd)
	case "gemma":
		gemma()
	case "gemma2":
		gemma()
		w.f32(k("attn_logit_softcapping"), hp["attn_logit_softcapping"].(float64))
		w.f32(k("final_logit_softcapping"), hp["final_logit_softcapping"].(float64))
		w.u32(k("attention.sliding_window"), integer("sliding_window"))
	case "gemma3":
		textModel()
		w.u32(k("context_length"), integer("max_position_embeddings"))
		w.u32(k("attention.head_count"), H)
		w.f32(k("attention.layer_norm_rms_epsilon"), hp["rms_norm_eps"].(float64))
		w.u32(k("attention.key_length"), integer("head_dim"))
		w.u32(k("attention.value_length"), integer("head_dim"))
		theta := 1e6
		if v, ok := full["rope_theta"].(float64); ok {
			theta = v
		}
		w.f32(k("rope.freq_base"), theta)
		if v, ok := num("final_logit_softcapping"); ok && v != 0 {
			w.f32(k("final_logit_softcapping"), v)
		}
		if v, ok := num("sliding_window_pattern"); !ok || v != 1 {
			w.u32(k("attention.sliding_window"), integer("sliding_window"))
		}
		w.u32(k("attention.head_count_kv"), Hkv)
	case "phi3":
		prf := 1.0
		if v, ok := rope["partial_rotary_factor"].(float64); ok {
			prf = v
		}
		w.u32(k("context_length"), integer("max_position_embeddings"))
		w.u32(k("rope.scaling.original_context_length"), int(rope["original_max_position_embeddings"].(float64)))
		w.u32(k("embedding_length"), D)
		w.u32(k("feed_forward_length"), integer("intermediate_size"))
		w.u32(k("block_count"), L)
		w.u32(k("attention.head_count"), H)
		w.u32(k("attention.head_count_kv"), Hkv)
		w.f32(k("attention.layer_norm_rms_epsilon"), hp["rms_norm_eps"].(float64))
		w.u32(k("rope.dimension_count"), int(prf*float64(D))/H)
		w.f32(k("rope.freq_base"), full["rope_theta"].(float64))
		sw := 0
		if v, ok := num("sliding_window"); ok {
			sw = int(v)
		}
		w.u32(k("attention.sliding_window"), sw)
	}
	ftype := map[string]int{"f32": 0, "f16": 1}[o.outtype]
	w.u32("general.file_type", ftype)
	w.u32("general.quantization_version", 2)
	for _, id := range []string{"bos", "eos"} {
		if v, ok := num(id + "_token_id"); ok {
			w.u32("tokenizer.ggml."+id+"_token_id", int(v))
		}
	}

	// The tensors.
	st, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	tensors, _, err := parseSafetensors("model.safetensors", st)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(tensors))
	for name := range tensors {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		src := tensors[name]
		v, err := toF32(src)
		if err != nil {
			t.Fatal(err)
		}
		shape := slices.Clone(src.Shape)
		var out string
		switch {
		case name == "lm_head.weight" && strings.HasPrefix(arch, "gemma") && arch != "gemma3":
			continue // GemmaModel, Gemma2Model: "lm_head is not used in llama.cpp"
		case name == "model.embed_tokens.weight":
			out = "token_embd.weight"
		case name == "model.norm.weight":
			out = "output_norm.weight"
		case name == "lm_head.weight":
			out = "output.weight"
		default:
			var i int
			var rest string
			if _, err := fmt.Sscanf(name, "model.layers.%d.%s", &i, &rest); err != nil {
				t.Fatalf("convertHF: cannot map %q", name)
			}
			g, ok := ggufTensorNames[arch][strings.TrimSuffix(rest, ".weight")]
			if !ok || !strings.HasSuffix(rest, ".weight") {
				t.Fatalf("convertHF: cannot map %q for %s", name, arch)
			}
			out = fmt.Sprintf("blk.%d.%s.weight", i, g)
		}
		if arch == "llama" { // LlamaModel.modify_tensors: LlamaModel.permute
			switch {
			case strings.HasSuffix(name, "q_proj.weight"):
				v = permuteLlama(v, shape, H)
			case strings.HasSuffix(name, "k_proj.weight"):
				v = permuteLlama(v, shape, Hkv)
			}
		}
		if strings.HasPrefix(arch, "gemma") && strings.HasSuffix(name, "norm.weight") {
			for i := range v {
				v[i]++ // data_torch + 1, in float32
			}
		}
		typ := gguf.TypeF32
		if len(shape) > 1 && !strings.HasSuffix(out, "_norm.weight") && o.outtype == "f16" {
			typ = gguf.TypeF16
		}
		if o.round16 && len(shape) > 1 && !strings.HasSuffix(out, "_norm.weight") {
			for i, x := range v {
				v[i] = cpu.F16ToF32(cpu.F32ToF16(x))
			}
		}
		w.tensor(out, shape, typ, v)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(dir)+"-"+o.outtype+".gguf")
	if err := os.WriteFile(path, w.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// permuteLlama is LlamaModel.permute(weights, n_head, n_head_kv) for a
// (rows, cols) matrix of heads blocks: weights.reshape(heads, 2, rows/heads/2,
// cols).swapaxes(1, 2).reshape(rows, cols). Row (h, half, j) moves to
// (h, j, half).
func permuteLlama(v []float32, shape []int, heads int) []float32 {
	rows, cols := shape[0], shape[1]
	half := rows / heads / 2
	out := make([]float32, len(v))
	for h := range heads {
		for s := range 2 {
			for j := range half {
				src := (h*2+s)*half + j
				dst := (h*half+j)*2 + s
				copy(out[dst*cols:(dst+1)*cols], v[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}
