package kernels_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/model"
)

// TestChoose: the one chooser of backends. Off Apple silicon "auto" (and "")
// is CUDA where an NVIDIA GPU is, else the CPU, with a reason saying why;
// "metal" fails with metal.ErrUnavailable; unknown names are an error naming
// them.
func TestChoose(t *testing.T) {
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		t.Skip("on Apple silicon auto may pick Metal: the off-Mac choices are checked elsewhere")
	}
	for _, name := range []string{"auto", "", "AUTO"} {
		b, reason, err := kernels.Choose(name, 1, 1<<30)
		if err != nil {
			t.Fatalf("Choose(%q): %v", name, err)
		}
		gpu := cudaPresent()
		if gpu && (!strings.HasPrefix(b.Name(), "cuda:") || !strings.HasPrefix(reason, "cuda: auto;")) ||
			!gpu && (b.Name() != "cpu" || !strings.Contains(reason, "no Metal or NVIDIA GPU")) {
			t.Errorf("Choose(%q) with an NVIDIA GPU %v: %s, %q", name, gpu, b.Name(), reason)
		}
		b.Close()
	}
	if _, _, err := kernels.Choose("metal", 1, 0); !errors.Is(err, metal.ErrUnavailable) {
		t.Errorf("Choose(metal): %v, want metal.ErrUnavailable", err)
	}
	if _, _, err := kernels.Choose("tpu", 1, 0); err == nil || !strings.Contains(err.Error(), `"tpu"`) {
		t.Errorf("Choose(tpu): %v", err)
	}
	b, reason, err := kernels.Choose("cpu", 3, 0)
	if err != nil || b.(*kernels.CPU).Threads() != 3 || !strings.Contains(reason, "3 threads") {
		t.Errorf("Choose(cpu, 3): %v, %q", err, reason)
	}
	b.Close()
}

// TestWeightBytes: a model reports the weight bytes it reads per token on
// every backend: on metal-emu (tensors in device buffers) the bytes of its
// safetensors tensors, as stored (bf16), not zero.
func TestWeightBytes(t *testing.T) {
	msltest.Require(t)
	dir := filepath.Join(refDir, "tinycode-llama")
	hdr, _, _ := stHeader(t, filepath.Join(dir, "model.safetensors"))
	var want int64
	for name, raw := range hdr {
		var e stEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want += int64(e.Offsets[1] - e.Offsets[0])
	}
	for _, be := range []kernels.Backend{metalEmu(t), nil} {
		m, err := model.Load(context.Background(), dir, model.Options{Backend: be, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		// Norm weights are widened to f32 on upload: count them twice over.
		if got := m.WeightBytes(); got < want || got > want+want/50 {
			t.Errorf("%s: WeightBytes %d, the file's tensors %d", m.Backend().Name(), got, want)
		}
		m.Close()
	}
}

// cudaPresent reports whether an NVIDIA GPU and its driver are here.
func cudaPresent() bool {
	b, _, err := kernels.Choose("cuda", 1, 0)
	if err != nil {
		return false
	}
	b.Close()
	return true
}
