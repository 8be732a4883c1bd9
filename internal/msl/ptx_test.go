package msl_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/shaders"
)

// ptxGenerator is the command cuda/ptx/gen.go names in the files it writes.
const ptxGenerator = "go generate ./cuda/ptx"

// requirePTXClang skips the test (fails it with CI=true) without clang 19.
func requirePTXClang(tb testing.TB) {
	tb.Helper()
	_, _, err := msl.FindPTXClang("")
	switch {
	case err == nil:
	case os.Getenv("CI") == "true":
		tb.Fatalf("%v (CI=true: the PTX diff needs clang %d)", err, msl.PTXClangMajor)
	default:
		tb.Skip(err)
	}
}

// TestPTXCommitted regenerates the committed PTX as cuda/ptx/gen.go does
// (shaders into cuda/ptx, cuda/testdata/*.metal into cuda/testdata) and
// fails on any difference: a shader, the compat headers or the generator
// changed without `go generate ./cuda/ptx`.
func TestPTXCommitted(t *testing.T) {
	requirePTXClang(t)
	var shaderFiles []msl.File
	for _, f := range shaders.Files() {
		shaderFiles = append(shaderFiles, msl.File{Name: f.Name, Source: f.Source})
	}
	testFiles, err := msl.ReadFiles(os.DirFS("../../cuda/testdata"), "*.metal", "*.h")
	if err != nil {
		t.Fatal(err)
	}
	_, version, _ := msl.FindPTXClang("")
	for _, job := range []struct {
		dir   string
		files []msl.File
		pkg   string
	}{
		{"cuda/ptx", shaderFiles, "ptx"},
		{"cuda/testdata", testFiles, ""},
	} {
		mods, err := msl.GeneratePTX(job.files, msl.PTXOptions{Generator: ptxGenerator})
		if err != nil {
			t.Fatal(err)
		}
		out, err := msl.PTXOutputs(mods, job.pkg, ptxGenerator)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join("../..", job.dir)
		for name, want := range out {
			got, err := os.ReadFile(filepath.Join(dir, name))
			switch {
			case err != nil:
				t.Errorf("%s/%s: %v; run: %s (with %s)", job.dir, name, err, ptxGenerator, version)
			case !bytes.Equal(got, want):
				t.Errorf("%s/%s differs from what the generator makes now (%s); run: %s", job.dir, name, firstDiff(got, want), ptxGenerator)
			}
		}
		committed, _ := filepath.Glob(filepath.Join(dir, "*.ptx"))
		for _, c := range committed {
			if _, ok := out[filepath.Base(c)]; !ok {
				t.Errorf("%s/%s is not generated from any source; run: %s", job.dir, filepath.Base(c), ptxGenerator)
			}
		}
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: committed %q, generated %q", i+1, gl, wl)
		}
	}
	return "same lines"
}

