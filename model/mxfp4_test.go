package model

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// quantMXFP4 quantizes w (rows, cols) to MXFP4 as the OCP spec's reference
// conversion does: per block of 32, the shared scale X = 2^(⌊log2 amax⌋ − 2)
// (2 the largest E2M1 exponent; stored as e = that exponent + 127, 127 for an
// all-zero block), then each w/X to the nearest FP4 value (the first of two
// equally near ones; |w/X| < 8 saturates at 6). It returns the codes (element
// 2j in the low nibble of byte j) and the scale bytes.
func quantMXFP4(w []float32, rows, cols int) (codes, scales []byte) {
	nb := rows * cols / 32
	codes, scales = make([]byte, nb*16), make([]byte, nb)
	for b := range nb {
		x := w[b*32 : (b+1)*32]
		var amax float64
		for _, v := range x {
			amax = max(amax, math.Abs(float64(v)))
		}
		e := 127
		if amax > 0 {
			_, exp := math.Frexp(amax) // amax = f·2^exp, f ∈ [½, 1): ⌊log2 amax⌋ = exp − 1
			e = min(max(exp-1-2+127, 0), 254)
		}
		scales[b] = byte(e)
		s := cpu.E8M0(byte(e))
		for i, v := range x {
			best := 0
			for c := range cpu.FP4 {
				if math.Abs(float64(v/s-cpu.FP4[c])) < math.Abs(float64(v/s-cpu.FP4[best])) {
					best = c
				}
			}
			codes[b*16+i/2] |= byte(best) << (4 * (i % 2))
		}
	}
	return codes, scales
}

// dequantMXFP4 returns the values of quantMXFP4's codes and scales.
func dequantMXFP4(codes, scales []byte, rows, cols int) []float32 {
	out := make([]float32, rows*cols)
	for k := range out {
		q := codes[k/2] >> (4 * (k % 2)) & 15
		out[k] = cpu.FP4[q] * cpu.E8M0(scales[k/32])
	}
	return out
}

func f32Tensor(x []float32, shape ...int) *stTensor {
	return &stTensor{DType: "F32", Shape: shape, Data: bytesOfF32(x)}
}

