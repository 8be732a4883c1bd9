//go:build darwin

package metal

// dispatch sends dispatchThreadgroups:threadsPerThreadgroup: with e.sizes.
// System V x86-64 passes the two 24-byte MTLSizes in memory on the stack,
// which SyscallN cannot do, so this goes through the RegisterFunc
// trampoline (allocating; Open refuses darwin/amd64 anyway, see checkGPU).
func (e *encoder) dispatch() {
	msgDispatch(e.id, selDispatchThreadgroups, e.sizes[0], e.sizes[1])
}
