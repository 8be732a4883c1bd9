package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/gguf"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// ggufDir is the GGUF oracle data beside the checkout (see its README.md).
const ggufDir = "../../shared/testdata/gguf"

// ggufRef is the part of a GGUF case's ref.json the tests read.
type ggufRef struct {
	InputIDs   []int32        `json:"input_ids"`
	TypeCounts map[string]int `json:"tensor_type_counts"`
	Exact      struct {
		LogitsShape  []int       `json:"logits_shape"`
		LogitsLast   []float32   `json:"logits_last"`
		GreedyNoStop []int32     `json:"greedy_nostop"`
		Margins      []float32   `json:"greedy_nostop_margins"`
		HiddenLast   []float32   `json:"hidden_last"`
		RopeInvFreq  []float32   `json:"rope_inv_freq"`
		ResidualLast [][]float32 `json:"residual_last"`
	} `json:"exact"`
}

// ggufCases lists every folder of ../shared/testdata/gguf with a model.gguf.
func ggufCases(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(ggufDir, "*", "model.gguf"))
	if len(files) == 0 {
		t.Fatal("GGUF oracle data missing (../shared must sit beside the checkout)")
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(filepath.Dir(f)))
	}
	return names
}

func readGGUFRef(t *testing.T, name string) (string, *ggufRef) {
	t.Helper()
	dir := filepath.Join(ggufDir, name)
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r ggufRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return dir, &r
}

// TestGGUFReference checks every oracle GGUF against its exact float64
// reference: logits at every position within logitTol (1e-4) max-abs, both
// from one prefill (last row) and decoding token by token through the cache,
// and the 16-step greedy chain (EOS ignored). Q8_0, Q4_0, Q4_K, Q5_K and Q6_K
// matrices must run as stored (checkGGUFNative).
func TestGGUFReference(t *testing.T) {
	for _, name := range ggufCases(t) {
		t.Run(name, func(t *testing.T) { checkGGUFReference(t, name, Options{Threads: 2}) })
	}
}

// TestGGUFReferenceMetalEmu runs the Q4_K_M and Q8_0 oracle GGUFs through the
// Metal kernels on the MSL interpreter (matvec/matmul/embed_<t>_f32 of
// shaders/kquant.metal; qwen2's tied head is its q6_k token_embd), with
// TestGGUFReference's checks and bound.
func TestGGUFReferenceMetalEmu(t *testing.T) {
	if os.Getenv("INGOT_TEST_BACKEND") != "" {
		t.Skip("TestGGUFReference runs on INGOT_TEST_BACKEND")
	}
	for _, name := range []string{"llama-Q4_K_M", "qwen2-Q4_K_M", "llama-Q8_0"} {
		t.Run(name, func(t *testing.T) {
			b, err := kernels.Open("metal-emu", 2)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			checkGGUFReference(t, name, Options{Threads: 2, Backend: b})
		})
	}
}

