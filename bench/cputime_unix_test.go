//go:build unix

package main

import "syscall"

// cpuTime is the process's user and system CPU time in seconds: on a shared
// machine it counts this process's work, not the other processes' turns.
func cpuTime() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
