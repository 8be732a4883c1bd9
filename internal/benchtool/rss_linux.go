package benchtool

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// resetPeakRSS sets the process's peak resident set (VmHWM) to its current
// resident set, so that a later [peakRSS] is the peak since now. It reports
// whether it could (Linux ≥ 4.0: writing 5 to /proc/self/clear_refs).
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS returns the process's peak resident set in bytes, anonymous and
// file-backed (mapped weights count once touched), and where the figure comes
// from: on Linux VmHWM in /proc/self/status.
func peakRSS() (int64, string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, ""
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0, ""
			}
			return kb << 10, "VmHWM"
		}
	}
	return 0, ""
}

// cpuTime returns the process's user and system CPU time in seconds: on a
// shared machine it counts this process's work, not the other processes' turns.
func cpuTime() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
