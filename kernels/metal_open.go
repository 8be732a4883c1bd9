package kernels

import (
	"fmt"
	"os"

	"github.com/ingot-llm/ingot/internal/cudadev"
	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/shaders"
)

// openMetal opens the GPU backends of [Open]:
//
//   - "metal": Apple's Metal through package metal, the library compiled from
//     [shaders.Source]. Elsewhere it fails with [metal.ErrUnavailable].
//   - "metal-emu": the same kernels and dispatch code on the MSL interpreter
//     (internal/msl, strict mode, threads OS threads), for Linux CI and for
//     checking the Metal path without a Mac. It needs clang ≥ 16.
//   - "cuda": the same kernels compiled to PTX and dispatch code on an NVIDIA
//     GPU (internal/cudadev). Without a driver or a GPU it fails with
//     cuda.ErrUnavailable. INGOT_CUDA_GRAPHS=0 launches every kernel on its
//     own instead of replaying decode steps as CUDA graphs (to compare);
//     INGOT_CUDA_PDL=0 launches without programmatic dependent launch.
func openMetal(name string, threads int) (Backend, error) {
	var dev metal.Device
	switch name {
	case "metal":
		d, err := metal.Open(shaders.Source())
		if err != nil {
			return nil, fmt.Errorf("kernels: metal: %w", err)
		}
		dev = d
	case "metal-emu":
		d, err := OpenEmulator(threads)
		if err != nil {
			return nil, err
		}
		dev = d
	case "cuda":
		d, err := cudadev.Open(cudadev.Options{NoGraphs: os.Getenv("INGOT_CUDA_GRAPHS") == "0", NoPDL: os.Getenv("INGOT_CUDA_PDL") == "0"})
		if err != nil {
			return nil, fmt.Errorf("kernels: cuda: %w", err)
		}
		dev = d
	default:
		return nil, fmt.Errorf("kernels: unknown metal backend %q", name)
	}
	m, err := NewMetal(dev)
	if err != nil {
		dev.Release()
		return nil, err
	}
	m.ownDev = true
	return m, nil
}

// OpenEmulator returns the MSL interpreter device running package shaders'
// kernels in strict mode on threads OS threads (≤ 0: all CPUs).
func OpenEmulator(threads int) (*msl.Device, error) {
	if err := msl.Available(); err != nil {
		return nil, fmt.Errorf("kernels: metal-emu: %w", err)
	}
	d, err := msl.Open(ShaderFiles(), msl.Options{Strict: true, Threads: threads})
	if err != nil {
		return nil, fmt.Errorf("kernels: metal-emu: %w", err)
	}
	return d, nil
}

// ShaderFiles returns package shaders' files for [msl.Open].
func ShaderFiles() []msl.File {
	var out []msl.File
	for _, f := range shaders.Files() {
		out = append(out, msl.File{Name: f.Name, Source: f.Source})
	}
	return out
}
