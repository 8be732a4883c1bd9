package gguf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("oracle data missing (../shared must sit beside the checkout): %v", err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// dequantCases are 16 rows of 512 values each, raw blocks and gguf-py's
// float32 values: ../shared/testdata/gguf/dequant (blk.0.ffn_down.weight of the
// oracle models) and testdata/dequant (random Q2_K and Q3_K blocks, see
// testdata/README.md).
var dequantCases = []struct {
	ty  Type
	dir string
}{
	{TypeQ4_0, sharedDequant}, {TypeQ4_1, sharedDequant}, {TypeQ5_0, sharedDequant}, {TypeQ5_1, sharedDequant},
	{TypeQ8_0, sharedDequant}, {TypeQ4_K, sharedDequant}, {TypeQ5_K, sharedDequant}, {TypeQ6_K, sharedDequant},
	{TypeQ2_K, "testdata/dequant"}, {TypeQ3_K, "testdata/dequant"},
}

const sharedDequant = ggufDir + "/dequant"

const dequantRows, dequantCols = 16, 512

// TestDequantize checks every value bit for bit (signed zeros included)
// against gguf-py's de-quantizer.
func TestDequantize(t *testing.T) {
	for _, tc := range dequantCases {
		ty := tc.ty
		t.Run(ty.String(), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(tc.dir, ty.String()+".raw"))
			if err != nil {
				t.Fatal(err)
			}
			want := readF32(t, filepath.Join(tc.dir, ty.String()+".f32"))
			got := make([]float32, len(want))
			if err := Dequantize(got, ty, raw); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					if bad < 5 {
						t.Errorf("value %d (row %d col %d): got %g (%#08x), want %g (%#08x)", i, i/dequantCols, i%dequantCols,
							got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ", bad, len(want))
			}
		})
	}
}

// TestToAffineExact proves the affine rewrite changes no value: scale·q + bias,
// evaluated in float64 from the codes ToAffine packs, equals gguf-py's float32
// value for every element (as numbers: the rewrite turns gguf-py's −0 into +0).
// It also records for which types the float64 value is exact without rounding.
func TestToAffineExact(t *testing.T) {
	for _, tc := range dequantCases {
		ty := tc.ty
		t.Run(ty.String(), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(tc.dir, ty.String()+".raw"))
			if err != nil {
				t.Fatal(err)
			}
			want := readF32(t, filepath.Join(tc.dir, ty.String()+".f32"))
			a, err := ToAffine(ty, raw, dequantRows, dequantCols)
			if err != nil {
				t.Fatal(err)
			}
			wantBits, wantG, _ := AffineBits(ty)
			if a.Bits != wantBits || a.GroupSize != wantG {
				t.Fatalf("bits %d group %d, want %d %d", a.Bits, a.GroupSize, wantBits, wantG)
			}
			bad, inexact := 0, 0
			for i, w := range want {
				y := affineAt(a, i/dequantCols, i%dequantCols, dequantCols)
				if float32(y) != w {
					if bad < 5 {
						t.Errorf("value %d: affine %v, gguf-py %v", i, y, w)
					}
					bad++
				}
				if y != float64(w) {
					inexact++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ", bad, len(want))
			}
			t.Logf("%s → q%d G=%d: %d values equal; %d needed the one float32 rounding gguf-py does too", ty, a.Bits, a.GroupSize, len(want), inexact)
		})
	}
}

// affineAt evaluates element (r, j) of a in float64, reading the code bit by bit.
func affineAt(a *Affine, r, j, cols int) float64 {
	words := cols * a.Bits / 32
	var q uint64
	for b := range a.Bits {
		bit := j*a.Bits + b
		q |= uint64(a.Codes[r*words+bit/32]>>(bit%32)&1) << b
	}
	g := r*(cols/a.GroupSize) + j/a.GroupSize
	return float64(a.Scales[g])*float64(q) + float64(a.Biases[g])
}

// TestToAffineRandom checks the rewrite on random blocks of every affine type.
func TestToAffineRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for ty := range layouts {
		t.Run(ty.String(), func(t *testing.T) {
			const rows = 3
			cols := 2 * ty.BlockSize()
			if cols < 256 {
				cols = 256
			}
			raw := make([]byte, rows*ty.RowBytes(cols))
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			want := make([]float32, rows*cols)
			if err := Dequantize(want, ty, raw); err != nil {
				t.Fatal(err)
			}
			a, err := ToAffine(ty, raw, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				if math.IsInf(float64(w), 0) || math.IsNaN(float64(w)) || math.Abs(float64(w)) > 1e30 {
					continue // random f16 scales include inf and NaN
				}
				if y := affineAt(a, i/cols, i%cols, cols); float32(y) != w {
					t.Fatalf("value %d: affine %v, dequantized %v", i, y, w)
				}
			}
		})
	}
}
