package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot"
)

// writeAdapter writes a random PEFT LoRA adapter (rank 4, strong enough to
// change the demo model's greedy text) for the demo model into a new folder.
func writeAdapter(t *testing.T, seed uint64) string {
	t.Helper()
	const D, F, q, kv, r = 256, 768, 256, 64, 4 // tinycode-llama
	rng := rand.New(rand.NewPCG(seed, 1))
	type entry struct {
		name string
		rows int
		cols int
	}
	var es []entry
	for i := range 4 {
		for _, m := range []struct {
			name    string
			in, out int
		}{{"self_attn.q_proj", D, q}, {"self_attn.v_proj", D, kv}, {"mlp.down_proj", F, D}} {
			p := fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_", i, m.name)
			es = append(es, entry{p + "A.weight", r, m.in}, entry{p + "B.weight", m.out, r})
		}
	}
	h := map[string]any{}
	var data []byte
	for _, e := range es {
		h[e.name] = map[string]any{"dtype": "F32", "shape": []int{e.rows, e.cols}, "data_offsets": []int{len(data), len(data) + 4*e.rows*e.cols}}
		for range e.rows * e.cols {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(rng.NormFloat64()*0.3)))
		}
	}
	hb, _ := json.Marshal(h)
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	dir := t.TempDir()
	st := append(binary.LittleEndian.AppendUint64(nil, uint64(len(hb))), append(hb, data...)...)
	cfg := `{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "bias": "none", "target_modules": ["q_proj", "v_proj", "down_proj"]}`
	if err := os.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), st, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAdapters serves two LoRA adapters beside the base model on one
// session: each request runs the model its "model" field names (the text an
// adapted session generates directly), the base's name or none the base,
// an unknown name 404 model_not_found; /v1/models lists all three.
func TestAdapters(t *testing.T) {
	a1, a2 := writeAdapter(t, 1), writeAdapter(t, 2)
	s, ts := testServer(t, Config{ModelName: "demo", Parallel: 1, Adapters: []AdapterDir{{"tuned", a1}, {"other", a2}}})
	ctx := context.Background()
	const prompt = "def fibonacci(n):"
	complete := func(model string) (string, string) {
		t.Helper()
		body := fmt.Sprintf(`{"prompt": %q, "max_tokens": 12, "temperature": 0}`, prompt)
		if model != "" {
			body = fmt.Sprintf(`{"model": %q, "prompt": %q, "max_tokens": 12, "temperature": 0}`, model, prompt)
		}
		resp, b := post(t, ctx, ts.URL+"/v1/completions", body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("model %q: %d %s", model, resp.StatusCode, b)
		}
		c := decode[struct {
			Model   string `json:"model"`
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}](t, b)
		return c.Model, c.Choices[0].Text
	}
	// What the adapted model writes, from a session of the same model.
	m := s.ready.Load().model
	direct := func(dir string) string {
		a, err := m.LoadAdapter(dir)
		if err != nil {
			t.Fatal(err)
		}
		ss, err := m.NewSession(ingot.SessionOptions{Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		if err := ss.SetAdapter(a); err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for tok, err := range ss.Generate(ctx, prompt, ingot.Sampling{MaxTokens: 12}) {
			if err != nil {
				t.Fatal(err)
			}
			sb.WriteString(tok.Text)
		}
		return sb.String()
	}
	want := map[string]string{"tuned": direct(a1), "other": direct(a2)}
	_, base := complete("demo")
	if base == want["tuned"] || want["tuned"] == want["other"] {
		t.Fatalf("the adapters do not change the text: base %q, tuned %q, other %q", base, want["tuned"], want["other"])
	}
	for _, name := range []string{"tuned", "demo", "other", "tuned", "", "other"} { // switching on the one session
		gotModel, got := complete(name)
		w, wm := want[name], name
		if w == "" {
			w, wm = base, "demo"
		}
		if got != w || gotModel != wm {
			t.Errorf("model %q: %q from %q, want %q from %q", name, got, gotModel, w, wm)
		}
	}
	// The chat endpoint selects the same way and names the adapter.
	resp, b := post(t, ctx, ts.URL+"/v1/chat/completions", `{"model": "tuned", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	if resp.StatusCode != http.StatusOK || decode[struct {
		Model string `json:"model"`
	}](t, b).Model != "tuned" {
		t.Errorf("chat with an adapter: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/v1/completions", "/v1/chat/completions", "/v1/messages", "/v1/responses"} {
		resp, b := post(t, ctx, ts.URL+path, `{"model": "nope", "prompt": "x", "messages": [{"role": "user", "content": "x"}], "input": "x", "max_tokens": 2}`)
		code := "model_not_found"
		if path == "/v1/messages" {
			code = "not_found_error" // Anthropic's error shape has a type, no code
		}
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), code) || !strings.Contains(string(b), `no model \"nope\"`) {
			t.Errorf("%s with an unknown model: %d %s", path, resp.StatusCode, b)
		}
	}
	r, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var list struct {
		Data []modelObject `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 3 || list.Data[0].ID != "demo" || list.Data[1].ID != "tuned" || list.Data[2].Parent != "demo" {
		t.Errorf("/v1/models: %+v", list.Data)
	}
	if r, err := http.Get(ts.URL + "/v1/models/other"); err != nil || r.StatusCode != http.StatusOK {
		t.Errorf("/v1/models/other: %v %v", r.StatusCode, err)
	}
	// Bad configurations name the field.
	for _, ads := range [][]AdapterDir{{{"", a1}}, {{"x", a1}, {"x", a2}}, {{"demo", a1}}} {
		if _, err := New(Config{ModelName: "demo", Adapters: ads}); err == nil || !strings.Contains(err.Error(), "adapters[") {
			t.Errorf("adapters %v: %v", ads, err)
		}
	}
	srv, err := New(Config{Adapters: []AdapterDir{{"bad", t.TempDir()}}, LoadOptions: ingot.Options{Backend: "cpu", Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Load(ctx); err == nil || !strings.Contains(err.Error(), `adapter "bad"`) {
		t.Errorf("an adapter folder without files: %v", err)
	}
}
