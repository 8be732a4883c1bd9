package kernels

import (
	"fmt"
	"unsafe"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// DType is the element type of a [Tensor].
type DType uint8

// The element types. Q2…Q8 are MLX "affine" quantization: each group of
// Tensor.GroupSize consecutive input elements has a scale and a bias, and
// w = scale·q + bias with q the unsigned code (codes packed little end first into
// uint32 words).
const (
	DTypeF32 DType = iota
	DTypeF16
	DTypeBF16
	DTypeQ2
	DTypeQ3
	DTypeQ4
	DTypeQ5
	DTypeQ6
	DTypeQ8
	// DTypeMXFP4 is OCP Microscaling FP4 (gpt-oss's expert weights): each
	// block of 32 consecutive input elements is 17 bytes, its E8M0 scale byte
	// e and then 16 bytes of E2M1 codes, element 2j in the low nibble of
	// byte j and 2j+1 in the high (the byte order of Hugging Face's _blocks
	// and MLX's uint32 words alike); w = fp4(code)·2^(e−127) (see
	// cpu.MXFP4). No Scales or Biases: a row is its blocks.
	DTypeMXFP4
	// DTypeQ8_0, DTypeQ4_0, DTypeQ4K, DTypeQ5K and DTypeQ6K are GGUF's
	// (ggml's) block types kept as stored: each row is K/32 (Q8_0, Q4_0) or
	// K/256 (the K-quants) blocks of the file's bytes, with their f16 scales
	// inside; w is what gguf-py's dequantize computes, in float32 (see
	// cpu.KQuant). No Scales or Biases.
	DTypeQ8_0
	DTypeQ4_0
	DTypeQ4K
	DTypeQ5K
	DTypeQ6K
)

var dtypeNames = [...]string{"f32", "f16", "bf16", "q2", "q3", "q4", "q5", "q6", "q8", "mxfp4",
	"q8_0", "q4_0", "q4_k", "q5_k", "q6_k"}

// blockGeom is each GGUF block type's values and bytes per block (ggml's
// blck_size and type_size), indexed by DType - DTypeQ8_0.
var blockGeom = [...]struct{ vals, bytes int }{{32, 34}, {32, 18}, {256, 144}, {256, 176}, {256, 210}}

// Block reports whether d is a GGUF block type (DTypeQ8_0…DTypeQ6K).
func (d DType) Block() bool { return d >= DTypeQ8_0 && d <= DTypeQ6K }

// BlockSize returns the values and bytes per block of a GGUF block type
// (Q8_0: 32 and 34; Q4_0: 32, 18; Q4_K: 256, 144; Q5_K: 256, 176; Q6_K:
// 256, 210), or 0, 0 for any other type.
func (d DType) BlockSize() (vals, bytes int) {
	if !d.Block() {
		return 0, 0
	}
	g := blockGeom[d-DTypeQ8_0]
	return g.vals, g.bytes
}

// String returns the short name used in kernel names and flags ("f32", "q4", …).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Quantized reports whether d is an affine-quantized type.
func (d DType) Quantized() bool { return d >= DTypeQ2 && d <= DTypeQ8 }

// Float reports whether d is f32, f16 or bf16.
func (d DType) Float() bool { return d <= DTypeBF16 }

// Bits returns the bits per element: 32, 16, or the quantization width (for
// the block types, the code width: their RowBytes counts the scales too).
func (d DType) Bits() int {
	switch d {
	case DTypeF32:
		return 32
	case DTypeF16, DTypeBF16:
		return 16
	case DTypeQ2:
		return 2
	case DTypeQ3:
		return 3
	case DTypeQ4, DTypeMXFP4, DTypeQ4_0, DTypeQ4K:
		return 4
	case DTypeQ5, DTypeQ5K:
		return 5
	case DTypeQ6, DTypeQ6K:
		return 6
	case DTypeQ8, DTypeQ8_0:
		return 8
	}
	panic(fmt.Sprintf("kernels: unknown dtype %d", d))
}

// QuantDType returns the affine type with the given bits, or false.
func QuantDType(bits int) (DType, bool) {
	switch bits {
	case 2:
		return DTypeQ2, true
	case 3:
		return DTypeQ3, true
	case 4:
		return DTypeQ4, true
	case 5:
		return DTypeQ5, true
	case 6:
		return DTypeQ6, true
	case 8:
		return DTypeQ8, true
	}
	return 0, false
}

// RowBytes returns the bytes one row of cols elements occupies. For affine
// types it is the packed codes only (cols·bits/8, a whole number of uint32
// words); for MXFP4 the blocks, scale bytes included (17 bytes per 32
// elements: 4.25 bits a weight); for the GGUF block types the blocks
// (BlockSize: Q8_0 34 bytes per 32 elements, Q4_K 144 per 256, Q6_K 210 per
// 256).
func (d DType) RowBytes(cols int) int {
	if d == DTypeMXFP4 {
		return cols / 32 * 17
	}
	if vals, bytes := d.BlockSize(); vals > 0 {
		return cols / vals * bytes
	}
	return cols * d.Bits() / 8
}

// elemAlign is the alignment in bytes that viewing or reading d's data as
// elements needs: f32 values and the packed uint32 codes of affine types are
// 4-byte words, f16 and bf16 2-byte halves, MXFP4 and GGUF blocks bytes.
func elemAlign(d DType) int {
	switch d {
	case DTypeF16, DTypeBF16:
		return 2
	case DTypeMXFP4, DTypeQ8_0, DTypeQ4_0, DTypeQ4K, DTypeQ5K, DTypeQ6K:
		return 1 // read as bytes: 17-byte blocks, GGUF's blocks
	}
	return 4
}

// A Tensor is a row-major array on some device. Shape is the logical shape; a
// quantized tensor's Shape is that of the dequantized matrix (rows, cols), its
// Data holds the packed codes and Scales/Biases (rows, cols/GroupSize) hold the
// per-group parameters, both in one of f32, f16 or bf16: MLX checkpoints and
// ingot's own quantizer store them in 16 bits, which every conversion to f32
// keeps exact (see [Tensor.ToF32]); backends read them as stored or widen them
// at upload.
//
// Data holds the bytes on the host (little-endian) for the CPU backend and for
// weights before upload; Buf and Off name device storage for GPU backends.
// Tensors made by [Tensor.Rows] share storage with their parent.
type Tensor struct {
	DType DType
	Shape []int
	Data  []byte

	Scales, Biases *Tensor // affine quantization only
	GroupSize      int     // affine quantization only

	Buf any // device storage, owned by the backend that made the tensor
	Off int // byte offset of element 0 in Buf
}

// Len returns the number of elements.
func (t *Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Cols returns the size of the last (contiguous) dimension.
func (t *Tensor) Cols() int { return t.Shape[len(t.Shape)-1] }

// NumRows returns the product of all but the last dimension.
func (t *Tensor) NumRows() int { return t.Len() / t.Cols() }

// Rows returns the view of rows [r0, r1) of a 2-D tensor. It shares storage.
func (t *Tensor) Rows(r0, r1 int) *Tensor {
	if len(t.Shape) != 2 || r0 < 0 || r1 < r0 || r1 > t.Shape[0] {
		panic(fmt.Sprintf("kernels: Rows(%d, %d) of shape %v", r0, r1, t.Shape))
	}
	rb := t.DType.RowBytes(t.Shape[1])
	v := &Tensor{DType: t.DType, Shape: []int{r1 - r0, t.Shape[1]}, GroupSize: t.GroupSize}
	if t.Data != nil { // a host tensor: the view is a host tensor too, to be uploaded itself
		v.Data = t.Data[r0*rb : r1*rb]
	} else {
		v.Buf, v.Off = t.Buf, t.Off+r0*rb
	}
	if t.Scales != nil {
		v.Scales, v.Biases = t.Scales.Rows(r0, r1), t.Biases.Rows(r0, r1)
	}
	return v
}

// F32 returns the host data of an f32 tensor as a []float32 view (no copy).
func (t *Tensor) F32() []float32 {
	if t.DType != DTypeF32 {
		panic("kernels: F32 of " + t.DType.String() + " tensor")
	}
	return bytesAs[float32](t.Data)
}

// ToF32 returns the host data of an f32, f16 or bf16 tensor as float32: a
// view of an f32 tensor's data (no copy), else a new slice of the widened
// values (exact: every f16 and bf16 value is a float32).
func (t *Tensor) ToF32() []float32 {
	switch t.DType {
	case DTypeF32:
		return t.F32()
	case DTypeF16, DTypeBF16:
		u := t.U16()
		f := make([]float32, len(u))
		if t.DType == DTypeF16 {
			for i, v := range u {
				f[i] = cpu.F16ToF32(v)
			}
		} else {
			for i, v := range u {
				f[i] = cpu.BF16ToF32(v)
			}
		}
		return f
	}
	panic("kernels: ToF32 of " + t.DType.String() + " tensor")
}

// WidenAffine returns t itself unless it is an affine-quantized host tensor
// with 16-bit scales and biases; then a shallow copy of t (the same codes)
// whose scales and biases are new f32 tensors of the same values.
func WidenAffine(t *Tensor) *Tensor {
	if t.Scales == nil || t.Scales.DType == DTypeF32 && t.Biases.DType == DTypeF32 {
		return t
	}
	c := *t
	c.Scales = FromF32(t.Scales.ToF32(), t.Scales.Shape...)
	c.Biases = FromF32(t.Biases.ToF32(), t.Biases.Shape...)
	return &c
}

// U16 returns the host data of an f16 or bf16 tensor as a []uint16 view.
func (t *Tensor) U16() []uint16 { return bytesAs[uint16](t.Data) }

// U32 returns the host data of a quantized tensor's packed codes as a []uint32 view.
func (t *Tensor) U32() []uint32 { return bytesAs[uint32](t.Data) }

// bytesAs reinterprets b as a slice of T. b must be aligned for T; Go's allocator
// and mmap guarantee that, and the safetensors loader copies misaligned tensors.
func bytesAs[T any](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%uintptr(unsafe.Alignof(z)) != 0 {
		panic("kernels: misaligned tensor data")
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz)
}

// Aligned reports whether b may be viewed as elements of size n bytes.
func Aligned(b []byte, n int) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(n) == 0
}

// FromF32 wraps a float32 slice as a host f32 tensor of the given shape (no copy).
func FromF32(x []float32, shape ...int) *Tensor {
	t := &Tensor{DType: DTypeF32, Shape: shape}
	if t.Len() != len(x) {
		panic(fmt.Sprintf("kernels: FromF32: %d elements for shape %v", len(x), shape))
	}
	if len(x) > 0 {
		t.Data = unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
	}
	return t
}

// mustShape panics unless t has shape (rows, cols). Fixed arity keeps the check
// allocation-free on the decode path.
func mustShape(op, arg string, t *Tensor, rows, cols int) {
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		panic(fmt.Sprintf("kernels: %s: %s has shape %v, want [%d %d]", op, arg, t.Shape, rows, cols))
	}
}
