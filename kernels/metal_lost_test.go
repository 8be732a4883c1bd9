package kernels_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/model"
)

// TestMetalDeviceLost injects command-buffer errors on the interpreter device
// under a session of the tinycode model: the error names its cause and how to
// avoid it, every later call returns it (no work is submitted to the dead
// queue), and a model loaded again on a freshly opened device works.
func TestMetalDeviceLost(t *testing.T) {
	msltest.Require(t)
	dir := filepath.Join(refDir, "tinycode-llama")
	prompt := []int32{4094, 1, 2}
	open := func() (*model.Session, *msl.Device) {
		b, err := kernels.Open("metal-emu", 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return loadOpts(t, dir, model.Options{Backend: b}, model.SessionOptions{Context: 16}), b.(*kernels.Metal).Device().(*msl.Device)
	}
	s, _ := open()
	want, err := s.Forward(context.Background(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	want = slices.Clone(want)
	for _, tc := range []struct {
		name string
		err  metal.CommandBufferError
		hint []string // in the message
	}{
		{"watchdog", metal.CommandBufferError{Code: metal.CodeInternal, Text: "Impacting Interactivity (0000000e:kIOGPUCommandBufferCallbackErrorImpactingInteractivity)"},
			[]string{"watchdog", "shorter prompt", "load the model again"}},
		{"timeout", metal.CommandBufferError{Code: metal.CodeTimeout, Text: "Caused GPU Timeout Error (00000002:kIOAccelCommandBufferCallbackErrorTimeout)"},
			[]string{"timed out", "smaller prompt chunks"}},
		{"out of memory", metal.CommandBufferError{Code: metal.CodeOutOfMemory, Text: "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"},
			[]string{"out of memory", "smaller context", "close other apps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dev := open()
			if _, err := s.Forward(context.Background(), prompt[:1]); err != nil {
				t.Fatal(err)
			}
			inj := tc.err
			dev.FailCommandBuffer(&inj)
			_, err := s.Forward(context.Background(), prompt[1:])
			if !errors.Is(err, metal.ErrDeviceLost) {
				t.Fatalf("after an injected %s error: %v, want an error wrapping metal.ErrDeviceLost", tc.name, err)
			}
			for _, h := range tc.hint {
				if !strings.Contains(err.Error(), h) {
					t.Errorf("error lacks %q: %v", h, err)
				}
			}
			before := dev.Counts()
			for range 2 {
				if _, err2 := s.Forward(context.Background(), prompt[:1]); !errors.Is(err2, metal.ErrDeviceLost) {
					t.Errorf("a later call: %v, want the device-lost error", err2)
				}
			}
			if after := dev.Counts(); after.CommandBuffers != before.CommandBuffers || after.Dispatches != before.Dispatches {
				t.Errorf("a lost device ran %d command buffers and %d dispatches more, want none",
					after.CommandBuffers-before.CommandBuffers, after.Dispatches-before.Dispatches)
			}
		})
	}
	s, _ = open()
	got, err := s.Forward(context.Background(), prompt)
	if err != nil {
		t.Fatalf("a model loaded again on a new device: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Error("a model loaded again on a new device gives other logits")
	}
}

// TestMetalAllocFailure: an allocation failing mid-encode (Embed's token ids
// in a transient buffer) is returned by Sync, and nothing more is dispatched
// until then: a dispatch missing a binding would read the previous one's.
func TestMetalAllocFailure(t *testing.T) {
	b, dev := emuBackend(t, true)
	const V, D, L = 8, 4, 1100 // 4400 bytes of ids: more than setBytes takes
	table := b.New(V, D)
	x, y := b.New(L, D), b.New(L, D)
	tokens := make([]int32, L)
	if err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := dev.Counts()
	dev.FailNewBuffers(true)
	b.Embed(x, table, tokens, 1)
	b.Add(y, x, x)
	err := b.Sync(context.Background())
	dev.FailNewBuffers(false)
	if err == nil || !strings.Contains(err.Error(), "allocation failure") {
		t.Errorf("Sync after a failed allocation: %v, want the allocation error", err)
	}
	if n := dev.Counts().Dispatches - before.Dispatches; n != 0 {
		t.Errorf("%d dispatches encoded after the allocation failed, want 0", n)
	}
	b.Embed(x, table, tokens, 1)
	b.Add(y, x, x)
	if err := b.Sync(context.Background()); err != nil {
		t.Errorf("after the allocation works again: %v", err)
	}
}
