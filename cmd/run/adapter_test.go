package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestServeAdapterFlag: -adapter takes NAME=DIR.
func TestServeAdapterFlag(t *testing.T) {
	for _, a := range []string{"nodir", "=dir", "name="} {
		var out, errb bytes.Buffer
		if code := run([]string{"serve", "-adapter", a}, strings.NewReader(""), &out, &errb, nil); code != exitUsage || !strings.Contains(errb.String(), "-adapter") {
			t.Errorf("-adapter %s: exit %d, %q", a, code, errb.String())
		}
	}
}
