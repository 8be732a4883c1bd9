package model

import (
	"context"
	"reflect"
	"testing"
)

// TestScoreTop: ScoreTop's scores are Score's, bit for bit, for prompt
// scoring (prompt = the first token) and for a split, across prefill
// chunks; its alternatives are TopK's over each prefix (as prefixes of
// their own forwards: within 1e-5).
func TestScoreTop(t *testing.T) {
	dir, ref := readRef(t, "llama3")
	s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 32, Batch: 8})
	ids := ref.InputIDs
	ctx := context.Background()
	for _, split := range []int{1, 10} {
		s.Truncate(0) // both from an empty cache: a reused prefix changes the chunks
		want, err := s.Score(ctx, ids[:split], ids[split:])
		if err != nil {
			t.Fatal(err)
		}
		s.Truncate(0)
		got, top, err := s.ScoreTop(ctx, ids[:split], ids[split:], 3)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("split %d: ScoreTop %+v, Score %+v", split, got, want)
		}
		if len(top) != len(ids)-split {
			t.Fatalf("split %d: %d alternative lists, want %d", split, len(top), len(ids)-split)
		}
		for j, alts := range top {
			s.Truncate(0)
			w, err := s.TopK(ctx, ids[:split+j], 3)
			if err != nil {
				t.Fatal(err)
			}
			for i := range w {
				if alts[i].ID != w[i].ID || alts[i].Logprob-w[i].Logprob > 1e-5 || w[i].Logprob-alts[i].Logprob > 1e-5 {
					t.Errorf("split %d token %d: alternatives %+v, TopK %+v", split, j, alts, w)
					break
				}
			}
		}
	}
	if sc, top, err := s.ScoreTop(ctx, ids[:3], ids[3:5], 0); err != nil || top != nil || len(sc.Tokens) != 2 {
		t.Errorf("k 0: %+v %v %v", sc, top, err)
	}
	if _, _, err := s.ScoreTop(ctx, nil, ids[:2], 2); err == nil {
		t.Error("empty prompt: no error")
	}
}
