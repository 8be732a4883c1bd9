package kernels_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
)

// stHeader reads the header of dir/model.safetensors.
func stHeader(t *testing.T, path string) (hdr map[string]json.RawMessage, dataStart int, file []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint64(b))
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	delete(hdr, "__metadata__")
	return hdr, 8 + n, b
}

type stEntry struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets []int  `json:"data_offsets"`
}

// inPlaceBytes is what the loader hands to Upload straight from the file: the
// 2-D matrices (float, or the U32 codes of affine ones) and affine scales and
// biases as stored (sb16: those of them in f16 or bf16, which need only 2-byte
// alignment). Norm weights are converted to f32, so they are copies.
func inPlaceBytes(t *testing.T, hdr map[string]json.RawMessage) (sum, sb16, largest int) {
	for name, raw := range hdr {
		var e stEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := e.Offsets[1] - e.Offsets[0]
		largest = max(largest, n)
		switch ext := filepath.Ext(name); {
		case len(e.Shape) == 2 && ext == ".weight":
			sum += n
		case len(e.Shape) == 2 && (ext == ".scales" || ext == ".biases"):
			sum += n
			if e.DType == "F16" || e.DType == "BF16" {
				sb16 += n
			}
		}
	}
	return sum, sb16, largest
}

// hideMapper is a backend that is not a kernels.Mapper: every upload copies.
type hideMapper struct{ kernels.Backend }

// TestMetalNoCopyWeights loads the trained tiny model (bf16) and its q4 copy
// from their directories on metal-emu and checks that every tensor the loader
// reads straight from the mmap'd file is bound in place (no copy), with the
// file split into overlapping buffers by a small maxBufferLength, and that the
// logits equal those of copied weights bit for bit and the CPU backend's
// within the parity tolerance. A copy of the file whose data section starts 2
// bytes off a word boundary falls back to copying every tensor.
func TestMetalNoCopyWeights(t *testing.T) {
	msltest.Require(t)
	for _, name := range []string{"tinycode-llama", "tinycode-llama-q4"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			hdr, dataStart, file := stHeader(t, filepath.Join(dir, "model.safetensors"))
			want, sb16, largest := inPlaceBytes(t, hdr)
			pg := os.Getpagesize()
			maxBuf := 2 * (largest + pg - 1) / pg * pg // views step by the largest tensor
			if len(file) <= maxBuf {
				t.Fatalf("%d-byte file fits one %d-byte buffer: the test would not split it", len(file), maxBuf)
			}
			dev := msltest.OpenOptions(t, msl.Options{Strict: true, Threads: 2, MaxBufferLength: maxBuf}, kernels.ShaderFiles()...)
			mb, err := kernels.NewMetal(dev)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mb.Close() })
			m := load(t, dir, mb)
			s := mb.Stats()
			if s.MappedBytes != int64(want) {
				t.Errorf("MappedBytes %d, want %d (every matrix in the file)", s.MappedBytes, want)
			}
			t.Logf("%d-byte file in buffers of ≤ %d bytes: %d bytes bound in place, %d copied (converted norms)",
				len(file), maxBuf, s.MappedBytes, s.CopiedBytes)

			ids := []int32{4094, 1, 2, 3, 4, 5, 6}
			logits := func(m interface {
				Forward(context.Context, []int32) ([]float32, error)
			}) []float32 {
				out, err := m.Forward(context.Background(), ids)
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(out)
			}
			got := logits(m)
			copied := logits(load(t, dir, hideMapper{interpreter(t)}))
			if !slices.Equal(got, copied) {
				t.Error("logits with weights bound in place differ from logits with copied weights")
			}
			cpu := logits(load(t, dir, nil))
			if e, ma := nmse(got, cpu); e > 1e-6 {
				t.Errorf("logits NMSE %.3g > 1e-6 against the CPU backend (max-abs %.3g)", e, ma)
			}

			// The same file with the data section 2 bytes off a 4-byte boundary
			// (the format does not promise alignment): the loader copies the
			// misaligned matrices, so nothing is bound in place but 16-bit
			// scales and biases (2-byte aligned still).
			odd := t.TempDir()
			for _, f := range []string{"config.json", "generation_config.json"} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(odd, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h := file[8:dataStart]
			for (8+len(h))%4 != 2 {
				h = append(slices.Clip(h), ' ')
			}
			out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
			out = append(append(out, h...), file[dataStart:]...)
			if err := os.WriteFile(filepath.Join(odd, "model.safetensors"), out, 0o644); err != nil {
				t.Fatal(err)
			}
			ob := interpreter(t).(*kernels.Metal)
			om := load(t, odd, ob)
			if s := ob.Stats(); s.MappedBytes != int64(sb16) || s.CopiedBytes == 0 {
				t.Errorf("misaligned file: MappedBytes %d, CopiedBytes %d; want %d (16-bit scales and biases) and the rest of the model", s.MappedBytes, s.CopiedBytes, sb16)
			}
			if !slices.Equal(logits(om), got) {
				t.Error("logits of the misaligned copy differ")
			}
		})
	}
}
