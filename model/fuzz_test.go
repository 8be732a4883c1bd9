package model

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSafetensors: any bytes either parse into tensors that lie inside the data
// section and do not overlap, or give an error; never a panic or a hang.
func FuzzSafetensors(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(refDir, "llama2", "model.safetensors"))
	if err == nil {
		n := binary.LittleEndian.Uint64(b)
		f.Add(b[:8+n+64]) // header of a real file with a short data section
	}
	f.Add([]byte{})
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, _, err := parseSafetensors("fuzz.safetensors", b)
		if err != nil {
			return
		}
		for name, st := range ts {
			n := stDTypeSize[st.DType]
			for _, d := range st.Shape {
				n *= d
			}
			if n != len(st.Data) {
				t.Fatalf("%s: %d bytes for shape %v", name, len(st.Data), st.Shape)
			}
		}
	})
}

// FuzzShardIndex: the index parser accepts only plain file names.
func FuzzShardIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":1},"weight_map":{"a":"model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseShardIndex("index.json", b)
		if err != nil {
			return
		}
		for _, file := range m {
			if file != filepath.Base(file) || file == "" || file[0] == '.' {
				t.Fatalf("accepted %q", file)
			}
		}
	})
}

// FuzzConfig: config.json either parses into a config whose architecture builds
// its rope and windows without panicking, or gives an error.
func FuzzConfig(f *testing.F) {
	for _, c := range []string{"llama3", "gemma2", "phi3", "qwen3", "mistral", "gemma3", "qwen3_moe-mixed", "gpt_oss"} {
		for _, name := range []string{"config.json", "config.legacy.json"} {
			if b, err := os.ReadFile(filepath.Join(refDir, c, name)); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":4,"rope_scaling":{"type":"yarn","factor":4}}`))
	f.Add([]byte(`{"architectures":["Gemma3ForConditionalGeneration"],"text_config":{"hidden_size":8,"intermediate_size":8,"num_hidden_layers":3,"num_attention_heads":2,"vocab_size":4,"sliding_window":2,"sliding_window_pattern":2,"rope_local_base_freq":10000,"rope_theta":1e6,"rope_scaling":{"rope_type":"linear","factor":8}}}`))
	f.Add([]byte(`{"architectures":["Qwen3MoeForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":2,"num_attention_heads":2,"vocab_size":4,"num_experts":4,"num_experts_per_tok":2,"mlp_only_layers":[1],"decoder_sparse_step":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseConfig(b)
		if err != nil {
			return
		}
		_, _ = parseQuant(c)
		if _, err := newRoPE(c, 4096); err != nil {
			return
		}
		if _, err := newLocalRoPE(c, 4096); err != nil {
			return
		}
		if len(c.LayerTypes) != 0 && len(c.LayerTypes) != c.NumLayers {
			t.Fatalf("%d layer types for %d layers", len(c.LayerTypes), c.NumLayers)
		}
		for i := range c.NumLayers {
			if w := c.windowOf(i); w < 0 {
				t.Fatalf("layer %d window %d", i, w)
			}
			if c.sparse(i) && (c.ExpertsPerToken <= 0 || c.ExpertsPerToken > c.NumExperts || c.MoEIntermediate <= 0) {
				t.Fatalf("sparse layer %d with %d of %d experts of %d", i, c.ExpertsPerToken, c.NumExperts, c.MoEIntermediate)
			}
		}
	})
}
