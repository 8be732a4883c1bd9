package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ggufDir is the GGUF oracle data beside the checkout (see its README.md).
const ggufDir = "../../shared/testdata/gguf"

// builder writes GGUF files for tests, little-endian, version 3 unless set.
type builder struct {
	version uint32
	align   int
	kvs     bytes.Buffer
	nkv     int
	infos   bytes.Buffer
	nt      int
	data    bytes.Buffer
}

func newBuilder() *builder { return &builder{version: 3, align: 32} }

func putStr(w *bytes.Buffer, s string) {
	binary.Write(w, binary.LittleEndian, uint64(len(s)))
	w.WriteString(s)
}

// kv adds a key with a raw value already encoded after its type tag.
func (b *builder) kv(key string, t ValueType, v any) *builder {
	putStr(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(t))
	switch x := v.(type) {
	case string:
		putStr(&b.kvs, x)
	case []string:
		binary.Write(&b.kvs, binary.LittleEndian, uint32(TypeString))
		binary.Write(&b.kvs, binary.LittleEndian, uint64(len(x)))
		for _, s := range x {
			putStr(&b.kvs, s)
		}
	case []byte: // pre-encoded
		b.kvs.Write(x)
	default:
		binary.Write(&b.kvs, binary.LittleEndian, x)
	}
	b.nkv++
	return b
}

// tensor adds a tensor with the given data, placed at the next aligned offset.
func (b *builder) tensor(name string, t Type, dims []uint64, data []byte) *builder {
	for b.data.Len()%b.align != 0 {
		b.data.WriteByte(0)
	}
	putStr(&b.infos, name)
	binary.Write(&b.infos, binary.LittleEndian, uint32(len(dims)))
	binary.Write(&b.infos, binary.LittleEndian, dims)
	binary.Write(&b.infos, binary.LittleEndian, uint32(t))
	binary.Write(&b.infos, binary.LittleEndian, uint64(b.data.Len()))
	b.data.Write(data)
	b.nt++
	return b
}

// info adds a tensor directory entry at an explicit offset, with no data.
func (b *builder) info(name string, t Type, dims []uint64, off uint64) *builder {
	putStr(&b.infos, name)
	binary.Write(&b.infos, binary.LittleEndian, uint32(len(dims)))
	binary.Write(&b.infos, binary.LittleEndian, dims)
	binary.Write(&b.infos, binary.LittleEndian, uint32(t))
	binary.Write(&b.infos, binary.LittleEndian, off)
	b.nt++
	return b
}

func (b *builder) bytes() []byte {
	var w bytes.Buffer
	w.WriteString(Magic)
	binary.Write(&w, binary.LittleEndian, b.version)
	binary.Write(&w, binary.LittleEndian, uint64(b.nt))
	binary.Write(&w, binary.LittleEndian, uint64(b.nkv))
	w.Write(b.kvs.Bytes())
	w.Write(b.infos.Bytes())
	for w.Len()%b.align != 0 {
		w.WriteByte(0)
	}
	w.Write(b.data.Bytes())
	return w.Bytes()
}

// arr encodes an array value of fixed-size elements (after the TypeArray tag).
func arr(elem ValueType, vals any, n int) []byte {
	var w bytes.Buffer
	binary.Write(&w, binary.LittleEndian, uint32(elem))
	binary.Write(&w, binary.LittleEndian, uint64(n))
	binary.Write(&w, binary.LittleEndian, vals)
	return w.Bytes()
}

// everyType is a file with one key of every value type, nested arrays and two tensors.
func everyType() []byte {
	nested := []byte{}
	nested = binary.LittleEndian.AppendUint32(nested, uint32(TypeArray))
	nested = binary.LittleEndian.AppendUint64(nested, 2)
	nested = append(nested, arr(TypeInt16, []int16{-1, 2}, 2)...)
	nested = append(nested, arr(TypeBool, []bool{true}, 1)...)
	f32 := make([]byte, 16)
	for i := range 4 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)+0.5))
	}
	return newBuilder().withAlign(64).
		kv("u8", TypeUint8, uint8(7)).kv("i8", TypeInt8, int8(-7)).
		kv("u16", TypeUint16, uint16(700)).kv("i16", TypeInt16, int16(-700)).
		kv("u32", TypeUint32, uint32(70000)).kv("i32", TypeInt32, int32(-70000)).
		kv("f32", TypeFloat32, float32(1.5)).kv("bool", TypeBool, true).
		kv("str", TypeString, "héllo").kv("u64", TypeUint64, uint64(1)<<40).
		kv("i64", TypeInt64, int64(-1)<<40).kv("f64", TypeFloat64, 2.25).
		kv("strs", TypeArray, []string{"a", "", "c"}).
		kv("ints", TypeArray, arr(TypeInt32, []int32{1, -2, 3}, 3)).
		kv("floats", TypeArray, arr(TypeFloat32, []float32{0.5, 1}, 2)).
		kv("nested", TypeArray, nested).
		kv("general.alignment", TypeUint32, uint32(64)).
		tensor("w", TypeF32, []uint64{2, 2}, f32).
		tensor("q", TypeQ8_0, []uint64{32}, make([]byte, 34)).bytes()
}

