package kernels

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/klauspost/cpuid/v2"

	"github.com/ingot-llm/ingot/cuda"
	"github.com/ingot-llm/ingot/metal"
)

// A Backend enqueues ops on one device. Ops may run asynchronously until Sync.
// Passing tensors of the wrong shape or dtype panics with both shapes in the
// message (a programmer error); device errors are returned by Sync.
//
// Ops put the output first. Unless stated otherwise, activations are f32 and
// weights (w) may be any [DType].
//
// A Backend is one stream of ops and is not safe for concurrent use. Several
// streams share one device through [Backend.NewStream]: weights are uploaded
// once, through the first Backend, and each stream (one per model session)
// runs its own ops, concurrently with the others.
type Backend interface {
	Name() string

	// NewStream returns a Backend on the same device whose tensors and
	// queue are its own: it can read the tensors this Backend uploaded (the
	// weights), shares its compiled kernels, threads and tuning state, and may
	// be used from another goroutine at the same time as this one and other
	// streams. Closing a stream releases only what it made; close the streams
	// before the Backend they came from.
	NewStream() (Backend, error)

	// New returns a zeroed f32 tensor of the given shape on the device.
	New(shape ...int) *Tensor
	// NewF16 returns a zeroed f16 tensor on the device: a KV cache that
	// CopyRows rounds into (to nearest, ties to even) and Attention reads.
	NewF16(shape ...int) *Tensor
	// Upload makes a host tensor (Data set, e.g. mmap'd weights) usable by ops.
	// It may return t itself (CPU) or a device copy.
	Upload(t *Tensor) (*Tensor, error)
	// Download copies an f32 tensor to the host, waiting for pending ops.
	Download(dst []float32, src *Tensor) error

	Embed(dst, table *Tensor, tokens []int32, scale float32) // dst (L, D) = table[tokens]·scale
	RMSNorm(dst, x, w *Tensor, eps float32)                  // every len(w)-wide row of x; w f32
	MatMul(dst, x, w *Tensor)                                // dst (L, N) = x (L, K) · wᵀ, w (N, K)
	MatMuls(dst []*Tensor, x *Tensor, w []*Tensor)           // MatMul(dst[i], x, w[i]) for ≤ 4 weights
	Add(dst, a, b *Tensor)                                   // b same shape as a, or one row broadcast
	RoPE(x *Tensor, pos int, p *RoPE)                        // in place; x (L, heads·Dh), neox pairing
	Attention(dst, q, k, v *Tensor, pos int, p *AttnParams)  // causal GQA; see AttnParams
	GLU(dst, gate, up *Tensor, act Act)                      // dst = act(gate) · up
	Softcap(x *Tensor, c float32)                            // in place: x = c·tanh(x/c)
	CopyRows(dst, src *Tensor, row int)                      // dst[row : row+rows(src)] = src

	// AddRMSNorm is Add(x, x, h) then RMSNorm(dst, x, w, eps): a decoder
	// layer's residual add and the next norm. dst may be h.
	AddRMSNorm(dst, x, h, w *Tensor, eps float32)
	// RoPEStore is RoPE(q, pos, p), RoPE(k, pos, p), CopyRows(kc, k, pos),
	// CopyRows(vc, v, pos): a decoder layer's rotation and KV-cache write.
	RoPEStore(q, k, v, kc, vc *Tensor, pos int, p *RoPE)
	// AddScaled adds c·x into dst (same shape): a mixture-of-experts layer's
	// weighted sum of expert outputs.
	AddScaled(dst, x *Tensor, c float32)
	// MatMulGLU is MatMuls({dst, u}, x, {gate, up}) then GLU(dst, dst, u, act):
	// a gated MLP's first half. u (the shape of dst) is scratch: a backend
	// that fuses the two leaves it unwritten.
	MatMulGLU(dst, u, x, gate, up *Tensor, act Act)
	// CausalConvSiLU is a causal depthwise convolution over time with SiLU
	// (Qwen3.5's linear attention): over in = [state; x], state (K−1, C) the
	// rows before x's first (zeros at a sequence's start), x (L, C) and w
	// (C, K), dst[t, c] = silu(Σ_j w[c, j]·in[t+j, c]); state becomes in's
	// last K−1 rows. dst is not x.
	CausalConvSiLU(dst, x, w, state *Tensor)
	// GatedDeltaNet runs Qwen3.5's gated delta rule over L tokens: c (L,
	// 2·nk·dk + nv·dv) holds each token's q, k (nk heads of dk) and v (nv
	// of dv); a, b (L, nv). Per value head j, with β = σ(b), g =
	// −e^ALog·softplus(a + DTBias), q and k L2-normalized (q also × dk^−½)
	// and S (dk, dv) its state in S (nv, dk, dv), every token does
	// S ← e^g·S; u = kᵀS; S ← S + k⊗β(v − u); dst[t, j] = qᵀS (dv).
	GatedDeltaNet(dst, c, a, b, S *Tensor, p *DeltaParams)

	// Sync waits for every enqueued op and reports the first device error.
	Sync(ctx context.Context) error
	Close() error
}

