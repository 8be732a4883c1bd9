package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
)

// TestMetalEmuGreedy runs the shipped Metal kernels through the MSL interpreter
// from the CLI: every tinycode prompt (bf16, q4, q8) must give transformers'
// greedy ids.
func TestMetalEmuGreedy(t *testing.T) {
	msltest.Require(t)
	for _, name := range []string{"tinycode-llama", "tinycode-llama-q4", "tinycode-llama-q8"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			var ref struct {
				Prompts []struct {
					PromptIDs []int32 `json:"prompt_ids"`
					OutputIDs []int32 `json:"output_ids"`
				} `json:"prompts"`
			}
			b, _ := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			for i, p := range ref.Prompts {
				out, _ := runCLI(t, "-backend", "metal-emu", "-model", dir, "-prompt-ids", commaIDs(p.PromptIDs), "-temp", "0",
					"-n", fmt.Sprint(len(p.OutputIDs)), "-json")
				var got jsonResult
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.IDs, p.OutputIDs) {
					t.Errorf("prompt %d:\n got %v\nwant %v", i, got.IDs, p.OutputIDs)
				}
			}
		})
	}
}

// TestSelftestMetalEmu: the selftest passes on the interpreter, and its report has
// a row per op and the end-to-end line.
func TestSelftestMetalEmu(t *testing.T) {
	msltest.Require(t)
	out, _ := runCLI(t, "selftest", "-backend", "metal-emu")
	for _, want := range []string{"backend: metal:msl-interpreter", "device: msl-interpreter", "max working set:", "what to send us:", "matmul", "w=q4 L=9", "attention", "rmsnorm", "end to end", "all passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
