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

// TestCheckGPU: Open refuses what is not an Apple-silicon GPU the kernels
// were written for, saying why.
func TestCheckGPU(t *testing.T) {
	for _, tc := range []struct {
		arch    string
		family  int
		unified bool
		simd    int
		want    string // "" ok
	}{
		{"arm64", FamilyApple7, true, 32, ""},
		{"arm64", FamilyApple9, true, 32, ""},
		{"amd64", FamilyApple7, true, 32, "darwin/amd64"},
		{"amd64", 0, false, 64, "not Apple7"},
		{"arm64", 0, true, 32, "not Apple7"},
		{"arm64", FamilyApple7, false, 32, "unified memory"},
		{"arm64", FamilyApple7, true, 64, "SIMD width is 64"},
	} {
		err := checkGPU(tc.arch, tc.family, tc.unified, tc.simd)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want nil", tc, err)
		case tc.want != "" && (!errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want ErrUnavailable saying %q", tc, err, tc.want)
		}
	}
}

// TestBindingsThreadgroupMemory: a dispatch's threadgroup memory is the sum
// of the lengths set for it plus the pipeline's static memory.
func TestBindingsThreadgroupMemory(t *testing.T) {
	var b Bindings
	b.ThreadgroupMemory(0, 16384)
	b.ThreadgroupMemory(1, 16384)
	if _, err := b.Dispatch(0, 32768); err != nil {
		t.Errorf("32768 bytes in two arguments: %v", err)
	}
	b.ThreadgroupMemory(0, 16384)
	b.ThreadgroupMemory(1, 16384)
	if _, err := b.Dispatch(16, 32768); err == nil || !strings.Contains(err.Error(), "16 (static)") {
		t.Errorf("32768 + 16 static bytes: %v, want an error", err)
	}
	b.ThreadgroupMemory(1, 20000)
	b.ThreadgroupMemory(1, 16000) // set twice: the last length counts
	if _, err := b.Dispatch(0, 16384); err != nil {
		t.Errorf("one argument of 16000 bytes: %v", err)
	}
	if _, err := b.Dispatch(0, 1); err != nil {
		t.Errorf("nothing set for the dispatch: %v", err)
	}
}

// TestBindingsSkip: calls that change nothing are not sent.
func TestBindingsSkip(t *testing.T) {
	type buf struct{ Buffer }
	x, y := &buf{}, &buf{}
	var b Bindings
	for _, tc := range []struct {
		name string
		call func() bool
		want bool
	}{
		{"first buffer", func() bool { return b.Buffer(1, x, 0) }, true},
		{"same buffer", func() bool { return b.Buffer(1, x, 0) }, false},
		{"new offset", func() bool { return b.Buffer(1, x, 16) }, true},
		{"other buffer", func() bool { return b.Buffer(1, y, 16) }, true},
		{"bytes", func() bool { return b.Bytes(0, []byte{1, 2, 3, 4}) }, true},
		{"same bytes", func() bool { return b.Bytes(0, []byte{1, 2, 3, 4}) }, false},
		{"other bytes", func() bool { return b.Bytes(0, []byte{1, 2, 3, 5}) }, true},
		{"buffer over bytes", func() bool { return b.Buffer(0, x, 0) }, true},
		{"bytes over buffer", func() bool { return b.Bytes(0, []byte{1, 2, 3, 5}) }, true},
		{"long bytes", func() bool { return b.Bytes(2, make([]byte, 100)) }, true},
		{"long bytes again", func() bool { return b.Bytes(2, make([]byte, 100)) }, true},
		{"threadgroup", func() bool { return b.ThreadgroupMemory(0, 128) }, true},
		{"same threadgroup", func() bool { return b.ThreadgroupMemory(0, 128) }, false},
	} {
		if got := tc.call(); got != tc.want {
			t.Errorf("%s: sent %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBindingsRuns: buffer bindings go with the dispatch, one call per run of
// consecutive changed indices; an unchanged index the dispatch set too joins
// two runs; setBytes data is bound like a buffer.
func TestBindingsRuns(t *testing.T) {
	type buf struct{ Buffer }
	x, y, z := &buf{}, &buf{}, &buf{}
	var b Bindings
	args := []byte{1, 2, 3, 4}
	step := func(name string, want uint32, wantCalls int64, set func()) {
		t.Helper()
		calls := b.Calls
		set()
		got, err := b.Dispatch(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || b.Calls-calls != wantCalls {
			t.Errorf("%s: bind %b in %d calls, want %b in %d", name, got, b.Calls-calls, want, wantCalls)
		}
	}
	step("first", 0b1111, 2, func() { b.Bytes(0, args); b.Buffer(1, x, 0); b.Buffer(2, y, 0); b.Buffer(3, z, 0) })
	step("same again", 0, 1, func() { b.Bytes(0, args); b.Buffer(1, x, 0); b.Buffer(2, y, 0); b.Buffer(3, z, 0) })
	step("0 and 3 change, 1 and 2 set", 0b1111, 2, func() { b.Bytes(0, []byte{5}); b.Buffer(1, x, 0); b.Buffer(2, y, 0); b.Buffer(3, x, 0) })
	step("0 and 3 change, 1 and 2 not set", 0b1001, 3, func() { b.Bytes(0, args); b.Buffer(3, z, 0) })
	step("2 only", 0b100, 2, func() { b.Buffer(1, x, 0); b.Buffer(2, z, 0) })
	step("0 and 5, 1..4 set but 4 not", 0b100001, 3, func() {
		b.Bytes(0, []byte{6})
		b.Buffer(1, x, 0)
		b.Buffer(2, z, 0)
		b.Buffer(3, z, 0)
		b.Buffer(5, y, 0)
	})
	for _, tc := range []struct {
		mask uint32
		runs [][2]int
	}{
		{0, nil},
		{0b1, [][2]int{{0, 1}}},
		{0b111011, [][2]int{{0, 2}, {3, 3}}},
		{1 << 30, [][2]int{{30, 1}}},
		{0x7fffffff, [][2]int{{0, 31}}},
	} {
		var got [][2]int
		for m := tc.mask; m != 0; {
			var lo, n int
			lo, n, m = NextRun(m)
			got = append(got, [2]int{lo, n})
		}
		if len(got) != len(tc.runs) || Runs(tc.mask) != len(tc.runs) {
			t.Errorf("%b: runs %v (Runs %d), want %v", tc.mask, got, Runs(tc.mask), tc.runs)
			continue
		}
		for i := range got {
			if got[i] != tc.runs[i] {
				t.Errorf("%b: runs %v, want %v", tc.mask, got, tc.runs)
			}
		}
	}
}
