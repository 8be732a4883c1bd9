package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// Magic is the first four bytes of every GGUF file ("GGUF").
const Magic = "GGUF"

// DefaultAlignment is the alignment of tensor data when general.alignment is absent.
const DefaultAlignment = 32

// maxDims is ggml's GGML_MAX_DIMS: a tensor has at most four dimensions.
const maxDims = 4

// maxNesting bounds how deeply arrays of arrays may nest.
const maxNesting = 8

// ValueType is the type tag of a metadata value.
type ValueType uint32

// The metadata value types, numbered as in the GGUF specification.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size returns the encoded size of a fixed-size value type, 0 for string and array.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// A KV is one metadata entry. Value holds uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64 or float64 for a scalar; a slice
// of one of those ([]uint8, …, []string) for an array of scalars; and []any (each
// element itself such a slice) for an array of arrays. Type is the scalar type,
// or TypeArray with Elem the element type.
type KV struct {
	Key   string
	Type  ValueType
	Elem  ValueType // element type when Type is TypeArray
	Value any
}

// A Tensor is one entry of the tensor directory with its data.
type Tensor struct {
	Name   string
	Dims   []uint64 // GGUF order: Dims[0] is the contiguous (row) length
	Type   Type
	Offset uint64 // from the start of the data section of its file
	Data   []byte // the tensor's bytes, a view of the mapped file
	Split  int    // index of the file holding it (0 unless split)
}

// Elements returns the number of values.
func (t *Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows returns the number of rows (the product of every dimension but the first)
// and the row length.
func (t *Tensor) Rows() (rows, cols int) {
	if len(t.Dims) == 0 {
		return 1, 1
	}
	rows = 1
	for _, d := range t.Dims[1:] {
		rows *= int(d)
	}
	return rows, int(t.Dims[0])
}

// A File is a parsed GGUF file, or the parts of a split one. Its tensors view
// memory that Close releases.
type File struct {
	Version   uint32
	Alignment int
	KV        []KV      // in file order (the first part's, for a split file)
	Tensors   []*Tensor // in file order, part after part

	kv      map[string]int
	tensors map[string]*Tensor
	maps    [][]byte
	unmap   func([]byte) error
}

// reader is a bounds-checked cursor over the file's bytes.
type reader struct {
	b   []byte
	off int
}

var errShort = errors.New("unexpected end of file")

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) bytes(n uint64) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, errShort
	}
	p := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return p, nil
}

func (r *reader) u32() (uint32, error) {
	p, err := r.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (r *reader) u64() (uint64, error) {
	p, err := r.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	p, err := r.bytes(n)
	if err != nil {
		return "", fmt.Errorf("string of %d bytes runs past the end of the file", n)
	}
	return string(p), nil
}

// Parse reads a GGUF file held in b. The tensors' Data views b, which must stay
// unchanged while they are used. name is used in errors only.
func Parse(name string, b []byte) (*File, error) {
	f, err := parse(b, 0)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", name, err)
	}
	return f, nil
}

