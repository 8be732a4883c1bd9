package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot"
)

// TestPerplexity: `run perplexity -json` prints the perplexity the library
// computes for the same windows (reading a file and standard input), and bad
// flags exit 2 naming the flag.
func TestPerplexity(t *testing.T) {
	dir := filepath.Join(refDir, "tinycode-llama")
	text := strings.Repeat("import os\n\ndef main():\n    print(os.getcwd())\n\n", 12)
	file := filepath.Join(t.TempDir(), "t.py")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ingot.Load(context.Background(), dir, ingot.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.RollingLogprob(context.Background(), text, ingot.RollingOptions{Stride: 40})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{file, "-"} {
		var out, errb bytes.Buffer
		args := []string{"perplexity", "-model", dir, "-file", f, "-ctx", "64", "-stride", "40", "-threads", "2", "-json"}
		if code := run(args, strings.NewReader(text), &out, &errb, nil); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var got struct {
			PPL             float64 `json:"ppl"`
			Tokens, Windows int
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", out.String(), err)
		}
		if math.Abs(got.PPL-want.Perplexity()) > 1e-9*want.Perplexity() || got.Tokens != len(want.Logprobs) || got.Windows != want.Windows || got.Windows < 3 {
			t.Errorf("-file %s: %+v, want ppl %v over %d tokens in %d windows", f, got, want.Perplexity(), len(want.Logprobs), want.Windows)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"perplexity", "-model", dir}, "-file"},
		{[]string{"perplexity", "-model", dir, "-file", file, "-ctx", "16", "-stride", "16"}, "-stride 16"},
		{[]string{"perplexity", "-model", dir, "-file", file, "-ctx", "1"}, "-ctx 1"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), &out, &errb, nil); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", tc.args, code, errb.String(), tc.want)
		}
	}
}