// A MatVecser runs [Backend.MatMuls] with every row of x computed exactly as
// a one-row call computes it: its output bits depend neither on how many
// rows x has nor on their values, as a batched decode step needs (a sequence
// decoded beside others gets the bits it gets alone). The CPU backend
// implements it; [MatVecs] falls back to MatMuls elsewhere.
type MatVecser interface {
	MatVecs(dst []*Tensor, x *Tensor, w []*Tensor)
}

// MatVecs is b's [MatVecser.MatVecs], or MatMuls where b has none.
func MatVecs(b Backend, dst []*Tensor, x *Tensor, w []*Tensor) {
	if m, ok := b.(MatVecser); ok {
		m.MatVecs(dst, x, w)
		return
	}
	b.MatMuls(dst, x, w)
}

// Act is the activation of a gated linear unit.
type Act uint8

const (
	ActSiLU     Act = iota // x·σ(x): SwiGLU (Llama, Mistral, Qwen, Phi-3)
	ActGELUTanh            // tanh-approximated GELU: GeGLU (Gemma)
	ActGELU                // exact (erf) GELU
	// ActSwiGLUClamp is gpt-oss's clamped SwiGLU, its up transformed too:
	// dst = g·σ(1.702·g)·(clamp(up, −7, 7) + 1), g = min(gate, 7).
	ActSwiGLUClamp
	ActSigmoid // σ(x): Qwen3.5's gated attention, σ(gate)·attention
)

// ParseAct maps a Hugging Face hidden_act name to an [Act].
func ParseAct(name string) (Act, error) {
	switch name {
	case "silu", "swish":
		return ActSiLU, nil
	case "gelu_pytorch_tanh", "gelu_new", "gelu_fast", "gelu_tanh":
		return ActGELUTanh, nil
	case "gelu":
		return ActGELU, nil
	}
	return 0, fmt.Errorf("kernels: unsupported activation %q", name)
}

// RoPE describes rotary position embedding with the half-split ("neox",
// rotate_half) pairing of Hugging Face checkpoints: element j of each head is
// paired with j+RotaryDim/2 for j < RotaryDim/2; elements past RotaryDim are left
// alone (partial rotary).
type RoPE struct {
	HeadDim   int       // Dh
	RotaryDim int       // ≤ Dh, even
	InvFreq   []float32 // RotaryDim/2 frequencies, scaling already applied
	Scale     float32   // multiplies cos and sin (1 unless yarn/longrope)
}

// AttnParams describes causal grouped-query attention over a KV cache.
//
// q and dst are (L, H·Dh) for tokens at positions [pos, pos+L). k and v are the
// cache (maxSeq, Hkv·Dh), f32 or f16 (see NewF16); rows [0, pos+L) are valid. Query head h reads KV head
// h/(H/Hkv). Query i attends key j iff j ≤ pos+i and, when Window > 0,
// j > pos+i−Window.
type AttnParams struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // multiplies q·k (usually 1/√Dh)
	Window                  int     // sliding window in tokens; 0: none
	Softcap                 float32 // scores = Softcap·tanh(scores/Softcap); 0: none
	// Sinks, one per query head (gpt-oss): a logit in every softmax's
	// denominator that no value follows; nil: none. At most 1024 heads.
	Sinks []float32
}

