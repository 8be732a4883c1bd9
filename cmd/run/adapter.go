package main

import (
	"fmt"
	"io"

	"github.com/ingot-llm/ingot"
)

// fused returns the adapter directory to merge at load: -adapter with -fuse.
func (f *genFlags) fused() string {
	if f.fuse {
		return f.adapter
	}
	return ""
}

// setAdapter loads -adapter (unless -fuse merged it at load) and sets it on s.
func (f *genFlags) setAdapter(m *ingot.Model, s *ingot.Session, stderr io.Writer) error {
	switch {
	case f.adapter == "":
		return nil
	case f.fuse:
		fmt.Fprintf(stderr, "adapter %s merged into the weights\n", f.adapter)
		return nil
	}
	a, err := m.LoadAdapter(f.adapter)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "adapter %s (%s, %.2f MB), applied unfused\n", f.adapter, a.Raw().Format(), float64(a.Bytes())/1e6)
	return s.SetAdapter(a)
}
