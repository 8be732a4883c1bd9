package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const refDir = "../../../shared/testdata/ref"

func runCLI(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("run %v: exit %d\n%s", args, code, errb.String())
	}
	return out.String(), errb.String()
}

func commaIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, v := range ids {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

// TestJSONReference checks the -json contract on every reference model: greedy ids
// equal transformers' greedy_nostop, and the first logprob equals log_softmax of the
// reference logits at the chosen id.
func TestJSONReference(t *testing.T) {
	for _, name := range []string{"llama2", "llama3", "llama3-bf16", "llama3-f16", "mistral", "qwen2", "qwen2-bf16", "qwen2-f16",
		"qwen3", "gemma", "gemma2", "gemma2-swa", "phi3", "long-llama3", "long-mistral"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			var ref struct {
				InputIDs     []int32   `json:"input_ids"`
				GreedyNoStop []int32   `json:"greedy_nostop"`
				LogitsLast   []float64 `json:"logits_last"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			out, stderr := runCLI(t, "-model", dir, "-prompt-ids", commaIDs(ref.InputIDs), "-temp", "0", "-n", "16", "-ignore-eos", "-json")
			var got jsonResult
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
			}
			if !slices.Equal(got.IDs, ref.GreedyNoStop) || !slices.Equal(got.PromptIDs, ref.InputIDs) {
				t.Errorf("ids %v, want %v", got.IDs, ref.GreedyNoStop)
			}
			if got.Stop != "length" || got.Timings.GenTokens != 16 || got.Timings.PromptTokens != len(ref.InputIDs) || len(got.Logprobs) != 16 {
				t.Errorf("stop %q, timings %+v, %d logprobs", got.Stop, got.Timings, len(got.Logprobs))
			}
			mx := slices.Max(ref.LogitsLast)
			var z float64
			for _, l := range ref.LogitsLast {
				z += math.Exp(l - mx)
			}
			want := ref.LogitsLast[got.IDs[0]] - mx - math.Log(z)
			if d := math.Abs(float64(got.Logprobs[0]) - want); d > 1e-3 {
				t.Errorf("logprobs[0] = %v, log_softmax of the reference = %v", got.Logprobs[0], want)
			}
			if !strings.Contains(stderr, "tok/s") {
				t.Errorf("stderr has no throughput: %q", stderr)
			}
		})
	}
}

// TestTinycodeText runs the 8 reference prompts as text through the model's own
// tokenizer and compares ids and decoded text with transformers.
func TestTinycodeText(t *testing.T) {
	for _, name := range []string{"tinycode-llama", "tinycode-llama-q4", "tinycode-llama-q8"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			var ref struct {
				Prompts []struct {
					Prompt     string  `json:"prompt"`
					PromptIDs  []int32 `json:"prompt_ids"`
					OutputIDs  []int32 `json:"output_ids"`
					OutputText string  `json:"output_text"`
				} `json:"prompts"`
			}
			b, _ := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			for _, p := range ref.Prompts {
				out, _ := runCLI(t, "-model", dir, "-prompt", p.Prompt, "-temp", "0", "-n", fmt.Sprint(len(p.OutputIDs)), "-json")
				var got jsonResult
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.PromptIDs, p.PromptIDs) {
					t.Errorf("%q: prompt ids %v, want %v", p.Prompt, got.PromptIDs, p.PromptIDs)
				}
				if !slices.Equal(got.IDs, p.OutputIDs) || got.Text != p.OutputText {
					t.Errorf("%q:\n got %v %q\nwant %v %q", p.Prompt, got.IDs, got.Text, p.OutputIDs, p.OutputText)
				}
			}
		})
	}
}

// TestDemoStreams runs the built-in model with no -model flag: text streams to
// stdout, statistics to stderr.
func TestDemoStreams(t *testing.T) {
	out, stderr := runCLI(t, "-prompt", "def __init__(self", "-temp", "0", "-n", "12")
	if !strings.HasPrefix(out, ", config):\n    super().__init__()") {
		t.Errorf("demo output %q", out)
	}
	if !strings.Contains(stderr, "loaded") || !strings.Contains(stderr, "tok/s") {
		t.Errorf("stderr %q", stderr)
	}
}

// TestCLIErrors: bad flags and inputs exit non-zero with a message.
func TestCLIErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "nothing to do"},
		{[]string{"-prompt-ids", "1,x"}, `"x" is not a token id`},
		{[]string{"-model", "/nonexistent", "-prompt-ids", "1"}, "config.json"},
		{[]string{"-backend", "tpu", "-prompt-ids", "1"}, "unknown backend"},
		{[]string{"-kv", "q8", "-prompt-ids", "1"}, "-kv: model: KV cache type q8: want f32 or f16"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb); code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("run %v: exit %d, stderr %q (want %q)", tc.args, code, errb.String(), tc.want)
		}
	}
}
