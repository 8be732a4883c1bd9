package shaders

import (
	"strings"
	"testing"
)

func TestFiles(t *testing.T) {
	fs := Files()
	if len(fs) < 2 || fs[0].Name != Header {
		t.Fatalf("Files() = %d files starting with %q, want %s first", len(fs), fs[0].Name, Header)
	}
	metal := false
	for _, f := range fs[1:] {
		if strings.HasSuffix(f.Name, ".h") {
			if metal {
				t.Errorf("header %s after a .metal file", f.Name)
			}
			if !strings.HasPrefix(f.Source, "// "+f.Name+":") {
				t.Errorf("%s does not open with its header comment (// %s: …)", f.Name, f.Name)
			}
			continue
		}
		metal = true
		if !strings.HasSuffix(f.Name, ".metal") {
			t.Errorf("%s: not a .metal or .h file", f.Name)
		}
		if !strings.Contains(f.Source, `#include "common.h"`) {
			t.Errorf("%s does not include common.h", f.Name)
		}
		if !strings.HasPrefix(f.Source, "// "+f.Name+":") {
			t.Errorf("%s does not open with its header comment (// %s: …)", f.Name, f.Name)
		}
	}
}

// TestSource checks the single translation unit for newLibraryWithSource: no
// #include of common.h is left, every file is there in order, and each file's
// lines keep their numbers relative to its marker (compiler errors stay
// readable).
func TestSource(t *testing.T) {
	src := Source()
	for _, f := range Files() {
		if strings.HasSuffix(f.Name, ".h") && strings.Contains(src, `#include "`+f.Name+`"`) {
			t.Errorf(`Source() still includes %q`, f.Name)
		}
	}
	lines := strings.Split(src, "\n")
	at := 0
	for _, f := range Files() {
		marker := "// ---- " + f.Name
		i := at
		for i < len(lines) && lines[i] != marker {
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s missing from Source() (or out of order)", f.Name)
		}
		flines := strings.Split(strings.TrimSuffix(f.Source, "\n"), "\n")
		for j, l := range flines {
			got := lines[i+1+j]
			if s := strings.TrimSpace(l); strings.HasPrefix(s, `#include "`) && strings.HasSuffix(s, `.h"`) {
				l = ""
			}
			if got != l {
				t.Fatalf("%s:%d: Source() has %q, want %q", f.Name, j+1, got, l)
			}
		}
		at = i + 1 + len(flines)
	}
}
