//go:build darwin

package metal

import "unsafe"

// dispatch sends dispatchThreadgroups:threadsPerThreadgroup: with e.sizes.
// An MTLSize is 24 bytes, so AAPCS64 (rule B.4, kept by Apple's arm64 ABI)
// passes each as a pointer to a copy the caller made, in the next integer
// register: e.sizes are those copies.
func (e *encoder) dispatch() {
	e.args = [6]uintptr{uintptr(e.id), uintptr(selDispatchThreadgroups),
		uintptr(unsafe.Pointer(&e.sizes[0])), uintptr(unsafe.Pointer(&e.sizes[1]))}
	e.send(4)
}

// threadID identifies the calling OS thread without a call: the base of its
// thread-specific data, which Darwin keeps in TPIDRRO_EL0 (what pthread_self
// and Go's runtime read; thread_darwin_arm64.s).
func threadID() uintptr { return threadPointer() }

func threadPointer() uintptr