func (b *builder) withAlign(a int) *builder { b.align = a; return b }

func (b *builder) withData(n int) *builder { b.data.Write(make([]byte, n)); return b }

func TestParseEveryType(t *testing.T) {
	f, err := Parse("every.gguf", everyType())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want string
	}{
		{"u8", "7"}, {"i8", "-7"}, {"u16", "700"}, {"i16", "-700"}, {"u32", "70000"}, {"i32", "-70000"},
		{"f32", "1.5"}, {"bool", "true"}, {"str", "héllo"}, {"u64", "1099511627776"}, {"i64", "-1099511627776"},
		{"f64", "2.25"}, {"strs", "[a  c]"}, {"ints", "[1 -2 3]"}, {"floats", "[0.5 1]"},
		{"nested", "[[-1 2] [true]]"}, {"general.alignment", "64"},
	} {
		if got := fmt.Sprint(f.Value(tc.key)); got != tc.want {
			t.Errorf("%s = %s, want %s", tc.key, got, tc.want)
		}
	}
	if f.Alignment != 64 {
		t.Errorf("alignment %d, want 64", f.Alignment)
	}
	if n, _, err := f.Uint("i8"); err == nil {
		t.Errorf("Uint(i8) = %d, want an error for a negative value", n)
	}
	if v, _, err := f.Float("f32"); err != nil || v != 1.5 {
		t.Errorf("Float(f32) = %v, %v", v, err)
	}
	if _, _, err := f.String("u8"); err == nil || !strings.Contains(err.Error(), `"u8"`) {
		t.Errorf("String(u8): %v, want an error naming the key", err)
	}
	if ids, _, err := f.Int32s("ints"); err != nil || fmt.Sprint(ids) != "[1 -2 3]" {
		t.Errorf("Int32s = %v, %v", ids, err)
	}
	w, ok := f.Tensor("w")
	if !ok || len(w.Data) != 16 || w.Type != TypeF32 || w.Elements() != 4 {
		t.Fatalf("tensor w: %+v", w)
	}
	if r, c := w.Rows(); r != 2 || c != 2 {
		t.Errorf("rows, cols = %d, %d", r, c)
	}
	if y := f32s(w.Data); fmt.Sprint(y) != "[0.5 1.5 2.5 3.5]" {
		t.Errorf("w = %v", y)
	}
	q, _ := f.Tensor("q")
	if q.Offset != 64 || len(q.Data) != 34 {
		t.Errorf("q at %d, %d bytes; want 64, 34", q.Offset, len(q.Data))
	}
}

