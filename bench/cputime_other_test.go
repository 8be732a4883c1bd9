//go:build !unix

package main

// cpuTime is 0 where getrusage is missing: the CPU-time metrics read 0.
func cpuTime() float64 { return 0 }
