package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestAdapterCLI: run -adapter DIR (PEFT and mlx-lm, unfused and with
// -fuse) gives the adapted model's greedy ids and first logprob; without
// -adapter the base's ids.
func TestAdapterCLI(t *testing.T) {
	for _, name := range []string{"lora-llama3", "lora-qwen2"} {
		dir := filepath.Join(refDir, name)
		var ref struct {
			BaseDir      string    `json:"base_dir"`
			InputIDs     []int32   `json:"input_ids"`
			GreedyNoStop []int32   `json:"greedy_nostop"`
			LogitsLast   []float64 `json:"logits_last"`
			Effect       struct {
				BaseGreedy []int32 `json:"base_greedy_nostop"`
			} `json:"adapter_effect"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		base := filepath.Join(dir, ref.BaseDir)
		args := []string{"-model", base, "-backend", "cpu", "-threads", "1", "-prompt-ids", commaIDs(ref.InputIDs), "-temp", "0", "-n", "16", "-ignore-eos", "-json"}
		for _, tc := range []struct {
			name  string
			extra []string
			want  []int32
		}{
			{"peft", []string{"-adapter", dir}, ref.GreedyNoStop},
			{"mlx", []string{"-adapter", filepath.Join(dir, "mlx")}, ref.GreedyNoStop},
			{"fuse", []string{"-adapter", dir, "-fuse"}, ref.GreedyNoStop},
			{"base", nil, ref.Effect.BaseGreedy},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				out, stderr := runCLI(t, append(slices.Clone(args), tc.extra...)...)
				var got jsonResult
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
				}
				if !slices.Equal(got.IDs, tc.want) {
					t.Errorf("ids %v, want %v", got.IDs, tc.want)
				}
				if tc.name == "base" {
					return
				}
				if !strings.Contains(stderr, "adapter") {
					t.Errorf("stderr does not mention the adapter: %q", stderr)
				}
				mx := slices.Max(ref.LogitsLast)
				var z float64
				for _, l := range ref.LogitsLast {
					z += math.Exp(l - mx)
				}
				want := ref.LogitsLast[got.IDs[0]] - mx - math.Log(z)
				if d := math.Abs(float64(got.Logprobs[0]) - want); d > 1e-4 {
					t.Errorf("logprobs[0] = %v, log_softmax of the reference = %v", got.Logprobs[0], want)
				}
			})
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-prompt-ids", "1", "-fuse"}, strings.NewReader(""), &out, &errb, nil); code != exitUsage || !strings.Contains(errb.String(), "-fuse") {
		t.Errorf("-fuse without -adapter: exit %d, %q", code, errb.String())
	}
	if code := run([]string{"-model", filepath.Join(refDir, "llama3"), "-prompt-ids", "1", "-adapter", t.TempDir()}, strings.NewReader(""), &out, &errb, nil); code == 0 || !strings.Contains(errb.String(), "adapter_model.safetensors") {
		t.Errorf("-adapter of an empty folder: exit %d, %q", code, errb.String())
	}
}

// TestServeAdapter runs `run serve -adapter tuned=DIR` on the demo model
// with a random PEFT adapter: /v1/models lists it, and a completion naming
// it runs it (different text from the base's) and carries its name.
func TestServeAdapter(t *testing.T) {
	const D, F, r = 256, 768, 2 // tinycode-llama
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 1))
	h := map[string]any{}
	var data []byte
	for i := range 4 {
		for _, m := range []struct {
			name    string
			in, out int
		}{{"mlp.up_proj", D, F}, {"mlp.down_proj", F, D}} {
			p := fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_", i, m.name)
			for _, tn := range []struct {
				name       string
				rows, cols int
			}{{p + "A.weight", r, m.in}, {p + "B.weight", m.out, r}} {
				h[tn.name] = map[string]any{"dtype": "F32", "shape": []int{tn.rows, tn.cols}, "data_offsets": []int{len(data), len(data) + 4*tn.rows*tn.cols}}
				for range tn.rows * tn.cols {
					data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(rng.NormFloat64()*0.3)))
				}
			}
		}
	}
	hb, _ := json.Marshal(h)
	st := append(binary.LittleEndian.AppendUint64(nil, uint64(len(hb))), append(hb, data...)...)
	if err := os.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), st, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(`{"peft_type":"LORA","r":2,"lora_alpha":4}`), 0o644); err != nil {
		t.Fatal(err)
	}

	pr, pw := io.Pipe()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	intr := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"serve", "-addr", "127.0.0.1:0", "-parallel", "1", "-ctx", "128", "-v", "-adapter", "tuned=" + dir}, strings.NewReader(""), io.Discard, pw, intr)
		pw.Close()
	}()
	var url string
	for l := <-lines; !strings.Contains(l, "server ready"); l = <-lines {
		if _, rest, ok := strings.Cut(l, "listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
	}
	get := func(model string) (string, string) {
		t.Helper()
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(fmt.Sprintf(`{"model":%q,"prompt":"def f():","max_tokens":8,"temperature":0}`, model)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c struct {
			Model   string `json:"model"`
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 {
			t.Fatalf("model %q: %d %v", model, resp.StatusCode, err)
		}
		return c.Model, c.Choices[0].Text
	}
	baseModel, base := get("")
	tunedModel, tuned := get("tuned")
	if tunedModel != "tuned" || baseModel == "tuned" || tuned == base {
		t.Errorf("base %q from %q, tuned %q from %q", base, baseModel, tuned, tunedModel)
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":"tuned"`) {
		t.Errorf("/v1/models: %s", b)
	}
	intr <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", c)
	}
}

// TestServeAdapterFlag: -adapter takes NAME=DIR.
func TestServeAdapterFlag(t *testing.T) {
	for _, a := range []string{"nodir", "=dir", "name="} {
		var out, errb bytes.Buffer
		if code := run([]string{"serve", "-adapter", a}, strings.NewReader(""), &out, &errb, nil); code != exitUsage || !strings.Contains(errb.String(), "-adapter") {
			t.Errorf("-adapter %s: exit %d, %q", a, code, errb.String())
		}
	}
}
