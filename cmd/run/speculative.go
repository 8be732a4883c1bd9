package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ingot-llm/ingot"
)

// speculate sets up the speculative decoding -draft or -lookup asks for on s:
// it loads the draft model (on the same backend and threads) and makes its
// session, of s's context size. The returned func closes them.
func (f *genFlags) speculate(intr <-chan os.Signal, m *ingot.Model, s *ingot.Session, stderr io.Writer) (func(), error) {
	switch {
	case f.lookup > 0:
		return func() {}, s.Speculate(&ingot.Speculation{Tokens: f.lookup})
	case f.draft == "":
		return func() {}, nil
	}
	ctx, stop := cancelOn(intr)
	dm, err := ingot.Load(ctx, f.draft, ingot.Options{Backend: f.backend, Threads: f.threads})
	interrupted := ctx.Err() != nil
	stop()
	if err != nil {
		if interrupted {
			return nil, errInterrupted
		}
		return nil, fmt.Errorf("-draft: %w", err)
	}
	ds, err := dm.NewSession(ingot.SessionOptions{Context: s.ContextSize(), KV: f.kv})
	if err == nil {
		err = s.Speculate(&ingot.Speculation{Draft: ds, Tokens: f.draftMax})
	}
	if err != nil {
		dm.Close()
		return nil, fmt.Errorf("-draft %s: %w", f.draft, err)
	}
	raw := dm.Raw()
	fmt.Fprintf(stderr, "draft %s (%s, %d layers, %.1f MB of weights) on %s in %.2fs\n", f.draft, raw.Config.Arch(),
		raw.Config.NumLayers, float64(raw.WeightBytes())/1e6, dm.Backend(), dm.LoadTime().Seconds())
	return func() { ds.Close(); dm.Close() }, nil
}

// reportSpeculation prints a speculative generation's acceptance (for -v).
func reportSpeculation(w io.Writer, r ingot.Result) {
	if r.Drafted == 0 {
		return
	}
	fmt.Fprintf(w, "[speculative: %d of %d drafted tokens accepted (%.1f%%); %d tokens at %.1f tok/s after the first]\n",
		r.Accepted, r.Drafted, 100*r.AcceptanceRate(), r.GenTokens, r.DecodeTokPerSec())
}