// TestPTXGenerate checks what the generator emits for small kernels: the
// entry's parameter order and kinds, and the errors that name a construct
// PTX cannot take.
func TestPTXGenerate(t *testing.T) {
	requirePTXClang(t)
	gen := func(src string) ([]msl.PTXModule, error) {
		return msl.GeneratePTX([]msl.File{{Name: "k.metal", Source: src}}, msl.PTXOptions{})
	}
	mods, err := gen(`#include <metal_stdlib>
using namespace metal;
struct args { uint n; float s; uint pad[2]; };
kernel void k(threadgroup float * t1 [[threadgroup(1)]],
              device float * y [[buffer(2)]],
              uint i [[thread_position_in_grid]],
              constant args & a [[buffer(0)]],
              threadgroup float * t0 [[threadgroup(0)]],
              constant float * c [[buffer(1)]]) {
    t0[i % 32] = c[i];
    t1[i % 32] = 1;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (i < a.n) y[i] = simd_sum(t0[i % 32] * a.s) + t1[0];
}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) != 1 || len(mods[0].Kernels) != 1 {
		t.Fatalf("got %+v", mods)
	}
	got := fmt.Sprint(mods[0].Kernels[0].Params)
	if want := "[{value 0 16 4} {buffer 1 8 8} {buffer 2 8 8} {threadgroup 0 4 4} {threadgroup 1 4 4}]"; got != want {
		t.Errorf("params %s, want %s", got, want)
	}
	for _, s := range []string{".entry k(", "bar.sync", "shfl.sync.bfly.b32", ".version 7.0", ".target sm_70"} {
		if !strings.Contains(mods[0].PTX, s) {
			t.Errorf("no %q in the PTX", s)
		}
	}

	for _, tc := range []struct{ name, body, want string }{
		{"libm", `y[i] = pow(y[i], 2.5f) + atan(y[i]);`, "k.metal calls powf, atanf, which PTX cannot resolve"},
		{"tg-array", `threadgroup float t[32]; t[i % 32] = 1; y[i] = t[0];`, "function-scope threadgroup arrays are not supported"},
		{"compile", `y[i] = undeclared;`, "k.metal:4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gen("#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float * y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n" + tc.body + "\n}\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestPTXClangPinned checks that another clang is refused, saying which.
func TestPTXClangPinned(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "clang-18")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'Ubuntu clang version 18.1.3 (1ubuntu1)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := msl.FindPTXClang(fake)
	if !errors.Is(err, msl.ErrNoCompiler) || !strings.Contains(err.Error(), "generated by clang 19") || !strings.Contains(err.Error(), "refusing "+fake+" is Ubuntu clang version 18.1.3") {
		t.Errorf("FindPTXClang(clang 18) = %v", err)
	}
}

// TestPTXTarget checks the per-file target: a file with the line
// "//ingot:ptx-target sm_80" compiles for sm_80 (and a call of shaders/mma.h's
// mma_m16n8k16_bf16 there is the tensor-core instruction), every other file
// for sm_70, where the same call does not compile; a bad or repeated target
// line is an error naming the file and line.
func TestPTXTarget(t *testing.T) {
	requirePTXClang(t)
	var mma msl.File
	for _, f := range shaders.Files() {
		if f.Name == "mma.h" {
			mma = msl.File{Name: f.Name, Source: f.Source}
		}
	}
	if mma.Name == "" {
		t.Fatal("shaders.Files() has no mma.h")
	}
	const kernel = `#include <metal_stdlib>
#include "mma.h"
using namespace metal;
kernel void k(device const uint4 * a [[buffer(0)]], device float4 * d [[buffer(1)]], ushort lane [[thread_index_in_simdgroup]]) {
    d[lane] = mma_m16n8k16_bf16(d[lane], a[lane], a[lane].xy, lane);
}
`
	plain := `#include <metal_stdlib>
kernel void p(device float * y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] += 1.0f; }
`
	mods, err := msl.GeneratePTX([]msl.File{mma, {Name: "a.metal", Source: "//ingot:ptx-target sm_80\n" + kernel}, {Name: "b.metal", Source: plain}}, msl.PTXOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{".target sm_80", ".target sm_70"} {
		if !strings.Contains(mods[i].PTX, want) || !strings.Contains(mods[i].PTX, ".version 7.0") {
			t.Errorf("%s: no %q (PTX ISA 7.0) in the PTX", mods[i].Name, want)
		}
	}
	if !strings.Contains(mods[0].PTX, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") {
		t.Error("a.metal: no mma.sync in the PTX")
	}
	for _, tc := range []struct{ name, src, want string }{
		{"sm_70", kernel, "needs sm_80"},
		{"unknown", "//ingot:ptx-target sm_90\n" + plain, "k.metal:1: //ingot:ptx-target \"sm_90\": want one of sm_70, sm_75, sm_80"},
		{"twice", "//ingot:ptx-target sm_80\n\n//ingot:ptx-target sm_80\n" + plain, "k.metal:1: more than one //ingot:ptx-target line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := msl.GeneratePTX([]msl.File{mma, {Name: "k.metal", Source: tc.src}}, msl.PTXOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