// checkGGUFReference is TestGGUFReference's check of one oracle GGUF.
func checkGGUFReference(t *testing.T, name string, o Options) {
	dir, ref := readGGUFRef(t, name)
	want := readLogits(t, dir, ref.Exact.LogitsShape)
	s := open(t, filepath.Join(dir, "model.gguf"), o, SessionOptions{})
	for typ, n := range ref.TypeCounts {
		if !strings.Contains(" "+s.m.GGUFTypes+" ", fmt.Sprintf(" %s×%d ", typ, n)) {
			t.Errorf("GGUFTypes %q, want %s×%d in it", s.m.GGUFTypes, typ, n)
		}
	}
	checkGGUFNative(t, s.m, filepath.Join(dir, "model.gguf"))
	w, _, err := Estimate(filepath.Join(dir, "model.gguf"), Options{}, SessionOptions{})
	if lw := s.m.WeightBytes(); err != nil || w < lw || w > lw+lw/5 { // the backend may repack more tightly
		t.Errorf("Estimate: %d weight bytes (%v); loaded %d", w, err, lw)
	}
	if d := maxAbs(s.one.rope.InvFreq, ref.Exact.RopeInvFreq); d > 1e-6*float64(slices.Max(ref.Exact.RopeInvFreq)) {
		t.Errorf("rope inv_freq differs by %g", d)
	}
	got, err := s.Forward(context.Background(), ref.InputIDs)
	if err != nil {
		t.Fatal(err)
	}
	prefill := maxAbs(got, ref.Exact.LogitsLast)
	s.Truncate(0)
	var worst float64
	for i, tok := range ref.InputIDs {
		got, err := s.Forward(context.Background(), []int32{tok})
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbs(got, want[i]))
	}
	if prefill > logitTol || worst > logitTol {
		t.Errorf("logits max-abs: prefill %g, decode %g over %d positions (bound %g)", prefill, worst, len(want), logitTol)
	}
	s.Truncate(0)
	r, err := s.Generate(context.Background(), ref.InputIDs, GenerateOptions{MaxTokens: len(ref.Exact.GreedyNoStop), IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tokenIDsOf(r.Tokens); !slices.Equal(ids, ref.Exact.GreedyNoStop) {
		t.Errorf("greedy:\n got %v\nwant %v", ids, ref.Exact.GreedyNoStop)
	}
	t.Logf("max-abs: prefill %.2g, decode %.2g (%d positions); greedy %d tokens equal", prefill, worst, len(want), len(ref.Exact.GreedyNoStop))
}

// checkGGUFNative checks that every matrix of a GGUF block type with its own
// kernels (ggufNative) was loaded in that dtype, not rewritten as affine
// codes, and, when every block type of the file is native, that the model's
// weight bytes are the file's tensors as stored (rope_freqs folded into the
// config).
func checkGGUFNative(t *testing.T, m *Model, path string) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := m.net
	allNative, checked := true, 0
	var fileBytes int64
	for _, tt := range f.Tensors {
		dt, native := ggufNative[tt.Type]
		allNative = allNative && (native || tt.Type.BlockSize() == 1)
		var got *kernels.Tensor
		switch {
		case tt.Name == "token_embd.weight":
			got = n.embed
		case tt.Name == "output.weight":
			got = n.head
		case strings.HasPrefix(tt.Name, "blk."):
			var i int
			var suffix string
			if _, err := fmt.Sscanf(tt.Name, "blk.%d.%s", &i, &suffix); err != nil {
				t.Fatal(err)
			}
			ly := &n.layers[i]
			got = map[string]*kernels.Tensor{"attn_q.weight": ly.wq, "attn_k.weight": ly.wk, "attn_v.weight": ly.wv,
				"attn_output.weight": ly.wo, "ffn_gate.weight": ly.gate, "ffn_up.weight": ly.up, "ffn_down.weight": ly.down}[suffix]
		}
		b := int64(len(tt.Data))
		if w, ok := bufOf(got).(*cpu.Weight); ok && native {
			// Q4_0, Q8_0, Q4_K and Q6_K as the affine weights they are
			// (cpu.PrepareKQuant): the codes, then an f16 scale and bias a
			// 32-element block, or for Q4_K a byte of scale and of min and
			// an f16 d and dmin a superblock (two of each for the last of a
			// row with K mod 512 = 256); Q6_K as stored
			bits := map[gguf.Type]int{gguf.TypeQ4_0: 4, gguf.TypeQ8_0: 8, gguf.TypeQ4_K: 4, gguf.TypeQ6_K: 6}[tt.Type]
			gs := 32
			if tt.Type == gguf.TypeQ6_K {
				gs = 16
			}
			if bits == 0 || w.Format != cpu.FormatQ || w.Q.Bits != bits || w.Q.GroupSize != gs {
				t.Errorf("%s (%s) loaded as a %v weight", tt.Name, tt.Type, w.Format)
			}
			b = int64(w.N) * int64(w.K) * int64(bits*32+32) / (8 * 32)
			switch tt.Type {
			case gguf.TypeQ4_K:
				b = int64(w.N) * (int64(w.K)*37/64 + 4*int64(w.K%512/256))
			case gguf.TypeQ6_K:
				b = int64(len(tt.Data))
			}
		}
		if tt.Name != "rope_freqs.weight" {
			fileBytes += b
		}
		if got == nil || !native {
			continue
		}
		checked++
		if got.DType != dt {
			t.Errorf("%s (%s) loaded as %s, want %s (the file's block type)", tt.Name, tt.Type, got.DType, dt)
		}
	}
	if allNative && m.WeightBytes() != fileBytes {
		t.Errorf("WeightBytes %d, want the file's %d tensor bytes (Q4_0, Q8_0, Q4_K and Q6_K in the CPU's affine form)", m.WeightBytes(), fileBytes)
	}
	if testing.Verbose() {
		t.Logf("%d native matrices; weight bytes %d (file tensors %d)", checked, m.WeightBytes(), fileBytes)
	}
}

