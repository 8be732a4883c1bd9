package metal

// Info describes the GPU behind a [Device] returned by [Open]. The memory
// admission check (compare model plus KV cache bytes with MaxWorkingSet before
// loading) and `run selftest` reports read it.
type Info struct {
	Name            string // MTLDevice.name, e.g. "Apple M2 Max"
	MaxWorkingSet   int64  // recommendedMaxWorkingSetSize in bytes: keep resident bytes below it
	MaxBufferLength int64  // maxBufferLength in bytes: the largest single buffer; split larger files
	UnifiedMemory   bool   // hasUnifiedMemory: CPU and GPU share memory (every Apple silicon GPU)
	Family          int    // the highest MTLGPUFamilyApple* supported (1007 = Apple7, M1); Open refuses < 1007
	SIMDWidth       int    // threadExecutionWidth of the library's first pipeline; Open refuses ≠ 32

	MaxThreadgroupMemory int    // maxThreadgroupMemoryLength in bytes, the sum over [[threadgroup(i)]]
	AllocatedSize        int64  // currentAllocatedSize in bytes when Info was called
	LanguageVersion      string // MSL version the library was compiled as, e.g. "3.1"; "" for the OS default
	OSVersion            string // macOS product version, e.g. "14.5"
}

// An Informer is a [Device] that can describe its hardware. Devices returned
// by [Open] implement it:
//
//	if in, ok := dev.(metal.Informer); ok && need > in.Info().MaxWorkingSet { … }
type Informer interface {
	Info() Info
}
