package benchtool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestJSONContract runs a tiny benchmark and checks the fields machines read.
func TestJSONContract(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"-shape", "qwen2.5-0.5b", "-dtype", "q4", "-test", "pp8,tg4,tg4@d9,tg40", "-reps", "2", "-threads", "2", "-json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out.String())
	}
	if len(rows) != 4 || rows[0]["test"] != "pp8" || rows[1]["test"] != "tg4" || rows[2]["test"] != "tg4@d9" || rows[3]["test"] != "tg40" {
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
		// tg40 decodes in two stretches between probes (32 and 8 tokens)
		if f := r["gb_s"].(float64) / r["bandwidth_gb_s"].(float64); math.Abs(f/r["bw_fraction"].(float64)-1) > 1e-9 {
			t.Errorf("row %v: gb_s / bandwidth_gb_s = %g, not bw_fraction", r["test"], f)
		}
	}
	if !strings.Contains(errb.String(), "tg4 rep") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

// TestKVFlag runs a decode at depth over an f16 KV cache and rejects other
// cache types.
func TestKVFlag(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"-shape", "qwen2.5-0.5b", "-dtype", "q8", "-kv", "f16", "-test", "tg2@d5,attn16", "-reps", "1", "-threads", "2", "-json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("rows %v (%v)\n%s", rows, err, out.String())
	}
	for _, r := range rows {
		if r["kv"] != "f16" || r["tok_s"].(float64) <= 0 {
			t.Errorf("row %v", r)
		}
	}
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), []string{"-kv", "bf16", "-test", "tg1"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "-kv: model: KV cache type bf16: want f32 or f16") {
		t.Errorf("-kv bf16: exit %d, stderr %q", code, errb.String())
	}
}

func TestParseTests(t *testing.T) {
	ts, err := parseTests("pp512, tg128")
	if err != nil || len(ts) != 2 || !ts[0].prefill || ts[0].n != 512 || ts[1].prefill || ts[1].n != 128 {
		t.Errorf("parseTests: %v %v", ts, err)
	}
	ts, err = parseTests("mv,mm64,norm,rope,attn256")
	if err != nil || len(ts) != 5 || !ts[0].kernel || ts[1].n != 64 || ts[4].name != "attn256" || ts[4].n != 256 {
		t.Errorf("parseTests kernels: %v %v", ts, err)
	}
	ts, err = parseTests("tg128@d1024,pp64@d7")
	if err != nil || len(ts) != 2 || ts[0].n != 128 || ts[0].depth != 1024 || ts[0].name != "tg128@d1024" || !ts[1].prefill || ts[1].depth != 7 {
		t.Errorf("parseTests with depth: %v %v", ts, err)
	}
	ts, err = parseTests("load,tg8")
	if err != nil || len(ts) != 2 || !ts[0].load || ts[0].kernel || ts[0].prefill || ts[1].load {
		t.Errorf("parseTests load: %v %v", ts, err)
	}
	for _, bad := range []string{"", "pp", "xx12", "tg0", "pp-1", "mm", "attn", "mv3", "norm2", "tg8@d0", "tg8@d", "tg8@dx", "mm8@d4", "tg8@4", "load2", "load@d4"} {
		if _, err := parseTests(bad); err == nil {
			t.Errorf("parseTests(%q) succeeded", bad)
		}
	}
}

// TestKernelRows runs each kernel test on a small shape: one row per matrix
// (mv, mmN), fused group (mvf) or op, with positive rates and the test:shape
// names.
func TestKernelRows(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"-shape", "qwen2.5-0.5b", "-dtype", "q8", "-test", "mv,mvc,mvf,mm16,norm,rope,attn32", "-reps", "1", "-threads", "2", "-json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out.String())
	}
	count := map[string]int{}
	shapes := map[string][2]int{} // "mv q": N, K
	for _, r := range rows {
		name := r["test"].(string)
		kind, shape, ok := strings.Cut(name, ":")
		if !ok {
			t.Errorf("row %q: want test:shape", name)
		}
		count[kind]++
		if r["tok_s"].(float64) <= 0 || r["us_per_call"].(float64) <= 0 || r["gflop_s"].(float64) <= 0 {
			t.Errorf("row %v", r)
		}
		// each row has the probe of its own moments
		if gb, bw, f := r["gb_s"].(float64), r["bandwidth_gb_s"].(float64), r["bw_fraction"].(float64); bw <= 0 || math.Abs(gb/bw-f) > 1e-9*f {
			t.Errorf("row %q: gb_s %g, bandwidth_gb_s %g, bw_fraction %g", name, gb, bw, f)
		}
		var what string
		var n, k int
		if _, err := fmt.Sscanf(shape, "%s %dx%d", &what, &n, &k); err == nil {
			shapes[kind+" "+what] = [2]int{n, k}
		}
	}
	// mvc runs whole four-row blocks of each mv matrix, no more than it has
	for key, mv := range shapes {
		what, ok := strings.CutPrefix(key, "mv ")
		if !ok {
			continue
		}
		c, found := shapes["mvc "+what]
		if !found || c[1] != mv[1] || c[0] > mv[0] || c[0] != mv[0] && c[0]%4 != 0 || what == "lm_head" && c[0] == mv[0] {
			t.Errorf("mvc %s: %v for mv %v", what, c, mv) // lm_head (V rows) outgrows any L2
		}
	}
	// q, kv, o, gate/up, down, lm_head; mm skips lm_head; mvf fuses qkv and gate+up
	if count["mv"] != 6 || count["mvc"] != 6 || count["mvf"] != 2 || count["mm16"] != 5 || count["norm"] != 1 || count["rope"] != 1 || count["attn32"] != 1 {
		t.Errorf("rows per test %v", count)
	}
}