// bufOf returns t's backend buffer, or nil for a nil t.
func bufOf(t *kernels.Tensor) any {
	if t == nil {
		return nil
	}
	return t.Buf
}

// TestGGUFAffineKernels checks that the backend (cpu, or INGOT_TEST_BACKEND)
// runs every (bits, group size) pair the GGUF block types become — MatMul at
// L = 1 and L = 5 and Embed — against a float64 evaluation of the same codes.
func TestGGUFAffineKernels(t *testing.T) {
	b := kernels.Backend(kernels.NewCPU(2))
	if name := os.Getenv("INGOT_TEST_BACKEND"); name != "" {
		var err error
		if b, err = kernels.Open(name, 2); err != nil {
			t.Fatal(err)
		}
	}
	defer b.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ty := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1,
		gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K} {
		bits, group, _ := gguf.AffineBits(ty)
		t.Run(fmt.Sprintf("%s/q%d/G=%d", ty, bits, group), func(t *testing.T) {
			const N, K = 24, 512
			raw := make([]byte, N*ty.RowBytes(K))
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			fixScales(ty, raw)
			a, err := gguf.ToAffine(ty, raw, N, K)
			if err != nil {
				t.Fatal(err)
			}
			w := make([]float32, N*K)
			if err := gguf.Dequantize(w, ty, raw); err != nil {
				t.Fatal(err)
			}
			dt, _ := kernels.QuantDType(bits)
			G := K / group
			host := &kernels.Tensor{DType: dt, Shape: []int{N, K}, Data: bytesOf(a.Codes), GroupSize: group,
				Scales: kernels.FromF32(a.Scales, N, G), Biases: kernels.FromF32(a.Biases, N, G)}
			wt, err := b.Upload(host)
			if err != nil {
				t.Fatalf("upload %s with group size %d: %v", dt, group, err)
			}
			for _, L := range []int{1, 5} {
				x := make([]float32, L*K)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				xt, err := b.Upload(kernels.FromF32(x, L, K))
				if err != nil {
					t.Fatal(err)
				}
				dst := b.New(L, N)
				b.MatMul(dst, xt, wt)
				got := make([]float32, L*N)
				if err := b.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := b.Download(got, dst); err != nil {
					t.Fatal(err)
				}
				var worst, scale float64
				for l := range L {
					for n := range N {
						var want float64
						for k := range K {
							want += float64(x[l*K+k]) * float64(w[n*K+k])
						}
						worst = max(worst, math.Abs(float64(got[l*N+n])-want))
						scale = max(scale, math.Abs(want))
					}
				}
				if worst > 1e-5*max(scale, 1) {
					t.Errorf("MatMul L=%d: max-abs %g (largest output %g)", L, worst, scale)
				}
			}
			emb := b.New(2, K)
			b.Embed(emb, wt, []int32{3, N - 1}, 1)
			got := make([]float32, 2*K)
			if err := b.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := b.Download(got, emb); err != nil {
				t.Fatal(err)
			}
			if d := maxAbs(got, append(slices.Clone(w[3*K:4*K]), w[(N-1)*K:]...)); d > 1e-6 {
				t.Errorf("Embed: max-abs %g", d)
			}
		})
	}
}

// fixScales rewrites the f16 scale fields of random blocks to small finite
// values, so products stay in range.
func fixScales(ty gguf.Type, raw []byte) {
	var offs []int
	switch ty {
	case gguf.TypeQ4_0, gguf.TypeQ5_0, gguf.TypeQ8_0:
		offs = []int{0}
	case gguf.TypeQ4_1, gguf.TypeQ5_1, gguf.TypeQ4_K, gguf.TypeQ5_K:
		offs = []int{0, 2}
	case gguf.TypeQ2_K:
		offs = []int{80, 82}
	case gguf.TypeQ3_K:
		offs = []int{108}
	case gguf.TypeQ6_K:
		offs = []int{208}
	}
	bb := ty.BlockBytes()
	for blk := 0; blk < len(raw)/bb; blk++ {
		for _, o := range offs {
			// sign and a 2^-14…2^-7 exponent: |d| ≤ 1/64
			raw[blk*bb+o+1] = raw[blk*bb+o+1]&0x83 | 0x04 | (raw[blk*bb+o]&3)<<3
		}
	}
}

