package model

import (
	"math"
	"testing"
)

// TestRoPETypes checks the scaled frequencies against the formulas written out
// independently (in float64) for each rope type.
func TestRoPETypes(t *testing.T) {
	base := func(theta float64, dim int) []float64 {
		f := make([]float64, dim/2)
		for i := range f {
			f[i] = 1 / math.Pow(theta, float64(2*i)/float64(dim))
		}
		return f
	}
	cfg := func(rope string) *Config {
		c, err := parseConfig([]byte(`{"architectures":["Phi3ForCausalLM"],"hidden_size":64,"intermediate_size":8,"num_hidden_layers":1,
			"num_attention_heads":4,"vocab_size":8,"max_position_embeddings":131072,"original_max_position_embeddings":4096,"rope_theta":10000,"rope_scaling":` + rope + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	check := func(name string, got []float32, want []float64) {
		t.Helper()
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-6*want[0] {
				t.Errorf("%s: inv_freq[%d] = %g, want %g", name, i, got[i], want[i])
			}
		}
	}
	def := base(10000, 16)

	r, err := newRoPE(cfg(`{"type":"linear","factor":4}`), 4096)
	if err != nil {
		t.Fatal(err)
	}
	lin := make([]float64, len(def))
	for i := range def {
		lin[i] = def[i] / 4
	}
	check("linear", r.InvFreq, lin)

	long, short := make([]float64, 8), make([]float64, 8)
	for i := range long {
		long[i], short[i] = 1+float64(i), 1+float64(i)/10
	}
	lr := func(ctx int) []float32 {
		js := `{"type":"longrope","long_factor":[1,2,3,4,5,6,7,8],"short_factor":[1,1.1,1.2,1.3,1.4,1.5,1.6,1.7]}`
		r, err := newRoPE(cfg(js), ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := math.Sqrt(1 + math.Log(32)/math.Log(4096)); math.Abs(float64(r.Scale)-want) > 1e-6 {
			t.Errorf("longrope scale %g, want %g", r.Scale, want)
		}
		return r.InvFreq
	}
	want := make([]float64, 8)
	for i := range want {
		want[i] = def[i] / short[i]
	}
	check("longrope short", lr(4096), want)
	for i := range want {
		want[i] = def[i] / long[i]
	}
	check("longrope long", lr(8192), want)

	if _, err := newRoPE(cfg(`{"type":"longrope","long_factor":[1],"short_factor":[1]}`), 4096); err == nil {
		t.Error("longrope with too few factors loaded")
	}
	if _, err := newRoPE(cfg(`{"type":"dynamic","factor":2}`), 4096); err == nil {
		t.Error("dynamic rope loaded; it is not supported and must say so")
	}
}
