package model

import (
	"testing"
)

// TestGemma3Checkpoint loads the gemma3 reference as the published 4B–27B
// checkpoints are laid out: Gemma3ForConditionalGeneration with the settings
// in a nested text_config in the legacy key form (rope_theta,
// rope_local_base_freq, rope_scaling; sliding_window_pattern instead of
// layer_types), the weights under language_model., and vision weights that
// are not the language model's. The logits must equal the plain folder's.
func TestGemma3Checkpoint(t *testing.T) {
	src, ref := readRef(t, "gemma3")
	text := configMap(t, src, "config.legacy.json")
	delete(text, "layer_types")
	delete(text, "architectures")
	text["sliding_window_pattern"] = 2 // 2 layers: sliding, full, as layer_types said
	text["model_type"] = "gemma3_text"
	outer := map[string]any{
		"architectures": []string{"Gemma3ForConditionalGeneration"}, "model_type": "gemma3",
		"text_config": text, "vision_config": map[string]any{"model_type": "siglip_vision_model"},
		"eos_token_id": text["eos_token_id"], "mm_tokens_per_image": 256,
	}
	dir := writeCheckpoint(t, src, outer, func(n string) string { return "language_model." + n },
		map[string]*stTensor{"vision_tower.vision_model.post_layernorm.weight": tiny()})
	sameLogits(t, src, dir, ref.InputIDs, func(c *Config) {
		if c.Arch() != "Gemma3ForCausalLM" || len(c.LayerTypes) != 2 || c.LayerTypes[1] != "full_attention" {
			t.Fatalf("config: %s, layer types %v", c.Arch(), c.LayerTypes)
		}
	})
}

// TestGemma3ConfigErrors: a conditional-generation config without its
// text_config is refused, naming the field.
func TestGemma3ConfigErrors(t *testing.T) {
	_, err := parseConfig([]byte(`{"architectures": ["Gemma3ForConditionalGeneration"], "vision_config": {}}`))
	if err == nil || err.Error() != "text_config is missing (architecture Gemma3ForConditionalGeneration keeps the language model's settings there)" {
		t.Errorf("no text_config: %v", err)
	}
	if _, err := parseConfig([]byte(`{"architectures": ["Gemma3ForConditionalGeneration"], "text_config": 3}`)); err == nil {
		t.Error("text_config 3: no error")
	}
}
