package main

import (
	"encoding/json"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
)

// TestJSONMetalCounters: -v -json on metal-emu reports the device's work per
// decoded token under timings.metal.
func TestJSONMetalCounters(t *testing.T) {
	msltest.Require(t)
	out, _ := runCLI(t, "-backend", "metal-emu", "-prompt-ids", "4094,1,2", "-n", "4", "-temp", "0", "-ignore-eos", "-v", "-json", "-ctx", "32")
	var got struct {
		Timings struct {
			Metal map[string]float64 `json:"metal"`
		} `json:"timings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	m := got.Timings.Metal
	t.Logf("per decoded token: %v", m)
	for _, k := range []string{"dispatches", "command_buffers", "cpu_waits", "weight_bytes", "kv_bytes", "objc_calls", "ttft_s"} {
		if !(m[k] > 0) {
			t.Errorf("timings.metal.%s = %v, want > 0", k, m[k])
		}
	}
	// tinycode: 4 layers, 2 KV heads of 32, f16 by default; 3 + 1…3 cached tokens.
	if want := float64(4*2*2*32*2) * (4 + 5 + 6) / 3; m["kv_bytes"] != want {
		t.Errorf("kv_bytes = %v, want %v", m["kv_bytes"], want)
	}
	if m["tokens"] != 3 {
		t.Errorf("tokens = %v, want 3 (the decoded tokens after the first)", m["tokens"])
	}
}
