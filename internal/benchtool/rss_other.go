//go:build !unix

package benchtool

// resetPeakRSS does nothing here.
func resetPeakRSS() bool { return false }

// peakRSS is not measured on this system (Windows, Plan 9, wasm): the load
// row leaves it empty.
func peakRSS() (int64, string) { return 0, "" }

// cpuTime is not measured on this system: the load row leaves it empty.
func cpuTime() float64 { return 0 }