// TestGGUFPermutation proves that arch llama's q/k rows must be un-permuted for
// ingot's rotate-half RoPE: loaded as stored, the llama-F16 logits are far
// from the exact reference (with un-permutation TestGGUFReference holds them
// to 1e-4). The un-permutation itself is checked row by row.
func TestGGUFPermutation(t *testing.T) {
	// HF row j < Dh/2 is stored at 2j, HF row Dh/2+j at 2j+1, per head.
	const heads, dh = 2, 8
	stored := make([]byte, heads*dh)
	for h := range heads {
		for j := range dh / 2 {
			stored[h*dh+2*j] = byte(h*dh + j)
			stored[h*dh+2*j+1] = byte(h*dh + dh/2 + j)
		}
	}
	got := unpermute(stored, heads, heads*dh, 1)
	for i, v := range got {
		if int(v) != i {
			t.Fatalf("unpermute: row %d holds HF row %d:\n%v", i, v, got)
		}
	}

	dir, ref := readGGUFRef(t, "llama-F16")
	saved := ggufArchs["llama"]
	unpermuted := saved
	unpermuted.permuted = false
	ggufArchs["llama"] = unpermuted
	s := open(t, filepath.Join(dir, "model.gguf"), Options{Threads: 2}, SessionOptions{})
	ggufArchs["llama"] = saved
	logits, err := s.Forward(context.Background(), ref.InputIDs)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbs(logits, ref.Exact.LogitsLast); d < 100*logitTol {
		t.Errorf("without un-permutation the logits are only %g from the reference", d)
	} else {
		t.Logf("without un-permutation: last logits max-abs %.3g", d)
	}
}