// parse reads one file (part split of a split file); errors carry no prefix.
func parse(b []byte, split int) (*File, error) {
	r := &reader{b: b}
	magic, err := r.bytes(4)
	if err != nil || string(magic) != Magic {
		return nil, fmt.Errorf("not a GGUF file (magic %q, want %q)", magic, Magic)
	}
	f := &File{kv: map[string]int{}, tensors: map[string]*Tensor{}}
	if f.Version, err = r.u32(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("version %d is not supported (GGUF v2 and v3 are)", f.Version)
	}
	nt, err := r.u64()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	nkv, err := r.u64()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	// A KV takes at least 12 bytes (an empty key and a type), a tensor info 24
	// (an empty name, the dimension count, the type and the offset).
	if nkv > uint64(r.left())/12 {
		return nil, fmt.Errorf("header: %d metadata entries cannot fit in %d bytes", nkv, len(b))
	}
	if nt > uint64(r.left())/24 {
		return nil, fmt.Errorf("header: %d tensors cannot fit in %d bytes", nt, len(b))
	}
	f.KV = make([]KV, 0, nkv)
	for i := range nkv {
		key, err := r.str()
		if err != nil {
			return nil, fmt.Errorf("metadata entry %d: key: %w", i, err)
		}
		kv, err := r.value(key)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if _, dup := f.kv[key]; dup {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		f.kv[key] = len(f.KV)
		f.KV = append(f.KV, kv)
	}
	f.Alignment = DefaultAlignment
	if kv, ok := f.lookup("general.alignment"); ok {
		a, ok := kv.Value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("key %q: %v (%s) is not a power of two stored as uint32", "general.alignment", kv.Value, kv.typeName())
		}
		f.Alignment = int(a)
	}
	f.Tensors = make([]*Tensor, 0, nt)
	for i := range nt {
		t, err := r.tensorInfo()
		if err != nil {
			if t != nil {
				return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
			}
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		if _, dup := f.tensors[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		t.Split = split
		f.tensors[t.Name] = t
		f.Tensors = append(f.Tensors, t)
	}
	start := (r.off + f.Alignment - 1) / f.Alignment * f.Alignment
	if nt > 0 && start > len(b) {
		return nil, fmt.Errorf("data section at %d starts past the end of the %d-byte file", start, len(b))
	}
	data := b[min(start, len(b)):]
	for _, t := range f.Tensors {
		if t.Offset%uint64(f.Alignment) != 0 {
			return nil, fmt.Errorf("tensor %q: offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		n := t.Type.bytes(t.Elements())
		if t.Offset > uint64(len(data)) || n > uint64(len(data))-t.Offset {
			return nil, fmt.Errorf("tensor %q: offset %d + %d bytes is past the end of the %d-byte data section", t.Name, t.Offset, n, len(data))
		}
		t.Data = data[t.Offset : t.Offset+n : t.Offset+n]
	}
	byOff := append([]*Tensor(nil), f.Tensors...)
	sort.Slice(byOff, func(i, j int) bool { return byOff[i].Offset < byOff[j].Offset })
	for i := 1; i < len(byOff); i++ {
		a, c := byOff[i-1], byOff[i]
		if c.Offset < a.Offset+uint64(len(a.Data)) {
			return nil, fmt.Errorf("tensors %q and %q overlap", a.Name, c.Name)
		}
	}
	return f, nil
}

// value reads one metadata value after its key.
func (r *reader) value(key string) (KV, error) {
	t, err := r.u32()
	if err != nil {
		return KV{}, fmt.Errorf("type: %w", err)
	}
	kv := KV{Key: key, Type: ValueType(t)}
	if kv.Type != TypeArray {
		kv.Value, err = r.scalar(kv.Type)
		return kv, err
	}
	kv.Elem, kv.Value, err = r.array(0)
	return kv, err
}

// scalar reads one value of a non-array type.
func (r *reader) scalar(t ValueType) (any, error) {
	if t == TypeString {
		return r.str()
	}
	n := t.size()
	if n == 0 {
		return nil, fmt.Errorf("unknown value type %d", uint32(t))
	}
	p, err := r.bytes(uint64(n))
	if err != nil {
		return nil, err
	}
	return decodeScalar(t, p)
}

func decodeScalar(t ValueType, p []byte) (any, error) {
	switch t {
	case TypeUint8:
		return p[0], nil
	case TypeInt8:
		return int8(p[0]), nil
	case TypeUint16:
		return binary.LittleEndian.Uint16(p), nil
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(p)), nil
	case TypeUint32:
		return binary.LittleEndian.Uint32(p), nil
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(p)), nil
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(p)), nil
	case TypeBool:
		if p[0] > 1 {
			return nil, fmt.Errorf("bool value %d is not 0 or 1", p[0])
		}
		return p[0] == 1, nil
	case TypeUint64:
		return binary.LittleEndian.Uint64(p), nil
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(p)), nil
	case TypeFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(p)), nil
	}
	return nil, fmt.Errorf("unknown value type %d", uint32(t))
}