// Open returns the backend with the given name, as [Choose] does for a
// model of unknown size.
func Open(name string, threads int) (Backend, error) {
	b, _, err := Choose(name, threads, 0)
	return b, err
}

// Choose opens the backend named name for a model that needs need bytes of
// device memory (its weights and a session's KV cache and activations; 0:
// unknown) and says why, in a sentence for users. It is the one place that
// decides "auto" (also ""): Metal on Apple silicon when need fits the GPU's
// recommended working set, else CUDA when an NVIDIA GPU is present and need
// fits its free memory, else the CPU. "cpu", "metal", "cuda" and "metal-emu"
// (the Metal kernels on the MSL interpreter) open that backend; "metal" and
// "cuda" refuse a model that does not fit, saying what to change. threads ≤ 0
// means [DefaultThreads].
func Choose(name string, threads int, need int64) (Backend, string, error) {
	if threads <= 0 {
		threads = DefaultThreads()
	}
	switch name = strings.ToLower(name); name {
	case "cpu":
		return NewCPU(threads), fmt.Sprintf("cpu: asked for (%d threads)", threads), nil
	case "metal-emu":
		b, err := openMetal(name, threads)
		return b, "metal-emu: asked for (the Metal kernels on the MSL interpreter, on the CPU)", err
	case "metal", "cuda":
		b, err := openMetal(name, threads)
		if err != nil {
			return nil, "", err
		}
		why, err := fits(b, need)
		if err != nil {
			b.Close()
			return nil, "", err
		}
		return b, name + ": asked for; " + why, nil
	case "", "auto":
		var why []string
		for _, gpu := range []string{"metal", "cuda"} {
			b, err := openMetal(gpu, threads)
			if errors.Is(err, metal.ErrUnavailable) || errors.Is(err, cuda.ErrUnavailable) {
				continue
			}
			if err == nil {
				var fit string
				if fit, err = fits(b, need); err == nil {
					return b, gpu + ": auto; " + fit, nil
				}
				b.Close()
			}
			why = append(why, err.Error())
		}
		if len(why) == 0 {
			why = append(why, fmt.Sprintf("no Metal or NVIDIA GPU on %s/%s", runtime.GOOS, runtime.GOARCH))
		}
		return NewCPU(threads), fmt.Sprintf("cpu: %s; %d threads", strings.Join(why, "; "), threads), nil
	}
	return nil, "", fmt.Errorf("kernels: unknown backend %q (want auto, cpu, metal, cuda or metal-emu)", name)
}

// fits checks need bytes against a Metal backend's recommended working set.
func fits(b Backend, need int64) (string, error) {
	m, ok := b.(*Metal)
	if !ok {
		return "", nil
	}
	limit := m.dev.MaxWorkingSet()
	if need <= 0 || limit <= 0 {
		return m.dev.Name(), nil
	}
	if need > limit {
		hint := ", or raise the limit (sudo sysctl iogpu.wired_limit_mb=N)"
		if strings.HasPrefix(m.Name(), "cuda:") {
			hint = ""
		}
		return "", fmt.Errorf("kernels: %s: the model needs %.1f GB (weights and a session's KV cache) but %.1f GB are available: "+
			"use a smaller quantization (-quant q4, or run quantize -bits 4), a shorter -ctx or -kv f16%s",
			m.Name(), float64(need)/1e9, float64(limit)/1e9, hint)
	}
	return fmt.Sprintf("%s, %.1f GB needed of %.1f GB available", m.dev.Name(), float64(need)/1e9, float64(limit)/1e9), nil
}

// DefaultThreads is the CPU thread count used when none is given: the number of
// physical cores (hyper-threads share the memory bandwidth decode is bound by).
func DefaultThreads() int {
	if n := cpuid.CPU.PhysicalCores; n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// DeltaParams shapes [Backend.GatedDeltaNet]: KeyHeads key heads of KeyDim
// and ValueHeads value heads of ValueDim (value head j reads key head
// j/(ValueHeads/KeyHeads)); ALog and DTBias (ValueHeads each) set the decay.
type DeltaParams struct {
	KeyHeads, KeyDim, ValueHeads, ValueDim int
	ALog, DTBias                           []float32
}
