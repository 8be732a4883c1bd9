//go:build amd64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

type actSet struct {
	name string
	use  func() (restore func())
}

// actSets lists the activation kernels this machine can run, best first, and
// the Go loops; use switches to one and returns the undo.
func actSets() []actSet {
	pick := func(a512, a2 bool) func() func() {
		return func() func() {
			o512, o2 := useActAVX512, useActAVX2
			useActAVX512, useActAVX2 = a512, a2
			return func() { useActAVX512, useActAVX2 = o512, o2 }
		}
	}
	var sets []actSet
	if cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512VL) {
		sets = append(sets, actSet{"avx512", pick(true, true)})
	}
	if cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2, cpuid.FMA3) {
		sets = append(sets, actSet{"avx2", pick(false, true)})
	}
	return append(sets, actSet{"go", pick(false, false)})
}

// attnSets lists the attention kernel sets this machine can run (AVX-512 tiles
// and softmax, AVX2 per-row loops, Go), best first.
func attnSets() []actSet {
	pick := func(a512, a2 bool) func() func() {
		return func() func() {
			o512, o2 := useAttnAVX512, useAttnAVX2
			useAttnAVX512, useAttnAVX2 = a512, a2
			return func() { useAttnAVX512, useAttnAVX2 = o512, o2 }
		}
	}
	var sets []actSet
	if useAttnAVX512 {
		sets = append(sets, actSet{"avx512", pick(true, true)})
	}
	if useAttnAVX2 {
		sets = append(sets, actSet{"avx2", pick(false, true)})
	}
	return append(sets, actSet{"go", pick(false, false)})
}
