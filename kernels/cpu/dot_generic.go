//go:build (!amd64 && !arm64) || noasm

package cpu

// asmSets lists the assembly kernel sets this build can run, best first; none
// without amd64 or arm64 assembly.
var asmSets []*kernelSet

func absMaxBitsAsm(x []float32) (uint32, bool) { return 0, false }

func quantRowBAsm(xb []int8, x []float32, gs, C int, striped bool, id float64, sums []float64, tsum []int64) bool {
	return false
}

func f16sAsm(dst []float32, src []uint16) int { return 0 }

func f16RowsAsm(dst []float32, src []uint16, n, w, stride int) bool { return false }
