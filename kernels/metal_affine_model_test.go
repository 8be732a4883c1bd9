package kernels_test

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/model"
)

// widenScales is the Metal backend with affine scales and biases widened to
// f32 before upload: what Upload received before they were kept as stored.
type widenScales struct{ *kernels.Metal }

func (w widenScales) Upload(t *kernels.Tensor) (*kernels.Tensor, error) {
	return w.Metal.Upload(kernels.WidenAffine(t))
}

// TestMetalAffineModel loads the trained tiny model's MLX q4 and q8 copies
// (bf16 scales and biases, groups of 64) on metal-emu twice: as stored, and
// with scales and biases widened to f32. It checks that
//   - the file's q4 matrices are 4.5 bits a weight (q8: 8.5) with their scales;
//   - the device holds exactly the file's 16-bit scale and bias bytes fewer
//     (2 bytes each instead of 4), all of them bound in place;
//   - a decode step reads the quantized tensors' bytes at 16-bit scales
//     (Stats.WeightBytes, within 1 %);
//   - the prompt's logits are equal bit for bit and greedy ids equal.
func TestMetalAffineModel(t *testing.T) {
	for _, c := range []struct {
		name string
		bits int
		bpw  float64
	}{{"tinycode-llama-q4", 4, 4.5}, {"tinycode-llama-q8", 8, 8.5}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(refDir, c.name)
			hdr, _, _ := stHeader(t, filepath.Join(dir, "model.safetensors"))
			size := func(name string) (int, []int, string) {
				var e stEntry
				if err := json.Unmarshal(hdr[name], &e); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return e.Offsets[1] - e.Offsets[0], e.Shape, e.DType
			}
			var sb16, quant, weights int // 16-bit scale/bias bytes; codes+scales+biases; weights
			var embRow int               // 16-bit scale and bias bytes of one row of the embedding table
			for name := range hdr {
				if !strings.HasSuffix(name, ".scales") {
					continue
				}
				mod := strings.TrimSuffix(name, ".scales")
				ns, _, dt := size(name)
				nb, _, _ := size(mod + ".biases")
				nw, shape, _ := size(mod + ".weight")
				if dt != "BF16" {
					t.Fatalf("%s is %s: the test expects MLX's bf16", name, dt)
				}
				sb16 += ns + nb
				if mod == "model.embed_tokens" {
					embRow = (ns + nb) / shape[0]
				}
				quant += nw + ns + nb
				weights += shape[0] * shape[1] * 32 / c.bits // U32 words of bits-wide codes
			}
			if bpw := 8 * float64(quant) / float64(weights); math.Abs(bpw-c.bpw) > 1e-9 {
				t.Errorf("%.4f bits a weight with scales and biases, want %.1f", bpw, c.bpw)
			}

			run := func(b kernels.Backend, mb *kernels.Metal) (kernels.Stats, int64, []float32, []int32) {
				s := loadCtx(t, dir, b, 32)
				st := mb.Stats()
				prompt := []int32{4094, 1, 2, 3}
				logits, err := s.Forward(context.Background(), prompt)
				if err != nil {
					t.Fatal(err)
				}
				logits = slices.Clone(logits)
				sm := s.Backend().(*kernels.Metal) // the session's stream
				sm.ResetStats()
				if _, err := s.Forward(context.Background(), []int32{5}); err != nil {
					t.Fatal(err)
				}
				read := sm.Stats().WeightBytes
				s.Truncate(0)
				r, err := s.Generate(context.Background(), prompt, model.GenerateOptions{MaxTokens: 12, IgnoreEOS: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				var ids []int32
				for _, tk := range r.Tokens {
					ids = append(ids, tk.ID)
				}
				return st, read, logits, ids
			}
			m16 := interpreter(t).(*kernels.Metal)
			s16, read16, l16, ids16 := run(m16, m16)
			m32 := interpreter(t).(*kernels.Metal)
			s32, read32, l32, ids32 := run(widenScales{m32}, m32)

			dev16, dev32 := s16.MappedBytes+s16.CopiedBytes, s32.MappedBytes+s32.CopiedBytes
			if dev32-dev16 != int64(sb16) {
				t.Errorf("device weight bytes %d (16-bit scales), %d (f32): %d fewer, want %d (the file's scales and biases)", dev16, dev32, dev32-dev16, sb16)
			}
			if s16.MappedBytes-s32.MappedBytes != int64(sb16) || s16.CopiedBytes != s32.CopiedBytes-2*int64(sb16) {
				t.Errorf("16-bit: %d mapped, %d copied; f32: %d, %d; want the %d scale and bias bytes mapped, not copied as f32",
					s16.MappedBytes, s16.CopiedBytes, s32.MappedBytes, s32.CopiedBytes, sb16)
			}
			if e := math.Abs(float64(read16)/float64(quant) - 1); e > 0.01 {
				t.Errorf("a decode step read %d weight bytes, want %d (the quantized tensors at 16-bit scales) within 1%% (%.2g%%)", read16, quant, 100*e)
			}
			if embRow == 0 {
				t.Fatal("no quantized model.embed_tokens")
			}
			// Every matrix once (the tied head reads the whole table), and the
			// embedding gather one row of it.
			if read32-read16 != int64(sb16+embRow) {
				t.Errorf("a decode step read %d bytes with 16-bit scales, %d with f32: want %d fewer", read16, read32, sb16+embRow)
			}
			if !slices.EqualFunc(l16, l32, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Error("prompt logits with 16-bit scales differ from those with f32 scales")
			}
			if !slices.Equal(ids16, ids32) || len(ids16) != 12 {
				t.Errorf("greedy ids\n 16-bit scales %v\n f32 scales    %v", ids16, ids32)
			}
			t.Logf("%d scale/bias bytes (%.2f bits a weight): device %d → %d bytes, decode step reads %d → %d",
				sb16, 8*float64(quant)/float64(weights), dev32, dev16, read32, read16)
		})
	}
}
