package kernels_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/model"
)

// unlimited hides the interpreter's metal.WorkLimiter: its command buffers
// are split only where the caller synchronizes, as CUDA's are.
type unlimited struct{ metal.Device }

// emuBackend returns a metal-emu backend and its interpreter device (whose
// counters the test reads); limit false hides the device's command-buffer
// limit.
func emuBackend(t *testing.T, limit bool) (*kernels.Metal, *msl.Device) {
	t.Helper()
	msltest.Require(t)
	dev, err := kernels.OpenEmulator(2)
	if err != nil {
		t.Fatal(err)
	}
	var d metal.Device = dev
	if !limit {
		d = unlimited{dev}
	}
	b, err := kernels.NewMetal(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, dev
}

// TestMetalCommandBufferSplit runs a 1024-token prompt (two 512-token prefill
// chunks) on metal-emu: the backend must commit many short command buffers,
// as the macOS watchdog needs, with the logits bit for bit those of one
// command buffer per Sync.
func TestMetalCommandBufferSplit(t *testing.T) {
	dir := filepath.Join(refDir, "tinycode-llama")
	prompt := make([]int32, 1024)
	for i := range prompt {
		prompt[i] = int32(1 + i*37%4000)
	}
	type counts struct{ dispatches, cbs, waits int64 }
	run := func(limit bool) ([]float32, counts) {
		b, dev := emuBackend(t, limit)
		s := loadOpts(t, dir, model.Options{Backend: b}, model.SessionOptions{Context: len(prompt)})
		stream := s.Backend().(*kernels.Metal)
		before := dev.Counts()
		stream.ResetStats()
		logits, err := s.Forward(context.Background(), prompt)
		if err != nil {
			t.Fatal(err)
		}
		c := dev.Counts()
		return slices.Clone(logits), counts{c.Dispatches - before.Dispatches, c.CommandBuffers - before.CommandBuffers, stream.Stats().Waits}
	}
	got, split := run(true)
	want, one := run(false)
	t.Logf("1024-token prompt: %d dispatches in %d command buffers, %d CPU waits (one per Sync: %d command buffers)",
		split.dispatches, split.cbs, split.waits, one.cbs)
	if split.cbs < 4 {
		t.Errorf("1024-token prompt ran as %d command buffers, want ≥ 4", split.cbs)
	}
	if split.waits != one.waits {
		t.Errorf("%d CPU waits with split command buffers, %d without: splitting must not wait", split.waits, one.waits)
	}
	if !slices.Equal(got, want) {
		t.Errorf("logits differ with split command buffers")
	}
}
