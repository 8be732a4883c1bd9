//go:build darwin

#include "textflag.h"

// func threadPointer() uintptr
// The thread's TSD base, as Go's runtime reads it on darwin/arm64
// (runtime/tls_arm64.h, load_g): MRS TPIDRRO_EL0 with the low 3 bits cleared.
TEXT ·threadPointer(SB), NOSPLIT, $0-8
	WORD $0xd53bd060 // MRS TPIDRRO_EL0, R0
	AND  $0xfffffffffffffff8, R0
	MOVD R0, ret+0(FP)
	RET
