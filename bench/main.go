// Command bench is ingot's llama-bench: prefill and decode throughput of a model
// directory or a synthetic model of a named real shape, with decode also shown as a
// fraction of the machine's measured memory bandwidth.
//
//	go run ./bench [-model DIR | -shape NAME] [-dtype q4|q8|bf16|f16|f32]
//	               [-test pp512,tg128] [-threads N] [-reps R] [-backend cpu] [-json]
//
// `run bench …` is the same tool. Kernel benchmarks live beside the kernels
// (go test -bench . ./kernels/cpu).
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/ingot-llm/ingot/internal/benchtool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(benchtool.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
