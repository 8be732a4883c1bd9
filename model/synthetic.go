package model

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// shapes are real models' config.json (the parts that set the cost of a token),
// for benchmarks with synthetic weights: no download needed.
var shapes = map[string]string{
	"llama-3.2-1b": `{"architectures":["LlamaForCausalLM"],"hidden_size":2048,"intermediate_size":8192,"num_hidden_layers":16,
		"num_attention_heads":32,"num_key_value_heads":8,"head_dim":64,"vocab_size":128256,"tie_word_embeddings":true,"rms_norm_eps":1e-5,
		"max_position_embeddings":131072,"rope_scaling":{"rope_type":"llama3","factor":32,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192},"rope_theta":500000}`,
	"llama-3.2-3b": `{"architectures":["LlamaForCausalLM"],"hidden_size":3072,"intermediate_size":8192,"num_hidden_layers":28,
		"num_attention_heads":24,"num_key_value_heads":8,"head_dim":128,"vocab_size":128256,"tie_word_embeddings":true,"rms_norm_eps":1e-5,
		"max_position_embeddings":131072,"rope_scaling":{"rope_type":"llama3","factor":32,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192},"rope_theta":500000}`,
	"llama-3.1-8b": `{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"intermediate_size":14336,"num_hidden_layers":32,
		"num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"vocab_size":128256,"tie_word_embeddings":false,"rms_norm_eps":1e-5,
		"max_position_embeddings":131072,"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192},"rope_theta":500000}`,
	"qwen2.5-0.5b": `{"architectures":["Qwen2ForCausalLM"],"hidden_size":896,"intermediate_size":4864,"num_hidden_layers":24,
		"num_attention_heads":14,"num_key_value_heads":2,"vocab_size":151936,"tie_word_embeddings":true,"rms_norm_eps":1e-6,
		"max_position_embeddings":32768,"rope_theta":1000000}`,
	"qwen2.5-7b": `{"architectures":["Qwen2ForCausalLM"],"hidden_size":3584,"intermediate_size":18944,"num_hidden_layers":28,
		"num_attention_heads":28,"num_key_value_heads":4,"vocab_size":152064,"tie_word_embeddings":false,"rms_norm_eps":1e-6,
		"max_position_embeddings":32768,"rope_theta":1000000}`,
	"qwen3-30b-a3b": `{"architectures":["Qwen3MoeForCausalLM"],"hidden_size":2048,"intermediate_size":6144,"num_hidden_layers":48,
		"num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,"vocab_size":151936,"tie_word_embeddings":false,"rms_norm_eps":1e-6,
		"num_experts":128,"num_experts_per_tok":8,"moe_intermediate_size":768,"norm_topk_prob":true,"decoder_sparse_step":1,"mlp_only_layers":[],
		"max_position_embeddings":40960,"rope_theta":1000000}`,
	"mistral-7b": `{"architectures":["MistralForCausalLM"],"hidden_size":4096,"intermediate_size":14336,"num_hidden_layers":32,
		"num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"vocab_size":32768,"tie_word_embeddings":false,"rms_norm_eps":1e-5,
		"max_position_embeddings":32768,"rope_theta":1000000}`,
}