// array reads an array's element type, count and elements. Counts are checked
// against the bytes left before anything is allocated.
func (r *reader) array(depth int) (ValueType, any, error) {
	if depth >= maxNesting {
		return 0, nil, fmt.Errorf("arrays nest more than %d deep", maxNesting)
	}
	et, err := r.u32()
	if err != nil {
		return 0, nil, fmt.Errorf("array type: %w", err)
	}
	elem := ValueType(et)
	n, err := r.u64()
	if err != nil {
		return elem, nil, fmt.Errorf("array length: %w", err)
	}
	minSize := uint64(elem.size())
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
	}
	if minSize == 0 {
		return elem, nil, fmt.Errorf("array of unknown value type %d", et)
	}
	if n > uint64(r.left())/minSize {
		return elem, nil, fmt.Errorf("array of %d %s values runs past the end of the file", n, elem)
	}
	switch elem {
	case TypeString:
		s := make([]string, n)
		for i := range s {
			if s[i], err = r.str(); err != nil {
				return elem, nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return elem, s, nil
	case TypeArray:
		s := make([]any, n)
		for i := range s {
			if _, s[i], err = r.array(depth + 1); err != nil {
				return elem, nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return elem, s, nil
	}
	p, _ := r.bytes(n * minSize)
	v, err := decodeArray(elem, p, int(n))
	return elem, v, err
}

func decodeArray(t ValueType, p []byte, n int) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8(nil), p...), nil
	case TypeInt8:
		return fill(n, func(i int) int8 { return int8(p[i]) }), nil
	case TypeUint16:
		return fill(n, func(i int) uint16 { return le.Uint16(p[2*i:]) }), nil
	case TypeInt16:
		return fill(n, func(i int) int16 { return int16(le.Uint16(p[2*i:])) }), nil
	case TypeUint32:
		return fill(n, func(i int) uint32 { return le.Uint32(p[4*i:]) }), nil
	case TypeInt32:
		return fill(n, func(i int) int32 { return int32(le.Uint32(p[4*i:])) }), nil
	case TypeFloat32:
		return fill(n, func(i int) float32 { return math.Float32frombits(le.Uint32(p[4*i:])) }), nil
	case TypeBool:
		for i, c := range p {
			if c > 1 {
				return nil, fmt.Errorf("element %d: bool value %d is not 0 or 1", i, c)
			}
		}
		return fill(n, func(i int) bool { return p[i] == 1 }), nil
	case TypeUint64:
		return fill(n, func(i int) uint64 { return le.Uint64(p[8*i:]) }), nil
	case TypeInt64:
		return fill(n, func(i int) int64 { return int64(le.Uint64(p[8*i:])) }), nil
	case TypeFloat64:
		return fill(n, func(i int) float64 { return math.Float64frombits(le.Uint64(p[8*i:])) }), nil
	}
	return nil, fmt.Errorf("array of unknown value type %d", uint32(t))
}