// TestGGUFAsStored benches GGUF files as they store their weights (no
// -dtype): the row names the file's type mix and reads its bytes; -dtype q8
// quantizes only the float matrices on load, and says so.
func TestGGUFAsStored(t *testing.T) {
	const dir = "../../../shared/testdata/gguf/"
	row := func(file string, args ...string) Result {
		t.Helper()
		var out, errb bytes.Buffer
		args = append([]string{"-model", dir + file, "-test", "tg2", "-reps", "1", "-threads", "2", "-json"}, args...)
		if code := Main(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var rs []Result
		if err := json.Unmarshal(out.Bytes(), &rs); err != nil || len(rs) != 1 {
			t.Fatalf("%v: %s", err, out.String())
		}
		return rs[0]
	}
	if r := row("llama-Q4_K_M/model.gguf"); !strings.Contains(r.DType, "Q4_K") || !strings.Contains(r.DType, "Q6_K") {
		t.Errorf("Q4_K_M: dtype %q, want the file's type mix", r.DType)
	}
	f16, q8 := row("llama-F16/model.gguf"), row("llama-F16/model.gguf", "-dtype", "q8")
	if !strings.Contains(f16.DType, "F16") || !strings.HasPrefix(q8.DType, "q8 on load; ") || q8.WeightBytes >= f16.WeightBytes {
		t.Errorf("F16 file: as stored %q (%d weight bytes), -dtype q8 %q (%d)", f16.DType, f16.WeightBytes, q8.DType, q8.WeightBytes)
	}
}

// TestLoadRow runs the load test on a synthetic model and on an MLX q4
// directory quantized on load to q8: both rows time the load and a ready
// model, and on Linux the peak RSS (VmHWM, reset before the load) holds at
// least the weights.
func TestLoadRow(t *testing.T) {
	for _, args := range [][]string{
		{"-shape", "qwen2.5-0.5b", "-dtype", "q4"},
		{"-model", "../../../shared/testdata/ref/tinycode-llama-q4"},
		{"-model", "../../../shared/testdata/ref/llama3-f16", "-dtype", "q8"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), append(args, "-test", "load", "-threads", "2", "-json"), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var rs []Result
		if err := json.Unmarshal(out.Bytes(), &rs); err != nil || len(rs) != 1 {
			t.Fatalf("%v: %v: %s", args, err, out.String())
		}
		r := rs[0]
		if r.Test != "load" || !(r.LoadS > 0) || r.ReadyS < r.LoadS || r.WeightBytes <= 0 {
			t.Errorf("%v: row %+v: want load_s > 0, ready_s ≥ load_s and the weights' bytes", args, r)
		}
		if args[0] == "-model" && r.DType != map[string]string{"tinycode-llama-q4": "q4", "llama3-f16": "q8"}[filepath.Base(args[1])] {
			t.Errorf("%v: dtype %q", args, r.DType)
		}
		if runtime.GOOS != "windows" && !(r.CPUS > 0) {
			t.Errorf("%v: cpu_s = %v, want the load's CPU seconds", args, r.CPUS)
		}
		if runtime.GOOS == "linux" && (r.PeakRSSSrc != "VmHWM" || r.PeakRSS < r.WeightBytes) {
			t.Errorf("%v: peak RSS %d bytes (%q), want VmHWM of at least the %d weight bytes", args, r.PeakRSS, r.PeakRSSSrc, r.WeightBytes)
		}
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"-shape", "qwen2.5-0.5b", "-test", "tg2,load", "-reps", "1", "-threads", "2"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if s := out.String(); !strings.Contains(s, "tok/s") || !strings.Contains(s, "peak RSS GB") || !strings.Contains(s, " load ") {
		t.Errorf("table lacks the throughput or the load table:\n%s", s)
	}
}
