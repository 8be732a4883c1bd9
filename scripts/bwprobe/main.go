// Command bwprobe prints what ingot's bandwidth probe ([cpu.BandwidthProbe])
// reads, pass by pass, in the output format of scripts/bwloop.c, so the two can
// be run alternately (scripts/bwcompare.sh):
//
//	go run ./scripts/bwprobe [-t threads] [-m MiB] [-p passes]
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

func main() {
	threads := flag.Int("t", 2, "threads")
	mib := flag.Int("m", 1024, "buffer MiB")
	passes := flag.Int("p", 9, "timed passes")
	flag.Parse()
	if *threads < 1 || *mib < 1 || *passes < 1 {
		fmt.Fprintln(os.Stderr, "bwprobe: -t, -m and -p must be at least 1")
		os.Exit(2)
	}
	p := cpu.NewPool(*threads)
	defer p.Close()
	b := cpu.NewBandwidthProbe(p, *mib<<20)
	gbs := make([]float64, *passes)
	fmt.Printf("bwprobe threads=%d MiB=%d GB/s:", *threads, *mib)
	for i := range gbs {
		gbs[i] = b.Sample()
		fmt.Printf(" %.1f", gbs[i])
	}
	slices.Sort(gbs)
	fmt.Printf(" median %.1f\n", gbs[len(gbs)/2])
}
