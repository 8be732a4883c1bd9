package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/model"
)

// openBackend opens the named backend for the model in dir. "auto" picks Metal on
// Apple silicon when the model and its KV cache fit the GPU's recommended working
// set, else the CPU, and says why on stderr. An explicit "metal" that does not fit
// is refused with a hint instead of thrashing.
func openBackend(name string, threads int, dir string, o model.Options, stderr io.Writer) (kernels.Backend, error) {
	if name != "auto" && name != "metal" {
		return kernels.Open(name, threads)
	}
	b, err := kernels.Open("metal", threads)
	if err != nil {
		if name == "metal" {
			return nil, err
		}
		if !errors.Is(err, metal.ErrUnavailable) {
			fmt.Fprintf(stderr, "auto: metal failed (%v); using cpu\n", err)
		}
		return kernels.Open("cpu", threads)
	}
	if err := admit(b, dir, o); err != nil {
		b.Close()
		if name == "metal" {
			return nil, err
		}
		fmt.Fprintf(stderr, "auto: %v; using cpu\n", err)
		return kernels.Open("cpu", threads)
	}
	return b, nil
}

// admit compares the model's estimated device bytes with the device's limit.
func admit(b kernels.Backend, dir string, o model.Options) error {
	mb, ok := b.(*kernels.Metal)
	if !ok {
		return nil
	}
	inf, ok := mb.Device().(metal.Informer)
	if !ok {
		return nil
	}
	limit := inf.Info().MaxWorkingSet
	w, c, err := model.Estimate(dir, o)
	if err != nil || limit <= 0 {
		return err
	}
	if need := w + c; need > limit {
		return fmt.Errorf("metal: the model needs %.1f GB (%.1f GB weights + %.1f GB KV cache) but %s's recommended working set is %.1f GB: "+
			"use a smaller quantization (-quant q4, or run quantize -bits 4), a shorter -ctx or -kv f16, or raise the limit (sudo sysctl iogpu.wired_limit_mb=N)",
			float64(need)/1e9, float64(w)/1e9, float64(c)/1e9, inf.Info().Name, float64(limit)/1e9)
	}
	return nil
}
