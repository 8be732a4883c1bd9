package gguf

import (
	"testing"
)

// FuzzParse: any bytes either parse into a file whose tensors lie inside the
// input, do not overlap and have the size their type and shape imply, or give
// one error; never a panic, a hang, or an allocation larger than the input
// allows. De-quantization and the affine rewrite of whatever parses are run too.
// The seed corpus is testdata/fuzz/FuzzParse (a file with every value type, the
// metadata and tensor directory of an oracle model, and malformed files).
func FuzzParse(f *testing.F) {
	f.Add(everyType())
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz.gguf", b)
		if err != nil {
			return
		}
		for _, kv := range file.KV {
			file.String(kv.Key)
			file.Uint(kv.Key)
			file.Float(kv.Key)
			file.Strings(kv.Key)
			file.Int32s(kv.Key)
		}
		for _, tt := range file.Tensors {
			if uint64(len(tt.Data)) != tt.Type.bytes(tt.Elements()) {
				t.Fatalf("%s: %d bytes for %v of %s", tt.Name, len(tt.Data), tt.Dims, tt.Type)
			}
			if tt.Elements() > 1<<16 {
				continue
			}
			y := make([]float32, tt.Elements())
			_ = Dequantize(y, tt.Type, tt.Data)
			if rows, cols := tt.Rows(); cols > 0 {
				_, _ = ToAffine(tt.Type, tt.Data, rows, cols)
			}
		}
	})
}