// rewriteGGUF writes a copy of an oracle GGUF after edit has changed its
// metadata or tensor list, and returns its path.
func rewriteGGUF(t *testing.T, src string, edit func(kvs []gguf.KV, ts []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor)) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kvs, ts := edit(slices.Clone(f.KV), slices.Clone(f.Tensors))
	var b []byte
	le := binary.LittleEndian
	str := func(s string) { b = le.AppendUint64(b, uint64(len(s))); b = append(b, s...) }
	b = append(b, "GGUF"...)
	b = le.AppendUint32(b, 3)
	b = le.AppendUint64(b, uint64(len(ts)))
	b = le.AppendUint64(b, uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv.Key)
		b = le.AppendUint32(b, uint32(kv.Type))
		if kv.Type == gguf.TypeArray {
			b = le.AppendUint32(b, uint32(kv.Elem))
		}
		switch v := kv.Value.(type) {
		case string:
			str(v)
		case uint32:
			b = le.AppendUint32(b, v)
		case int32:
			b = le.AppendUint32(b, uint32(v))
		case float32:
			b = le.AppendUint32(b, math.Float32bits(v))
		case bool:
			b = append(b, map[bool]byte{false: 0, true: 1}[v])
		case []string:
			b = le.AppendUint64(b, uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []int32:
			b = le.AppendUint64(b, uint64(len(v)))
			for _, x := range v {
				b = le.AppendUint32(b, uint32(x))
			}
		case []float32:
			b = le.AppendUint64(b, uint64(len(v)))
			for _, x := range v {
				b = le.AppendUint32(b, math.Float32bits(x))
			}
		default:
			t.Fatalf("rewriteGGUF: key %q: value type %T", kv.Key, v)
		}
	}
	var off uint64
	for _, tt := range ts {
		str(tt.Name)
		b = le.AppendUint32(b, uint32(len(tt.Dims)))
		for _, d := range tt.Dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint32(b, uint32(tt.Type))
		b = le.AppendUint64(b, off)
		off += (uint64(len(tt.Data)) + 31) / 32 * 32
	}
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	for _, tt := range ts {
		b = append(b, tt.Data...)
		for len(b)%32 != 0 {
			b = append(b, 0)
		}
	}
	path := filepath.Join(t.TempDir(), "edited.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGGUFBadModels: each broken model is one load error naming the GGUF key
// or tensor.
func TestGGUFBadModels(t *testing.T) {
	src := filepath.Join(ggufDir, "qwen3-Q4_K_M", "model.gguf")
	dropTensor := func(name string) func([]gguf.KV, []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
		return func(kvs []gguf.KV, ts []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
			return kvs, slices.DeleteFunc(ts, func(t *gguf.Tensor) bool { return t.Name == name })
		}
	}
	setKV := func(key string, typ gguf.ValueType, v any) func([]gguf.KV, []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
		return func(kvs []gguf.KV, ts []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
			kvs = slices.DeleteFunc(kvs, func(kv gguf.KV) bool { return kv.Key == key })
			if v != nil {
				kvs = append(kvs, gguf.KV{Key: key, Type: typ, Value: v})
			}
			return kvs, ts
		}
	}
	for _, tc := range []struct {
		name string
		edit func([]gguf.KV, []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor)
		want string
	}{
		{"missing tensor", dropTensor("blk.0.attn_k_norm.weight"), `missing tensor "blk.0.attn_k_norm.weight"`},
		{"missing key", setKV("qwen3.block_count", 0, nil), `missing key "qwen3.block_count"`},
		{"key type", setKV("qwen3.embedding_length", gguf.TypeString, "256"), `key "qwen3.embedding_length" is string, want an integer`},
		{"arch", setKV("general.architecture", gguf.TypeString, "mamba"), `model: unsupported architecture "mamba" (general.architecture; ingot loads [gemma gemma2 gemma3 llama phi3 qwen2 qwen3] from GGUF) in `},
		{"dims", setKV("qwen3.feed_forward_length", gguf.TypeUint32, uint32(256)), `tensor "blk.0.ffn_down.weight" has dimensions [512 256], the metadata implies [256 256]`},
		{"rope type", setKV("qwen3.rope.scaling.type", gguf.TypeString, "su"), `qwen3.rope.scaling.type "su" is not supported`},
		{"unsupported type", func(kvs []gguf.KV, ts []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
			for i, tt := range ts {
				if tt.Name == "blk.0.attn_q.weight" {
					c := *tt
					c.Type, c.Data = gguf.TypeIQ4_NL, make([]byte, 512*256/32*18)
					ts[i] = &c
				}
			}
			return kvs, ts
		}, `tensor "blk.0.attn_q.weight": type IQ4_NL is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := rewriteGGUF(t, src, tc.edit)
			m, err := Load(context.Background(), path, Options{Threads: 1})
			if err == nil {
				m.Close()
				t.Fatalf("loaded; want an error containing %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), "model: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want model: …%s…", err, tc.want)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
}

// TestGGUFPath: a directory holding one GGUF model (and no config.json) loads
// it; two models are an error naming the directory.
func TestGGUFPath(t *testing.T) {
	src, err := filepath.Abs(filepath.Join(ggufDir, "qwen2-Q4_K_M", "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(src, filepath.Join(dir, "qwen2.Q4_K_M.gguf")); err != nil {
		t.Fatal(err)
	}
	m, err := Load(context.Background(), dir, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := os.Symlink(src, filepath.Join(dir, "other.gguf")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), dir, Options{Threads: 1}); err == nil || !strings.Contains(err.Error(), "holds 2 GGUF models") {
		t.Errorf("two models: %v", err)
	}
}

// TestGGUFEOS: the end-of-generation ids are llama.cpp's eog_ids, for the tiny
// models and the vocab-only GGUFs of Llama 3, Qwen3 and Llama 2.
func TestGGUFEOS(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []int32
	}{
		{"llama-F16/model.gguf", []int32{380, 383}},
		{"tokenizers/llama3.vocab.gguf", []int32{128001, 128009}},
		{"tokenizers/qwen3.vocab.gguf", []int32{128247, 151643, 151645, 151662, 151663, 151664}},
		{"tokenizers/llama2.vocab.gguf", []int32{2}},
	} {
		f, err := gguf.Open(filepath.Join(ggufDir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ggufEOS(f)
		f.Close()
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: EOS %v (%v), want llama.cpp's eog_ids %v", tc.file, got, err, tc.want)
		}
	}
}
