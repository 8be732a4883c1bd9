package kernels

import (
	"strings"
	"testing"
)

// TestMetalPipeliner drives the token queue as greedy decoding does: each
// step embeds the latest argmax on the device and queues its own argmax before
// the host reads the previous token. The tokens must be the host argmaxes and
// the embeddings the table's rows.
func TestMetalPipeliner(t *testing.T) {
	m := testMetal(t)
	const V, D = 40, 64
	for _, dt := range []DType{DTypeF16, DTypeQ4} {
		t.Run("table="+dt.String(), func(t *testing.T) {
			var hw *Tensor
			if dt.Quantized() {
				hw = hostQuant(dt, V, D, 32, 5)
			} else {
				hw, _ = hostFloat(dt, V, D, 5)
			}
			rows := dequant(hw)
			table, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			// Step j's "logits" peak at want[j]; ties go to the lower id.
			want := []int32{3, 39, 0, 17, 17, 5}
			logits := make([]*Tensor, len(want))
			for j, id := range want {
				x := randn(V, uint64(j))
				x[id], x[min(V-1, id+1)] = 50, 50
				logits[j] = put(m, x, 1, V)
			}
			x := m.New(len(want), D) // row j: the embedding step j+1 read on the device
			m.ArgmaxAsync(logits[0])
			var got []int32
			for j := 1; j < len(want); j++ {
				m.EmbedArgmax(x.Rows(j-1, j), table, 2)
				m.ArgmaxAsync(logits[j])
				tok, err := m.NextToken()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, tok)
			}
			tok, err := m.NextToken()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, tok)
			for j := range want {
				if got[j] != want[j] {
					t.Errorf("token %d = %d, want %d", j, got[j], want[j])
				}
			}
			emb := get(t, m, x)
			for j := range len(want) - 1 {
				for d := range D {
					if e := rows[int(want[j])*D+d] * 2; emb[j*D+d] != e {
						t.Fatalf("step %d: embedding[%d] = %v, want row %d: %v", j+1, d, emb[j*D+d], want[j], e)
					}
				}
			}
		})
	}
	t.Run("misuse", func(t *testing.T) {
		if _, err := m.NextToken(); err == nil || !strings.Contains(err.Error(), "no token queued") {
			t.Errorf("NextToken on an empty queue: %v", err)
		}
		mustPanic(t, "no token queued", func() { m.EmbedArgmax(m.New(1, D), m.New(V, D), 1) })
		x := put(m, randn(V, 1), 1, V)
		m.ArgmaxAsync(x)
		mustPanic(t, "can pick rows past", func() { m.EmbedArgmax(m.New(1, D), m.New(V-1, D), 1) })
		m.ArgmaxAsync(x)
		mustPanic(t, "2 tokens already queued", func() { m.ArgmaxAsync(x) })
		for range 2 {
			if _, err := m.NextToken(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), want) {
			t.Errorf("panic %v, want one containing %q", r, want)
		}
	}()
	f()
}
