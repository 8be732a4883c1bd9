//go:build darwin

package metal

// dispatch sends dispatchThreadgroups:threadsPerThreadgroup: with e.sizes.
// System V x86-64 passes the two 24-byte MTLSizes in memory on the stack,
// which SyscallN cannot do, so this goes through the RegisterFunc
// trampoline (allocating; Open refuses darwin/amd64 anyway, see checkGPU).
func (e *encoder) dispatch() {
	e.sent++
	msgDispatch(e.id, selDispatchThreadgroups, e.sizes[0], e.sizes[1])
}

// threadID identifies the calling OS thread: pthread_self, a call the
// counts (seam.go) leave out (Open refuses darwin/amd64).
func threadID() uintptr { return pthreadSelf() }