// mxfp4Forms builds, from the gpt_oss reference model, its experts quantized
// to MXFP4 in Hugging Face's form (…_blocks, …_scales; config
// quantization_config.quant_method "mxfp4") and MLX's ({gate,up,down}_proj
// .weight U32, .scales, .bias; quantization mode "mxfp4"), and the float
// checkpoint of the dequantized experts. It returns the config and tensors of
// each.
func mxfp4Forms(t testing.TB) (cfg map[string]any, hf, mlx, flt map[string]*stTensor, c *Config) {
	src, _ := readRef(t, "gpt_oss")
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if c, err = parseConfig(b); err != nil {
		t.Fatal(err)
	}
	w, err := openWeights(src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	hf, mlx, flt = map[string]*stTensor{}, map[string]*stTensor{}, map[string]*stTensor{}
	for name, st := range w.tensors {
		if !strings.Contains(name, ".mlp.experts.") {
			hf[name], mlx[name], flt[name] = st, st, st
		}
	}
	E, F, D := c.NumExperts, c.MoEIntermediate, c.HiddenSize
	for i := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.mlp.experts.", i)
		get := func(name string) []float32 {
			v, err := toF32(w.tensors[p+name])
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		gu, dn, gub, dnb := get("gate_up_proj"), get("down_proj"), get("gate_up_proj_bias"), get("down_proj_bias")
		// output-major rows: gate_up (E·2F, D), down (E·D, F)
		guT, dnT := make([]float32, E*2*F*D), make([]float32, E*D*F)
		for e := range E {
			for d := range D {
				for r := range 2 * F {
					guT[(e*2*F+r)*D+d] = gu[(e*D+d)*2*F+r]
				}
				for f := range F {
					dnT[(e*D+d)*F+f] = dn[(e*F+f)*D+d]
				}
			}
		}
		guC, guS := quantMXFP4(guT, E*2*F, D)
		dnC, dnS := quantMXFP4(dnT, E*D, F)
		hf[p+"gate_up_proj_blocks"] = &stTensor{DType: "U8", Shape: []int{E, 2 * F, D / 32, 16}, Data: guC}
		hf[p+"gate_up_proj_scales"] = &stTensor{DType: "U8", Shape: []int{E, 2 * F, D / 32}, Data: guS}
		hf[p+"down_proj_blocks"] = &stTensor{DType: "U8", Shape: []int{E, D, F / 32, 16}, Data: dnC}
		hf[p+"down_proj_scales"] = &stTensor{DType: "U8", Shape: []int{E, D, F / 32}, Data: dnS}
		hf[p+"gate_up_proj_bias"], hf[p+"down_proj_bias"] = w.tensors[p+"gate_up_proj_bias"], w.tensors[p+"down_proj_bias"]

		// MLX: gate rows are the even rows, up the odd (mlx-lm's sanitize)
		var gC, uC, gS, uS []byte
		bg, bu := make([]float32, E*F), make([]float32, E*F)
		for r := range E * F {
			gC, uC = append(gC, guC[2*r*D/2:(2*r+1)*D/2]...), append(uC, guC[(2*r+1)*D/2:(2*r+2)*D/2]...)
			gS, uS = append(gS, guS[2*r*D/32:(2*r+1)*D/32]...), append(uS, guS[(2*r+1)*D/32:(2*r+2)*D/32]...)
			bg[r], bu[r] = gub[2*r], gub[2*r+1]
		}
		for _, m := range []struct {
			name       string
			codes, sc  []byte
			bias       []float32
			rows, cols int
		}{{"gate_proj", gC, gS, bg, F, D}, {"up_proj", uC, uS, bu, F, D}, {"down_proj", dnC, dnS, dnb, D, F}} {
			mlx[p+m.name+".weight"] = &stTensor{DType: "U32", Shape: []int{E, m.rows, m.cols / 8}, Data: m.codes}
			mlx[p+m.name+".scales"] = &stTensor{DType: "U8", Shape: []int{E, m.rows, m.cols / 32}, Data: m.sc}
			mlx[p+m.name+".bias"] = f32Tensor(m.bias, E, m.rows)
		}

		// the float checkpoint of the dequantized experts, input-major
		guQ, dnQ := dequantMXFP4(guC, guS, E*2*F, D), dequantMXFP4(dnC, dnS, E*D, F)
		guF, dnF := make([]float32, len(gu)), make([]float32, len(dn))
		for e := range E {
			for d := range D {
				for r := range 2 * F {
					guF[(e*D+d)*2*F+r] = guQ[(e*2*F+r)*D+d]
				}
				for f := range F {
					dnF[(e*F+f)*D+d] = dnQ[(e*D+d)*F+f]
				}
			}
		}
		flt[p+"gate_up_proj"], flt[p+"down_proj"] = f32Tensor(guF, E, D, 2*F), f32Tensor(dnF, E, F, D)
		flt[p+"gate_up_proj_bias"], flt[p+"down_proj_bias"] = hf[p+"gate_up_proj_bias"], hf[p+"down_proj_bias"]
	}
	return cfg, hf, mlx, flt, c
}

// writeModel writes cfg (with the key set to quant unless nil) and ts as a
// model folder.
func writeModel(t *testing.T, cfg map[string]any, key string, quant any, ts map[string]*stTensor) string {
	t.Helper()
	c := map[string]any{}
	for k, v := range cfg {
		c[k] = v
	}
	if quant != nil {
		c[key] = quant
	}
	dir := t.TempDir()
	cb, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cb, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), ts)
	return dir
}

