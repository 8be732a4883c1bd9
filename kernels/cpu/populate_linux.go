package cpu

import (
	"os"
	"syscall"
	"unsafe"
)

// populate asks the system to back b's pages with memory now, in one call,
// rather than one fault a page on first write: on a VM a fault costs
// microseconds, and a model's blocked weights are hundreds of thousands of
// pages. Advice only: an error (a kernel before 5.14) leaves the faults.
func populate(b []byte) {
	const madvPopulateWrite = 23 // MADV_POPULATE_WRITE
	if len(b) < 1<<20 {
		return
	}
	pg := uintptr(os.Getpagesize()) // madvise takes whole pages
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	_ = syscall.Madvise(b[(pg-p%pg)%pg:], madvPopulateWrite)
}
