// Package msltest opens MSL interpreter devices in tests.
//
// With CI=true a missing compiler fails the test; elsewhere the test is
// skipped with a message saying what to install. Devices are strict: divergent
// barriers and collectives, and shuffles from inactive lanes, are errors.
package msltest

import (
	"errors"
	"os"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
)

// Open compiles files (cached between tests) and returns a strict device,
// released when the test ends.
func Open(tb testing.TB, files ...msl.File) *msl.Device {
	tb.Helper()
	return OpenOptions(tb, msl.Options{Strict: true}, files...)
}

// OpenOptions is Open with explicit options (Strict is not forced).
func OpenOptions(tb testing.TB, opts msl.Options, files ...msl.File) *msl.Device {
	tb.Helper()
	Require(tb)
	d, err := msl.Open(files, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Release)
	return d
}

// Require skips the test (or fails it when CI=true) unless the interpreter
// can run here.
func Require(tb testing.TB) {
	tb.Helper()
	err := msl.Available()
	switch {
	case err == nil:
	case errors.Is(err, msl.ErrUnsupported):
		tb.Skip(err)
	case os.Getenv("CI") == "true":
		tb.Fatalf("%v (CI=true: the MSL interpreter is required)", err)
	default:
		tb.Skip(err)
	}
}
