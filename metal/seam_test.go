package metal

import (
	"errors"
	"strings"
	"testing"
)

// TestCommandBufferErrorCause: a failed command buffer names its cause and
// the way around it from its code and IOGPU status, and wraps ErrDeviceLost.
func TestCommandBufferErrorCause(t *testing.T) {
	for _, tc := range []struct {
		code int
		text string
		want []string
	}{
		{CodeInternal, "Impacting Interactivity (0000000e:kIOGPUCommandBufferCallbackErrorImpactingInteractivity)", []string{"watchdog", "smaller prompt chunks"}},
		{CodeTimeout, "Caused GPU Timeout Error (00000002:kIOAccelCommandBufferCallbackErrorTimeout)", []string{"timed out", "shorter prompt"}},
		{CodeOutOfMemory, "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)", []string{"out of memory", "-ctx", "close other apps"}},
		{CodeIgnored, "Ignored (for causing prior/excessive GPU errors) (00000004:kIOGPUCommandBufferCallbackErrorSubmissionsIgnored)", []string{"earlier error"}},
		{CodePageFault, "Page fault", []string{"outside its buffers", "selftest"}},
		{CodeInternal, "Internal Error", []string{"GPU error"}},
	} {
		e := &CommandBufferError{Code: tc.code, Text: tc.text, Dispatches: 3, Kernel: "matvec_q4_f32"}
		msg := e.Error()
		for _, w := range append(tc.want, "matvec_q4_f32", "3 dispatches", "load the model again") {
			if !strings.Contains(msg, w) {
				t.Errorf("code %d %q: message lacks %q: %s", tc.code, tc.text, w, msg)
			}
		}
		if !errors.Is(e, ErrDeviceLost) {
			t.Errorf("code %d: does not wrap ErrDeviceLost", tc.code)
		}
	}
	var l Lost
	if l.Err() != nil {
		t.Fatal("zero Lost has an error")
	}
	first := &CommandBufferError{Code: CodeTimeout}
	l.Set(first)
	l.Set(&CommandBufferError{Code: CodeOutOfMemory})
	if got := l.Err(); got != error(first) {
		t.Errorf("Lost.Err = %v, want the first error", got)
	}
}