func fill[T any](n int, f func(int) T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

// tensorInfo reads one tensor directory entry and checks its shape and type.
// It returns the partial tensor (for its name) along with an error.
func (r *reader) tensorInfo() (*Tensor, error) {
	name, err := r.str()
	if err != nil {
		return nil, fmt.Errorf("name: %w", err)
	}
	t := &Tensor{Name: name}
	nd, err := r.u32()
	if err != nil {
		return t, fmt.Errorf("dimension count: %w", err)
	}
	if nd > maxDims {
		return t, fmt.Errorf("%d dimensions (at most %d)", nd, maxDims)
	}
	t.Dims = make([]uint64, nd)
	elems := uint64(1)
	for i := range t.Dims {
		if t.Dims[i], err = r.u64(); err != nil {
			return t, fmt.Errorf("dimension %d: %w", i, err)
		}
		hi, lo := bits.Mul64(elems, t.Dims[i])
		if hi != 0 || lo > math.MaxInt64/8 {
			return t, fmt.Errorf("dimensions %v overflow", t.Dims[:i+1])
		}
		elems = lo
	}
	ty, err := r.u32()
	if err != nil {
		return t, fmt.Errorf("type: %w", err)
	}
	t.Type = Type(ty)
	bs := t.Type.BlockSize()
	if bs == 0 {
		return t, fmt.Errorf("unknown ggml type %d", ty)
	}
	if len(t.Dims) > 0 && t.Dims[0]%uint64(bs) != 0 {
		return t, fmt.Errorf("row length %d is not a multiple of the %s block size %d", t.Dims[0], t.Type, bs)
	}
	if t.Offset, err = r.u64(); err != nil {
		return t, fmt.Errorf("offset: %w", err)
	}
	return t, nil
}

func (kv KV) typeName() string {
	if kv.Type == TypeArray {
		return "array of " + kv.Elem.String()
	}
	return kv.Type.String()
}

func (f *File) lookup(key string) (*KV, bool) {
	i, ok := f.kv[key]
	if !ok {
		return nil, false
	}
	return &f.KV[i], true
}

// Has reports whether the metadata has key.
func (f *File) Has(key string) bool { _, ok := f.kv[key]; return ok }

// Value returns the value of key, or nil.
func (f *File) Value(key string) any {
	kv, ok := f.lookup(key)
	if !ok {
		return nil
	}
	return kv.Value
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

func typeErr(kv *KV, want string) error {
	return fmt.Errorf("gguf: key %q is %s, want %s", kv.Key, kv.typeName(), want)
}

// String returns the string value of key; ok is false when key is absent.
func (f *File) String(key string) (s string, ok bool, err error) {
	kv, ok := f.lookup(key)
	if !ok {
		return "", false, nil
	}
	s, isStr := kv.Value.(string)
	if !isStr {
		return "", true, typeErr(kv, "string")
	}
	return s, true, nil
}

// Uint returns the value of key, which may be stored as any integer type but must
// not be negative; ok is false when key is absent.
func (f *File) Uint(key string) (v uint64, ok bool, err error) {
	kv, ok := f.lookup(key)
	if !ok {
		return 0, false, nil
	}
	var i int64
	switch x := kv.Value.(type) {
	case uint8:
		return uint64(x), true, nil
	case uint16:
		return uint64(x), true, nil
	case uint32:
		return uint64(x), true, nil
	case uint64:
		return x, true, nil
	case int8:
		i = int64(x)
	case int16:
		i = int64(x)
	case int32:
		i = int64(x)
	case int64:
		i = x
	default:
		return 0, true, typeErr(kv, "an integer")
	}
	if i < 0 {
		return 0, true, fmt.Errorf("gguf: key %q is %d, want a non-negative integer", key, i)
	}
	return uint64(i), true, nil
}

// Float returns the value of key stored as float32, float64 or an integer type;
// ok is false when key is absent. A float32 is widened exactly.
func (f *File) Float(key string) (v float64, ok bool, err error) {
	kv, ok := f.lookup(key)
	if !ok {
		return 0, false, nil
	}
	switch x := kv.Value.(type) {
	case float32:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	}
	if u, _, err := f.Uint(key); err == nil {
		return float64(u), true, nil
	}
	return 0, true, typeErr(kv, "a number")
}

// Bool returns the value of key stored as bool; ok is false when key is absent.
func (f *File) Bool(key string) (v, ok bool, err error) {
	kv, ok := f.lookup(key)
	if !ok {
		return false, false, nil
	}
	b, isBool := kv.Value.(bool)
	if !isBool {
		return false, true, typeErr(kv, "bool")
	}
	return b, true, nil
}

// Strings returns the value of key stored as an array of strings.
func (f *File) Strings(key string) (s []string, ok bool, err error) {
	kv, ok := f.lookup(key)
	if !ok {
		return nil, false, nil
	}
	s, isStrs := kv.Value.([]string)
	if !isStrs {
		return nil, true, typeErr(kv, "array of string")
	}
	return s, true, nil
}

// Float32s returns the value of key stored as an array of float32.
func (f *File) Float32s(key string) (s []float32, ok bool, err error) {
	kv, ok := f.lookup(key)
	if !ok {
		return nil, false, nil
	}
	s, isF := kv.Value.([]float32)
	if !isF {
		return nil, true, typeErr(kv, "array of float32")
	}
	return s, true, nil
}

// Int32s returns the value of key stored as an array of any integer type, each
// value in int32 range.
func (f *File) Int32s(key string) (s []int32, ok bool, err error) {
	kv, ok := f.lookup(key)
	if !ok {
		return nil, false, nil
	}
	conv := func(n int, at func(int) int64) ([]int32, error) {
		out := make([]int32, n)
		for i := range out {
			v := at(i)
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("gguf: key %q: element %d (%d) is out of int32 range", key, i, v)
			}
			out[i] = int32(v)
		}
		return out, nil
	}
	switch x := kv.Value.(type) {
	case []int32:
		return x, true, nil
	case []uint8:
		s, err = conv(len(x), func(i int) int64 { return int64(x[i]) })
	case []int8:
		s, err = conv(len(x), func(i int) int64 { return int64(x[i]) })
	case []uint16:
		s, err = conv(len(x), func(i int) int64 { return int64(x[i]) })
	case []int16:
		s, err = conv(len(x), func(i int) int64 { return int64(x[i]) })
	case []uint32:
		s, err = conv(len(x), func(i int) int64 { return int64(x[i]) })
	case []int64:
		s, err = conv(len(x), func(i int) int64 { return x[i] })
	case []uint64:
		s, err = conv(len(x), func(i int) int64 {
			if x[i] > math.MaxInt64 {
				return math.MaxInt64
			}
			return int64(x[i])
		})
	default:
		return nil, true, typeErr(kv, "array of integers")
	}
	return s, true, err
}
