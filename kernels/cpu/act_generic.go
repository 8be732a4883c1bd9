//go:build !amd64 || noasm

package cpu

// gluAsm does nothing without assembly: the callers' scalar loops do it all.
func gluAsm(dst, gate, up []float32, gelu bool) int { return 0 }
