package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ingot-llm/ingot/model"
)

// runQuantize implements `run quantize -model DIR -out DIR -bits 4|8 [-group 64]`.
func runQuantize(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	src := fs.String("model", "", "model directory with f32, f16 or bf16 weights")
	dst := fs.String("out", "", "output directory (must not exist); written atomically")
	bits := fs.Int("bits", 4, "bits per weight: 2, 3, 4, 5, 6 or 8")
	group := fs.Int("group", 64, "weights per scale/bias group: 32, 64 or 128")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: run quantize -model DIR -out DIR [-bits 4|8] [-group 64]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *src == "" || *dst == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	start := time.Now()
	last := time.Time{}
	err := model.QuantizeDir(ctx, *src, *dst, *bits, *group, func(done, total int64) {
		if now := time.Now(); now.Sub(last) > 100*time.Millisecond || done == total {
			last = now
			fmt.Fprintf(stderr, "\r%s", progressBar(done, total, 30))
		}
	})
	fmt.Fprintln(stderr)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintf(stderr, "run quantize: interrupted; %s not written, partial files removed\n", *dst)
		return exitInterrupted
	}
	if err != nil {
		fmt.Fprintln(stderr, "run quantize:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%d-bit, group %d) in %.1fs\n", *dst, *bits, *group, time.Since(start).Seconds())
	return 0
}

// progressBar renders "[#####.....]  42%  1.2/2.9 GB".
func progressBar(done, total int64, width int) string {
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	n := int(frac * float64(width))
	unit, div := "MB", 1e6
	if total >= 1e9 {
		unit, div = "GB", 1e9
	}
	return fmt.Sprintf("[%s%s] %3.0f%%  %.1f/%.1f %s", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac, float64(done)/div, float64(total)/div, unit)
}