// TestMXFP4GptOss loads gpt_oss with MXFP4 experts in both checkpoint forms
// and checks its logits (a prefill, then a decode step) against the float
// model of the same, dequantized, experts, on the CPU backend and on
// metal-emu; and that the experts count 17 bytes per 32 weights.
func TestMXFP4GptOss(t *testing.T) {
	cfg, hf, mlx, flt, c := mxfp4Forms(t)
	_, ref := readRef(t, "gpt_oss")
	dirs := map[string]string{
		"hf":  writeModel(t, cfg, "quantization_config", map[string]any{"quant_method": "mxfp4", "modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}, hf),
		"mlx": writeModel(t, cfg, "quantization", map[string]any{"group_size": 32, "bits": 4, "mode": "mxfp4"}, mlx),
	}
	fltDir := writeModel(t, cfg, "", nil, flt)
	ids := ref.InputIDs
	run := func(t *testing.T, dir string, b kernels.Backend) (logits [2][]float32, weights, active int64) {
		s := open(t, dir, Options{Threads: 2, Backend: b}, SessionOptions{})
		for i, part := range [][]int32{ids[:len(ids)-1], ids[len(ids)-1:]} {
			l, err := s.Forward(context.Background(), part)
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = slices.Clone(l)
		}
		return logits, s.m.WeightBytes(), s.m.ActiveWeightBytes()
	}
	want, fw, fa := run(t, fltDir, nil)
	E, F, D, Lyr := int64(c.NumExperts), int64(c.MoEIntermediate), int64(c.HiddenSize), int64(c.NumLayers)
	experts := Lyr * E * 3 * F * D // expert weights, biases aside
	for _, bn := range []string{"cpu", "metal-emu"} {
		for _, form := range []string{"hf", "mlx"} {
			t.Run(bn+"/"+form, func(t *testing.T) {
				var b kernels.Backend
				if bn == "metal-emu" {
					msltest.Require(t)
					var err error
					if b, err = kernels.Open("metal-emu", 1); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { b.Close() })
				}
				got, w, a := run(t, dirs[form], b)
				for i, step := range []string{"prefill", "decode"} {
					d := maxAbs(got[i], want[i])
					if d > 1e-5 {
						t.Errorf("%s: the mxfp4 experts' logits differ from the dequantized float model's by %g", step, d)
					}
					t.Logf("%s: max |Δlogit| %g", step, d)
				}
				// 17 bytes per 32 expert weights; a decode step reads k of E
				// experts, so its bytes shrink by (E−k)/E of theirs as well
				if wantW := fw - 4*experts + experts*17/32; w != wantW {
					t.Errorf("WeightBytes = %d, want %d (the float model's %d with the experts at 4.25 bits)", w, wantW, fw)
				}
				k := int64(c.ExpertsPerToken)
				if wantA := fa - (4*experts-experts*17/32)*k/E; a != wantA {
					t.Errorf("ActiveWeightBytes = %d, want %d (float: %d)", a, wantA, fa)
				}
			})
		}
	}
}

// FuzzMXFP4Load: gpt_oss with MXFP4 experts (form 0: Hugging Face's, 1:
// MLX's) where one expert tensor (which) gets another dtype, another shape
// (dims, one byte a dimension) or a NaN scale byte (255) either loads or fails
// with an error naming that tensor; the loader never panics.
func FuzzMXFP4Load(f *testing.F) {
	cfg, hf, mlx, _, _ := mxfp4Forms(f)
	forms := [2]map[string]*stTensor{hf, mlx}
	quant := [2][2]any{
		{"quantization_config", map[string]any{"quant_method": "mxfp4"}},
		{"quantization", map[string]any{"group_size": 32, "bits": 4, "mode": "mxfp4"}},
	}
	var names [2][]string // each form's expert tensors
	for i, ts := range forms {
		for name := range ts {
			if strings.Contains(name, ".mlp.experts.") {
				names[i] = append(names[i], name)
			}
		}
		slices.Sort(names[i])
	}
	for form := range 2 {
		f.Add(uint8(form), uint8(0), uint8(0), false, []byte{})
		for which := range len(names[form]) {
			f.Add(uint8(form), uint8(which), uint8(1+which%5), false, []byte{})     // another dtype
			f.Add(uint8(form), uint8(which), uint8(0), false, []byte{4, 64, 2, 16}) // another shape
			f.Add(uint8(form), uint8(which), uint8(0), true, []byte{})              // a NaN scale
		}
	}
	b := kernels.NewCPU(1)
	f.Cleanup(func() { b.Close() })
	f.Fuzz(func(t *testing.T, form, which, dtype uint8, nan bool, dims []byte) {
		form %= 2
		ts := map[string]*stTensor{}
		for name, st := range forms[form] {
			c := *st
			c.Name = name
			ts[name] = &c
		}
		name := names[form][int(which)%len(names[form])]
		st := ts[name]
		dt := []string{st.DType, "U8", "U32", "F32", "BF16", "I8"}[dtype%6]
		shape := st.Shape
		if len(dims) > 0 && len(dims) <= 5 {
			shape = nil
			for _, d := range dims {
				shape = append(shape, int(d))
			}
		}
		n := stDTypeSize[dt]
		for _, d := range shape {
			n *= d
		}
		if n > 1<<20 {
			return
		}
		if dt != st.DType || !slices.Equal(shape, st.Shape) {
			st.DType, st.Shape, st.Data = dt, shape, make([]byte, n)
		}
		nan = nan && strings.HasSuffix(name, "scales") && len(st.Data) > 0
		if nan {
			st.Data = slices.Clone(st.Data)
			st.Data[len(st.Data)/2] = 255
		}
		cb, err := json.Marshal(withKey(cfg, quant[form][0].(string), quant[form][1]))
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig(cb)
		if err != nil {
			t.Fatal(err)
		}
		q, err := parseQuant(c)
		if err != nil {
			t.Fatal(err)
		}
		l := &loader{files: &weightFiles{tensors: ts}, b: b, quant: q, used: map[string]bool{}}
		_, err = newLlama(c, architectures[c.Arch()], l)
		switch {
		case err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", name)):
			t.Fatalf("%s %s%v: error does not name the tensor: %v", name, st.DType, st.Shape, err)
		case err == nil && nan:
			t.Fatalf("%s with a scale byte of 255 (NaN) loaded", name)
		}
	})
}

// withKey returns a copy of cfg with key set to v.
func withKey(cfg map[string]any, key string, v any) map[string]any {
	c := map[string]any{key: v}
	for k, x := range cfg {
		if k != key {
			c[k] = x
		}
	}
	return c
}

// TestParseQuantMXFP4: the quantization blocks of MXFP4 checkpoints parse, and
// modes and shapes ingot cannot run fail naming the field.
func TestParseQuantMXFP4(t *testing.T) {
	for _, tc := range []struct {
		field, json string
		mode        string // of the default; "" with err
		err         string
	}{
		{"quantization_config", `{"quant_method":"mxfp4","modules_to_not_convert":["model.layers.*.self_attn"]}`, "mxfp4", ""},
		{"quantization", `{"group_size":32,"bits":4,"mode":"mxfp4","model.layers.0.mlp.router":{"group_size":64,"bits":8}}`, "mxfp4", ""},
		{"quantization", `{"group_size":64,"bits":4,"mode":"affine"}`, "affine", ""},
		{"quantization", `{"group_size":64,"bits":4,"mode":"mxfp4"}`, "", `quantization: mode "mxfp4" needs bits 4 and group_size 32`},
		{"quantization", `{"group_size":32,"bits":4,"mode":"nvfp4"}`, "", `quantization.mode "nvfp4" is not supported`},
		{"quantization", `{"group_size":32,"bits":4,"mode":"mxfp4","model.layers.0.mlp.router":{"group_size":64,"bits":8,"mode":"mxfp4"}}`, "", `quantization["model.layers.0.mlp.router"]: mode "mxfp4" needs bits 4`},
		{"quantization_config", `{"quant_method":"fp8"}`, "", `quantization_config.quant_method "fp8" is not supported`},
	} {
		c := &Config{}
		if tc.field == "quantization" {
			c.Quantization = json.RawMessage(tc.json)
		} else {
			c.QuantizationConfig = json.RawMessage(tc.json)
		}
		q, err := parseQuant(c)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got error %v, want one containing %q", tc.json, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.json, err)
		case tc.err == "" && q.Mode != tc.mode && !(tc.mode == "affine" && q.Mode == ""):
			t.Errorf("%s: mode %q, want %q", tc.json, q.Mode, tc.mode)
		case tc.err == "" && strings.Contains(tc.json, "router") && q.forModule("model.layers.0.mlp.router").Mode != "":
			t.Errorf("%s: the router's override is mode %q, want affine", tc.json, q.forModule("model.layers.0.mlp.router").Mode)
		}
	}
}

// TestQuantString: the load line's name for each quantization.
func TestQuantString(t *testing.T) {
	for _, tc := range []struct {
		q    *quantConfig
		want string
	}{
		{nil, "none"},
		{&quantConfig{Bits: 4, GroupSize: 64}, "q4/g64"},
		{&quantConfig{Bits: 4, GroupSize: 32, Mode: "mxfp4", override: map[string]*quantConfig{"model.layers.0.mlp.router": {Bits: 8, GroupSize: 64}}}, "mxfp4, 1 module overridden"},
	} {
		if got := tc.q.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.q, got, tc.want)
		}
	}
}
