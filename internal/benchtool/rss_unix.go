//go:build unix && !linux

package benchtool

import (
	"runtime"
	"syscall"
)

// resetPeakRSS cannot reset the peak on this system: [peakRSS] is the peak
// since the process started (the bench loads first, so it is the load's).
func resetPeakRSS() bool { return false }

// peakRSS returns the process's peak resident set in bytes since it started,
// from getrusage's ru_maxrss (bytes on macOS, KiB on the BSDs).
func peakRSS() (int64, string) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, ""
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss), "ru_maxrss"
	}
	return int64(ru.Maxrss) << 10, "ru_maxrss"
}

// cpuTime returns the process's user and system CPU time in seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
