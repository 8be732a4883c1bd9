package kernels

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// A Backend enqueues ops on one device. Ops may run asynchronously until Sync.
// Passing tensors of the wrong shape or dtype panics with both shapes in the
// message (a programmer error); device errors are returned by Sync.
//
// Ops put the output first. Unless stated otherwise, activations are f32 and
// weights (w) may be any [DType].
type Backend interface {
	Name() string

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

	// Sync waits for every enqueued op and reports the first device error.
	Sync(ctx context.Context) error
	Close() error
}

// Act is the activation of a gated linear unit.
type Act uint8

const (
	ActSiLU     Act = iota // x·σ(x): SwiGLU (Llama, Mistral, Qwen, Phi-3)
	ActGELUTanh            // tanh-approximated GELU: GeGLU (Gemma)
	ActGELU                // exact (erf) GELU
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
}

// Open returns the backend with the given name. "cpu" always works; "auto" picks the
// best available backend. threads ≤ 0 means [DefaultThreads].
func Open(name string, threads int) (Backend, error) {
	if threads <= 0 {
		threads = DefaultThreads()
	}
	switch strings.ToLower(name) {
	case "", "auto", "cpu":
		return NewCPU(threads), nil
	case "metal", "metal-emu": // Apple's GPU, or its kernels on the MSL interpreter
		return openMetal(strings.ToLower(name), threads)
	}
	return nil, fmt.Errorf("kernels: unknown backend %q (want auto, cpu, metal or metal-emu)", name)
}

// DefaultThreads is the CPU thread count used when none is given: the number of
// physical cores (hyper-threads share the memory bandwidth decode is bound by).
func DefaultThreads() int {
	if n := cpuid.CPU.PhysicalCores; n > 0 {
		return n
	}
	return runtime.NumCPU()
}
