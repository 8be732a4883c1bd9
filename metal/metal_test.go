package metal

import (
	"errors"
	"runtime"
	"testing"
)

func TestOpenUnavailable(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("Metal may be available on darwin; see metal_darwin_test.go")
	}
	d, err := Open("kernel void k() {}")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open on %s/%s: got (%v, %v), want an error wrapping ErrUnavailable", runtime.GOOS, runtime.GOARCH, d, err)
	}
	if d != nil {
		t.Errorf("Open returned a device with its error: %v", d)
	}
}

func TestReleaseCheck(t *testing.T) {
	var c releaseCheck
	if c.release("buffer") {
		t.Fatal("first release reported as a repeat")
	}
	if invariants {
		defer func() {
			if recover() == nil {
				t.Error("second release did not panic in an ingot_invariants build")
			}
		}()
	}
	if !c.release("buffer") {
		t.Error("second release not reported as a repeat")
	}
}
