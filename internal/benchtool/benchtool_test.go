package benchtool

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONContract runs a tiny benchmark and checks the fields machines read.
func TestJSONContract(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"-shape", "qwen2.5-0.5b", "-dtype", "q4", "-test", "pp8,tg4", "-reps", "2", "-threads", "2", "-json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out.String())
	}
	if len(rows) != 2 || rows[0]["test"] != "pp8" || rows[1]["test"] != "tg4" {
		t.Fatalf("rows %v", rows)
	}
	for _, r := range rows {
		for _, k := range []string{"model", "dtype", "backend", "threads", "test", "tok_s", "tok_s_sd", "gb_s", "bw_fraction"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks %q", r["test"], k)
			}
		}
		if r["tok_s"].(float64) <= 0 || r["bw_fraction"].(float64) <= 0 || r["dtype"] != "q4" || r["threads"].(float64) != 2 {
			t.Errorf("row %v", r)
		}
	}
	if !strings.Contains(errb.String(), "tg4 rep") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

func TestParseTests(t *testing.T) {
	ts, err := parseTests("pp512, tg128")
	if err != nil || len(ts) != 2 || !ts[0].prefill || ts[0].n != 512 || ts[1].prefill || ts[1].n != 128 {
		t.Errorf("parseTests: %v %v", ts, err)
	}
	for _, bad := range []string{"", "pp", "xx12", "tg0", "pp-1"} {
		if _, err := parseTests(bad); err == nil {
			t.Errorf("parseTests(%q) succeeded", bad)
		}
	}
}
