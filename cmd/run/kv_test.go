package main

import (
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
)

// TestKVDefault: without -kv the KV cache is f16 on Metal (here the
// interpreter) and f32 on the CPU; -kv f32 gets f32 on Metal.
func TestKVDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "cpu"}, "a f32 KV cache"},
		{[]string{"-backend", "metal-emu"}, "a f16 KV cache"},
		{[]string{"-backend", "metal-emu", "-kv", "f32"}, "a f32 KV cache"},
		{[]string{"-backend", "cpu", "-kv", "f16"}, "a f16 KV cache"},
	} {
		if tc.args[1] == "metal-emu" {
			msltest.Require(t)
		}
		_, stderr := runCLI(t, append(tc.args, "-prompt-ids", "1,2", "-n", "1", "-temp", "0", "-v", "-ctx", "32")...)
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", tc.args, tc.want, stderr)
		}
	}
}
