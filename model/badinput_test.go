package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyDir copies a reference model folder into a temp dir the test may break.
func copyDir(t *testing.T, name string) string {
	t.Helper()
	src, dst := filepath.Join(refDir, name), t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// rewriteHeader parses model.safetensors in dir, lets edit change the header, and
// writes the file back with the same data section.
func rewriteHeader(t *testing.T, dir string, edit func(h map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var h map[string]any
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	edit(h)
	hb, _ := json.Marshal(h)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(append(out, hb...), b[8+n:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func editConfig(t *testing.T, dir string, edit func(c map[string]any)) {
	editFile(t, filepath.Join(dir, "config.json"), func(b []byte) []byte {
		var c map[string]any
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		edit(c)
		out, _ := json.Marshal(c)
		return out
	})
}

const qProj = "model.layers.1.self_attn.q_proj.weight"

// TestBadInput breaks a good model directory in one way per case and checks that
// Load fails with an error naming the file and the tensor or field.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, dir string)
		want   []string // substrings of the error
	}{
		{"no config", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "config.json")) }, []string{"no config.json"}},
		{"no weights", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "model.safetensors")) }, []string{"no model.safetensors"}},
		{"config not json", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "config.json"), []byte("{"), 0o644)
		}, []string{"config.json"}},
		{"unknown architecture", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["architectures"] = []string{"MambaForCausalLM"} })
		}, []string{"unsupported architecture", "MambaForCausalLM"}},
		{"unknown rope type", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) {
				c["rope_parameters"] = map[string]any{"rope_type": "wobbly", "rope_theta": 1e4}
			})
		}, []string{"rope type", "wobbly"}},
		{"unknown activation", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["hidden_act"] = "relu6" })
		}, []string{"hidden_act", "relu6"}},
		{"heads not divisible", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["num_key_value_heads"] = 3; c["vocab_size"] = -1 })
		}, []string{"config.json", "num_key_value_heads (3)", "vocab_size (-1)"}},
		{"truncated file", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "model.safetensors"), func(b []byte) []byte { return b[:len(b)/2] })
		}, []string{"model.safetensors", "out of range"}},
		{"header length past end", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "model.safetensors"), func(b []byte) []byte {
				binary.LittleEndian.PutUint64(b, uint64(len(b)))
				return b
			})
		}, []string{"model.safetensors", "header length"}},
		{"offsets overlap", func(t *testing.T, dir string) {
			rewriteHeader(t, dir, func(h map[string]any) {
				var lo float64 = -1
				for k, v := range h {
					if k != "__metadata__" && k != qProj {
						lo = v.(map[string]any)["data_offsets"].([]any)[0].(float64)
						break
					}
				}
				e := h[qProj].(map[string]any)
				off := e["data_offsets"].([]any)
				size := off[1].(float64) - off[0].(float64)
				e["data_offsets"] = []any{lo, lo + size}
			})
		}, []string{"model.safetensors", "overlap"}},
		{"shape inconsistent with bytes", func(t *testing.T, dir string) {
			rewriteHeader(t, dir, func(h map[string]any) { h[qProj].(map[string]any)["shape"] = []int{3, 3} })
		}, []string{"model.safetensors", qProj, "needs"}},
		{"unknown dtype", func(t *testing.T, dir string) {
			rewriteHeader(t, dir, func(h map[string]any) { h[qProj].(map[string]any)["dtype"] = "F12" })
		}, []string{qProj, "F12"}},
		{"missing tensor", func(t *testing.T, dir string) {
			rewriteHeader(t, dir, func(h map[string]any) { delete(h, qProj) })
		}, []string{"missing tensor", qProj}},
		{"shape contradicts config", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["intermediate_size"] = 100 })
		}, []string{"model.layers.0.mlp.gate_proj.weight", "[100 64]"}},
		{"index names missing file", func(t *testing.T, dir string) {
			idx := `{"metadata":{},"weight_map":{"model.norm.weight":"model-00002-of-00002.safetensors"}}`
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(idx), 0o644)
		}, []string{"model-00002-of-00002.safetensors"}},
		{"index escapes directory", func(t *testing.T, dir string) {
			idx := `{"weight_map":{"model.norm.weight":"../model.safetensors"}}`
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(idx), 0o644)
		}, []string{"model.safetensors.index.json", "not a file name"}},
		{"bad eos", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": "x"}`), 0o644)
		}, []string{"generation_config.json", "eos_token_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, "llama3")
			tc.break_(t, dir)
			m, err := Load(context.Background(), dir, Options{Threads: 1})
			if err == nil {
				m.Close()
				t.Fatal("Load succeeded on a broken directory")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestShardedLoad splits a reference model into two shards with an index and checks
// it loads to the same logits.
func TestShardedLoad(t *testing.T) {
	src, ref := readRef(t, "qwen2")
	b, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := parseSafetensors("model.safetensors", b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json"} {
		c, _ := os.ReadFile(filepath.Join(src, f))
		os.WriteFile(filepath.Join(dir, f), c, 0o644)
	}
	shards := [2]map[string]*stTensor{{}, {}}
	wmap := map[string]string{}
	i := 0
	for name, st := range ts {
		shards[i%2][name] = st
		wmap[name] = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i%2]
		i++
	}
	for s, tensors := range shards {
		writeSafetensors(t, filepath.Join(dir, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[s]), tensors)
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": wmap})
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
	m := open(t, dir, Options{Threads: 1}, SessionOptions{})
	got, err := m.Forward(context.Background(), ref.InputIDs)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbs(got, ref.LogitsLast); d > logitTol {
		t.Errorf("sharded model logits max-abs %g", d)
	}
}

// writeSafetensors writes tensors into a new safetensors file (data in name order,
// header padded to 8 bytes as the reference writer does).
func writeSafetensors(t *testing.T, path string, tensors map[string]*stTensor) {
	t.Helper()
	h := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for name, st := range tensors {
		h[name] = map[string]any{"dtype": st.DType, "shape": st.Shape, "data_offsets": []int{len(data), len(data) + len(st.Data)}}
		data = append(data, st.Data...)
	}
	hb, _ := json.Marshal(h)
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(append(out, hb...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
