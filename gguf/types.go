package gguf

import "fmt"

// Type is a ggml tensor type (enum ggml_type).
type Type uint32

// The ggml tensor types, numbered as in ggml.h. Gaps are types ggml removed.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
)

// typeInfo is a type's name, values per block and bytes per block (ggml's
// type_traits blck_size and type_size).
type typeInfo struct {
	name         string
	block, bytes int
}

var typeInfos = map[Type]typeInfo{
	TypeF32: {"F32", 1, 4}, TypeF16: {"F16", 1, 2}, TypeBF16: {"BF16", 1, 2}, TypeF64: {"F64", 1, 8},
	TypeI8: {"I8", 1, 1}, TypeI16: {"I16", 1, 2}, TypeI32: {"I32", 1, 4}, TypeI64: {"I64", 1, 8},
	TypeQ4_0: {"Q4_0", 32, 18}, TypeQ4_1: {"Q4_1", 32, 20}, TypeQ5_0: {"Q5_0", 32, 22}, TypeQ5_1: {"Q5_1", 32, 24},
	TypeQ8_0: {"Q8_0", 32, 34}, TypeQ8_1: {"Q8_1", 32, 36},
	TypeQ2_K: {"Q2_K", 256, 84}, TypeQ3_K: {"Q3_K", 256, 110}, TypeQ4_K: {"Q4_K", 256, 144},
	TypeQ5_K: {"Q5_K", 256, 176}, TypeQ6_K: {"Q6_K", 256, 210}, TypeQ8_K: {"Q8_K", 256, 292},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66}, TypeIQ2_XS: {"IQ2_XS", 256, 74}, TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
	TypeIQ1_S: {"IQ1_S", 256, 50}, TypeIQ4_NL: {"IQ4_NL", 32, 18}, TypeIQ3_S: {"IQ3_S", 256, 110},
	TypeIQ2_S: {"IQ2_S", 256, 82}, TypeIQ4_XS: {"IQ4_XS", 256, 136}, TypeIQ1_M: {"IQ1_M", 256, 56},
	TypeTQ1_0: {"TQ1_0", 256, 54}, TypeTQ2_0: {"TQ2_0", 256, 66}, TypeMXFP4: {"MXFP4", 32, 17},
}

// String returns ggml's name of the type ("Q4_K", …).
func (t Type) String() string {
	if i, ok := typeInfos[t]; ok {
		return i.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the values per block, 0 for an unknown type.
func (t Type) BlockSize() int { return typeInfos[t].block }

// BlockBytes returns the bytes per block, 0 for an unknown type.
func (t Type) BlockBytes() int { return typeInfos[t].bytes }

// bytes returns the size of n values (n a multiple of the block size).
func (t Type) bytes(n uint64) uint64 {
	i := typeInfos[t]
	return n / uint64(i.block) * uint64(i.bytes)
}

// RowBytes returns the bytes of a row of n values (n a multiple of the block size).
func (t Type) RowBytes(n int) int { return int(t.bytes(uint64(n))) }
