package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const refDir = "../../../shared/testdata/ref"

func runCLI(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, strings.NewReader(""), &out, &errb, nil); code != 0 {
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

// TestDemoStreams runs the built-in model with no -model flag: the prompt is
// echoed and the completion streams to stdout, statistics and a line saying
// what the demo is to stderr; -no-echo drops the prompt.
func TestDemoStreams(t *testing.T) {
	out, stderr := runCLI(t, "-prompt", "def __init__(self", "-temp", "0", "-n", "12")
	if !strings.HasPrefix(out, "def __init__(self, config):\n    super().__init__()") {
		t.Errorf("demo output %q", out)
	}
	if !strings.Contains(stderr, "built-in demo") || !strings.Contains(stderr, "loaded") || !strings.Contains(stderr, "tok/s") {
		t.Errorf("stderr %q", stderr)
	}
	out, _ = runCLI(t, "-prompt", "def __init__(self", "-temp", "0", "-n", "12", "-no-echo")
	if !strings.HasPrefix(out, ", config):\n    super().__init__()") {
		t.Errorf("-no-echo output %q", out)
	}
}

// TestDemoDefaults: the demo's own sampling settings give text that does not
// loop on one line (at llama.cpp's defaults the 4M model repeats a line ~20
// times); explicit flags still win.
func TestDemoDefaults(t *testing.T) {
	for seed := 1; seed <= 3; seed++ {
		out, _ := runCLI(t, "-prompt", "def fib(n):", "-seed", fmt.Sprint(seed))
		lines := map[string]int{}
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(l); len(l) > 8 {
				lines[l]++
			}
		}
		for l, n := range lines {
			if n > 3 {
				t.Errorf("seed %d: line %q repeated %d times:\n%s", seed, l, n, out)
			}
		}
	}
}

// TestCLIErrors: bad flags and inputs exit 2 (flags) or 1 with a message naming
// the flag or the problem, before loading anything.
func TestCLIErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "nothing to do"},
		{[]string{"-prompt-ids", "1,x"}, 2, `"x" is not a token id`},
		{[]string{"-backend", "tpu", "-prompt-ids", "1"}, 2, "-backend tpu: want auto, cpu, metal, cuda or metal-emu"},
		{[]string{"-kv", "q8", "-prompt-ids", "1"}, 2, "-kv q8: want f32 or f16"},
		{[]string{"-min-p", "2", "-prompt", "x"}, 2, "-min-p 2: want in [0, 1]"},
		{[]string{"-min-p", "-0.5", "-prompt", "x"}, 2, "-min-p -0.5"},
		{[]string{"-temp", "NaN", "-prompt", "x"}, 2, "-temp NaN: want a number ≥ 0"},
		{[]string{"-temp", "-1", "-prompt", "x"}, 2, "-temp -1"},
		{[]string{"-top-p", "2", "-prompt", "x"}, 2, "-top-p 2"},
		{[]string{"-top-k", "-5", "-prompt", "x"}, 2, "-top-k -5"},
		{[]string{"-repeat-penalty", "0", "-prompt", "x"}, 2, "-repeat-penalty 0: want a number > 0"},
		{[]string{"-threads", "-3", "-prompt", "x"}, 2, "-threads -3"},
		{[]string{"-threads", "1000", "-prompt", "x"}, 2, "-threads 1000: want in [0,"},
		{[]string{"-ctx", "-5", "-prompt", "x"}, 2, "-ctx -5"},
		{[]string{"-n", "-1", "-prompt", "x"}, 2, "-n -1"},
		{[]string{"-quant", "q5", "-prompt", "x"}, 2, "-quant q5"},
		{[]string{"-stop", "", "-prompt", "x"}, 2, "stop string 1 is empty"},
		{[]string{"-prompt", "x", "-prompt-ids", "1"}, 2, "not both"},
		{[]string{"-chat", "-json"}, 2, "-json"},
		{[]string{"-nosuchflag"}, 2, "flag provided but not defined"},
		{[]string{"-prompt", "x", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-model", "/nonexistent", "-prompt-ids", "1"}, 1, "no directory /nonexistent"},
		{[]string{"-model", "Qwen/Qwen3-0.6B", "-prompt-ids", "1"}, 1, "huggingface-cli download Qwen/Qwen3-0.6B"},
		{[]string{"-model", ggufFile(t), "-prompt-ids", "1"}, 1, "model.gguf: header: unexpected end of file"},
		{[]string{"-chat"}, 1, "no chat template"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), &out, &errb, nil); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("run %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}

func ggufFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(p, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVersion: -version prints the version, as a flag and as the first argument.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"-model", "x", "-version"}} {
		out, _ := runCLI(t, args...)
		if !strings.HasPrefix(out, "ingot ") {
			t.Errorf("run %v: %q", args, out)
		}
	}
}

// TestContextStop: a completion that fills the context window reports
// stop "context" and says how to get more.
func TestContextStop(t *testing.T) {
	out, stderr := runCLI(t, "-prompt-ids", "4094,1,2", "-temp", "0", "-ctx", "10", "-n", "0", "-ignore-eos", "-json")
	var got jsonResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Stop != "context" || len(got.IDs) != 8 || !strings.Contains(stderr, "raise -ctx") {
		t.Errorf("stop %q after %d ids; stderr %q", got.Stop, len(got.IDs), stderr)
	}
}

// signalOn is an io.Writer that sends SIGINT on intr the first time what was
// written contains trigger.
type signalOn struct {
	bytes.Buffer
	mu      sync.Mutex
	trigger string
	intr    chan os.Signal
	sent    bool
}

func (w *signalOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.Buffer.Write(p)
	if !w.sent && strings.Contains(w.Buffer.String(), w.trigger) {
		w.sent = true
		w.intr <- os.Interrupt
	}
	return n, err
}

func (w *signalOn) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Buffer.String()
}

// TestInterruptRun: Ctrl-C while generating stops within a token, prints the
// statistics and, with -json, the partial result with stop "cancelled"; the
// exit status is 130.
func TestInterruptRun(t *testing.T) {
	for _, jsonOut := range []bool{false, true} {
		intr := make(chan os.Signal, 1)
		args := []string{"-prompt", "def fib(n):", "-n", "0", "-ignore-eos", "-ctx", "2048"}
		if jsonOut {
			args = append(args, "-json")
		}
		var stdout bytes.Buffer
		stderr := &signalOn{trigger: "loaded", intr: intr} // Ctrl-C once the model is loaded
		out := &stdout
		code := run(args, strings.NewReader(""), out, stderr, intr)
		if code != exitInterrupted || !strings.Contains(stderr.String(), "tok/s") || !strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("json %v: exit %d, stderr %q", jsonOut, code, stderr.String())
		}
		if jsonOut {
			var got jsonResult
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("no partial JSON: %v %q", err, stdout.String())
			}
			if got.Stop != "cancelled" || len(got.IDs) > 2000 {
				t.Errorf("partial JSON: stop %q, %d ids", got.Stop, len(got.IDs))
			}
		}
	}
}
