package ingot

import "testing"

func TestStopStrings(t *testing.T) {
	for _, tc := range []struct {
		s     string
		stops []string
		idx   int // stopIndex
		held  int // heldBack
	}{
		{"hello", nil, -1, 0},
		{"hello wor", []string{"world"}, -1, 3},
		{"hello world!", []string{"world"}, 6, 0},
		{"a\n\nb", []string{"\n\n", "b"}, 1, 0},
		{"ab", []string{"bc", "abc"}, -1, 2},
		{"x", []string{""}, -1, 0},
	} {
		if got := stopIndex(tc.s, tc.stops); got != tc.idx {
			t.Errorf("stopIndex(%q, %q) = %d, want %d", tc.s, tc.stops, got, tc.idx)
		}
		if got := heldBack(tc.s, tc.stops); got != tc.held {
			t.Errorf("heldBack(%q, %q) = %d, want %d", tc.s, tc.stops, got, tc.held)
		}
	}
}