// TestParseErrors: each malformed file gives one error naming what is wrong.
func TestParseErrors(t *testing.T) {
	good := func() *builder {
		return newBuilder().kv("a", TypeUint32, uint32(1)).tensor("blk.0.attn_q.weight", TypeF32, []uint64{8}, make([]byte, 32))
	}
	patch := func(b []byte, old, new []byte) []byte {
		i := bytes.Index(b, old)
		if i < 0 {
			panic("patch: not found")
		}
		c := bytes.Clone(b)
		copy(c[i:], new)
		return c
	}
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "not a GGUF file"},
		{"magic", []byte("GGML\x03\x00\x00\x00"), "not a GGUF file"},
		{"version 1", patch(good().bytes(), []byte("GGUF\x03"), []byte("GGUF\x01")), "version 1"},
		{"too many kvs", patch(good().bytes(), le.AppendUint64(le.AppendUint64(nil, 1), 1), le.AppendUint64(le.AppendUint64(nil, 1), 1<<60)), "metadata entries cannot fit"},
		{"too many tensors", patch(good().bytes(), le.AppendUint64(le.AppendUint64(nil, 1), 1), le.AppendUint64(le.AppendUint64(nil, 1<<60), 1)), "tensors cannot fit"},
		{"key type", newBuilder().kv("k", ValueType(99), uint32(0)).bytes(), `key "k": unknown value type 99`},
		{"bool", newBuilder().kv("k", TypeBool, uint8(2)).bytes(), `key "k": bool value 2`},
		{"array length", newBuilder().kv("k", TypeArray, arr(TypeUint32, []uint32{1}, 1<<40)).bytes(), `key "k": array of 1099511627776 uint32 values runs past`},
		{"string length", newBuilder().kv("k", TypeString, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}).bytes(), `key "k": string of 4294967295 bytes`},
		{"duplicate key", newBuilder().kv("k", TypeUint8, uint8(1)).kv("k", TypeUint8, uint8(1)).bytes(), `key "k" appears twice`},
		{"alignment", newBuilder().kv("general.alignment", TypeUint32, uint32(3)).bytes(), `key "general.alignment": 3 (uint32) is not a power of two`},
		{"alignment type", newBuilder().kv("general.alignment", TypeUint64, uint64(32)).bytes(), `key "general.alignment": 32 (uint64)`},
		{"tensor past end", good().bytes()[:len(good().bytes())-1], `tensor "blk.0.attn_q.weight": offset 0 + 32 bytes is past the end of the 31-byte data section`},
		{"tensor type", newBuilder().tensor("t", Type(99), []uint64{1}, []byte{0}).bytes(), `tensor "t": unknown ggml type 99`},
		{"block size", newBuilder().tensor("t", TypeQ4_K, []uint64{255}, nil).bytes(), `tensor "t": row length 255 is not a multiple of the Q4_K block size 256`},
		{"dims", newBuilder().tensor("t", TypeF32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4)).bytes(), `tensor "t": 5 dimensions`},
		{"overflow", newBuilder().tensor("t", TypeF32, []uint64{1 << 40, 1 << 40}, nil).bytes(), `tensor "t": dimensions [1099511627776 1099511627776] overflow`},
		{"duplicate tensor", newBuilder().tensor("t", TypeF32, []uint64{1}, make([]byte, 4)).tensor("t", TypeF32, []uint64{1}, make([]byte, 4)).bytes(), `tensor "t" appears twice`},
		{"misaligned", newBuilder().info("t", TypeF32, []uint64{1}, 4).withData(64).bytes(), `tensor "t": offset 4 is not a multiple of the alignment 32`},
		{"overlap", newBuilder().info("a", TypeF32, []uint64{16}, 0).info("b", TypeF32, []uint64{1}, 32).withData(64).bytes(), `tensors "a" and "b" overlap`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.gguf", tc.file)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), "gguf: x.gguf: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want gguf: x.gguf: …%s…", err, tc.want)
			}
		})
	}
}

// TestParseTruncated: every prefix of a valid file is an error, never a panic.
func TestParseTruncated(t *testing.T) {
	b := everyType()
	for n := range len(b) {
		if _, err := Parse("x.gguf", b[:n]); err == nil {
			// a prefix that ends inside the padding or data of the last tensor is short
			t.Errorf("prefix of %d of %d bytes parsed", n, len(b))
		}
	}
}

// TestOpenModels opens every oracle model file and checks its directory against
// ref.json's tensor types.
func TestOpenModels(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(ggufDir, "*", "model.gguf"))
	if len(dirs) == 0 {
		t.Fatal("no oracle models (../shared must sit beside the checkout)")
	}
	for _, path := range dirs {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := os.Stat(path)
			if f.Size() != st.Size() || f.Version != 3 || f.Alignment != 32 {
				t.Errorf("size %d version %d alignment %d", f.Size(), f.Version, f.Alignment)
			}
			arch, _, err := f.String("general.architecture")
			if err != nil || arch == "" {
				t.Errorf("general.architecture: %q %v", arch, err)
			}
			toks, _, err := f.Strings("tokenizer.ggml.tokens")
			if err != nil || len(toks) != 384 {
				t.Errorf("tokens: %d %v", len(toks), err)
			}
			if _, ok := f.Tensor("token_embd.weight"); !ok {
				t.Error("no token_embd.weight")
			}
		})
	}
}

// TestOpenSplit writes a file in three parts and opens it through any part's name.
func TestOpenSplit(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		b := newBuilder().kv("split.no", TypeUint16, uint16(i)).kv("split.count", TypeUint16, uint16(3)).
			kv("split.tensors.count", TypeInt32, int32(3)).
			tensor(fmt.Sprintf("t%d", i), TypeF32, []uint64{1}, le32(float32(i))).bytes()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m-%05d-of-00003.gguf", i+1)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Open(filepath.Join(dir, "m-00002-of-00003.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 3 {
		tt, ok := f.Tensor(fmt.Sprintf("t%d", i))
		if !ok || f32s(tt.Data)[0] != float32(i) || tt.Split != i {
			t.Errorf("t%d: %+v", i, tt)
		}
	}
	os.Remove(filepath.Join(dir, "m-00003-of-00003.gguf"))
	if _, err := Open(filepath.Join(dir, "m-00001-of-00003.gguf")); err == nil || !strings.Contains(err.Error(), "m-00003-of-00003.gguf") {
		t.Errorf("missing part: %v", err)
	}
}

func le32(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }

func f32s(b []byte) []float32 {
	y := make([]float32, len(b)/4)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return y
}
