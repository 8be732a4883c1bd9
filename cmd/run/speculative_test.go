package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSpeculativeFlags: -draft (the q4 copy) and -lookup print the ids of
// plain greedy decoding, -v reports the acceptance, and a draft of another
// vocabulary or both flags at once are errors naming the flag.
func TestSpeculativeFlags(t *testing.T) {
	dir := filepath.Join(refDir, "tinycode-llama")
	base := []string{"-model", dir, "-prompt", "class Stack:\n    def push(self, x):\n", "-temp", "0", "-n", "40", "-ignore-eos", "-threads", "2", "-json"}
	ids := func(stdout string) []int32 {
		var r struct{ IDs []int32 }
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("%s: %v", stdout, err)
		}
		return r.IDs
	}
	plain, _ := runCLI(t, base...)
	want := ids(plain)
	for _, extra := range [][]string{{"-draft", filepath.Join(refDir, "tinycode-llama-q4")}, {"-draft", filepath.Join(refDir, "tinycode-llama-q4"), "-draft-max", "2"}, {"-lookup", "5"}} {
		out, errs := runCLI(t, append(append(slices.Clone(base), extra...), "-v")...)
		if got := ids(out); !slices.Equal(got, want) || len(got) != 40 {
			t.Errorf("%v: ids %v, plain %v", extra, got, want)
		}
		if !strings.Contains(errs, "drafted tokens accepted") {
			t.Errorf("%v -v: no acceptance report in\n%s", extra, errs)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-draft", filepath.Join(refDir, "llama2")}, exitError, "-draft"},
		{[]string{"-draft", dir, "-lookup", "3"}, exitUsage, "-draft or -lookup"},
		{[]string{"-lookup", "-1"}, exitUsage, "-lookup"},
		{[]string{"-draft-max", "-1"}, exitUsage, "-draft-max"},
	} {
		var out, errb bytes.Buffer
		args := append(slices.Clone(base), tc.args...)
		if code := run(args, strings.NewReader(""), &out, &errb, nil); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %s", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
