//go:build !darwin

package metal

import (
	"fmt"
	"runtime"
)

// Open compiles source into a Metal library on the system's default GPU.
// Metal exists only on macOS: here Open always returns an error wrapping
// [ErrUnavailable].
func Open(source string) (Device, error) {
	return nil, fmt.Errorf("%w on %s/%s (Metal needs macOS)", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
}