// ShapeNames lists the named shapes [Synthetic] knows.
func ShapeNames() []string {
	var s []string
	for k := range shapes {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// ShapeConfig returns the config.json of a named shape (see [ShapeNames]): the
// fields that set a token's cost, as Synthetic uses them.
func ShapeConfig(shape string) ([]byte, error) {
	js, ok := shapes[shape]
	if !ok {
		return nil, fmt.Errorf("model: unknown shape %q (known: %s)", shape, strings.Join(ShapeNames(), ", "))
	}
	return []byte(js), nil
}

// Synthetic returns a model with the named real shape (see [ShapeNames]) and
// deterministic random weights made in memory, stored as dt (f32, f16, bf16 or an
// affine type with group 64). It exists for benchmarks: its outputs mean nothing.
func Synthetic(ctx context.Context, shape string, dt kernels.DType, seed uint64, o Options) (*Model, error) {
	js, ok := shapes[shape]
	if !ok {
		return nil, fmt.Errorf("model: unknown shape %q (known: %s)", shape, strings.Join(ShapeNames(), ", "))
	}
	cfg, err := parseConfig([]byte(js))
	if err != nil {
		return nil, fmt.Errorf("model: shape %s: %w", shape, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &loader{used: map[string]bool{}, synth: &synthetic{dt: dt, tied: *cfg.TieEmbeddings, rng: rand.NewPCG(seed, seed+1)}}
	return build(cfg, nil, l, o)
}

// synthetic makes random weights of one dtype: values ~ N(0, 0.02²), norm weights 1,
// quantized codes uniform with scales chosen to give the same spread.
type synthetic struct {
	dt   kernels.DType
	tied bool
	rng  *rand.PCG
}

func (s *synthetic) has(name string) bool { return name != "lm_head.weight" || !s.tied }

// fill writes random bytes into b, 8 at a time.
func (s *synthetic) fill(b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], s.rng.Uint64())
	}
}

// normal16 maps a random byte to one of 256 N(0, 0.02²) quantiles, as f16 or bf16.
func normal16(bf bool) [256]uint16 {
	var t [256]uint16
	for i := range t {
		// inverse normal CDF by bisection: quantile (i+0.5)/256
		p := (float64(i) + 0.5) / 256
		lo, hi := -8.0, 8.0
		for range 60 {
			mid := (lo + hi) / 2
			if 0.5*math.Erfc(-mid/math.Sqrt2) < p {
				lo = mid
			} else {
				hi = mid
			}
		}
		v := float32(0.02 * lo)
		if bf {
			t[i] = cpu.F32ToBF16(v)
		} else {
			t[i] = cpu.F32ToF16(v)
		}
	}
	return t
}

func (s *synthetic) matrix(rows, cols int) *kernels.Tensor {
	n := rows * cols
	t := &kernels.Tensor{DType: s.dt, Shape: []int{rows, cols}}
	switch {
	case s.dt.Quantized():
		bits := s.dt.Bits()
		t.Data = make([]byte, n*bits/8)
		s.fill(t.Data)
		g := 64
		t.GroupSize = g
		sc, bi := make([]float32, n/g), make([]float32, n/g)
		// ±2σ over the code range; bf16 values, as MLX stores them
		step := cpu.BF16ToF32(cpu.F32ToBF16(float32(0.02*4) / float32(int(1)<<bits-1)))
		bias := cpu.BF16ToF32(cpu.F32ToBF16(-0.04))
		for i := range sc {
			sc[i], bi[i] = step, bias
		}
		t.Scales, t.Biases = kernels.FromF32(sc, rows, cols/g), kernels.FromF32(bi, rows, cols/g)
	case s.dt == kernels.DTypeF32:
		f := make([]float32, n)
		tab := normal16(true)
		r := make([]byte, n+8)
		s.fill(r)
		for i := range f {
			f[i] = cpu.BF16ToF32(tab[r[i]])
		}
		t.Data = kernels.FromF32(f, rows, cols).Data
	default:
		tab := normal16(s.dt == kernels.DTypeBF16)
		t.Data = make([]byte, 2*n)
		r := make([]byte, n+8)
		s.fill(r)
		for i := range n {
			binary.LittleEndian.PutUint16(t.Data[2*i:], tab[r[i]])
		}
	}
	return t
}

func (s *synthetic) vector(name string, n int) []float32 {
	f := make([]float32, n)
	if strings.HasSuffix(name, "norm.weight") {
		for i := range f {
			f[i] = 1
		}
	}
	return f
}

// SyntheticMatrix returns a host (rows, cols) weight of dtype dt filled as
// Synthetic fills a model's (quantized dtypes: group size 64), for kernel
// benchmarks. cols must be a multiple of 64.
func SyntheticMatrix(dt kernels.DType, rows, cols int, seed uint64) *kernels.Tensor {
	s := &synthetic{dt: dt, rng: rand.NewPCG(seed, seed+1)}
	return s.matrix(rows, cols)
}
