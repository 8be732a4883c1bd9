package msl

import (
	"fmt"
	"strings"
	"testing"
)

func kernelsOf(t *testing.T, src string) []kernelDecl {
	t.Helper()
	ks, errs := scanKernels(src, lex("k.metal", src))
	for _, e := range errs {
		t.Error(e)
	}
	return ks
}

func TestScanKernels(t *testing.T) {
	src := `
#include <metal_stdlib>
using namespace metal;
struct args { uint n; };

kernel void plain(constant args & a [[buffer(0)]],
                  device float * y [[buffer(2)]],
                  threadgroup float * tmp [[threadgroup(1)]],
                  uint3 gid [[thread_position_in_grid]],
                  ushort lane [[thread_index_in_simdgroup]]) {
    y[0] = a.n;
}

[[kernel]] void mlx_style(device const vec<float, 4> * x [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {}

[[host_name("renamed")]] kernel void original(device float * y [[buffer(0)]]) {}

template <typename T, int N>
kernel void tmpl(device const T * x [[buffer(0)]], device T * y [[buffer(1)]], uint2 tg [[threadgroup_position_in_grid]]) {
    if (N > 0) { y[0] = x[0]; }
}

template [[host_name("tmpl_f32_4")]] kernel void tmpl<float, 4>(device const float *, device float *, uint2);
typedef decltype(tmpl<half, 2>) tmpl_t;
template [[host_name("tmpl_f16_2")]] kernel tmpl_t tmpl<half, 2>;
template [[host_name("tmpl_mlx")]] [[kernel]] decltype(tmpl<int, 1>) tmpl<int, 1>;

void helper(float x) {}
kernel void proto(device float * y [[buffer(0)]]);
`
	ks := kernelsOf(t, src)
	var got []string
	for _, k := range ks {
		ps := make([]string, len(k.params))
		for i, p := range k.params {
			ps[i] = p.name + "=" + p.String()
		}
		got = append(got, fmt.Sprintf("%s %s [%s] %s", k.host, k.target, strings.Join(ps, " "), k.where))
	}
	want := []string{
		"plain plain [a=buffer:0 y=buffer:2 tmp=threadgroup:1 gid=thread_position_in_grid lane=thread_index_in_simdgroup] k.metal:6",
		"mlx_style mlx_style [x=buffer:0 i=thread_index_in_threadgroup] k.metal:14",
		"renamed original [y=buffer:0] k.metal:16",
		"tmpl_f32_4 tmpl<float, 4> [x=buffer:0 y=buffer:1 tg=threadgroup_position_in_grid] k.metal:23",
		"tmpl_f16_2 tmpl<half, 2> [x=buffer:0 y=buffer:1 tg=threadgroup_position_in_grid] k.metal:25",
		"tmpl_mlx tmpl<int, 1> [x=buffer:0 y=buffer:1 tg=threadgroup_position_in_grid] k.metal:26",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestScanErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"kernel void k(device float * y) {}", "k.metal:1: msl: kernel parameter y: no [[buffer(i)]]"},
		{"kernel void k(texture2d<float> t [[texture(0)]]) {}", "attribute [[texture]] is not supported"},
		{"kernel void k(device float * y [[buffer(40)]]) {}", "index must be 0..30"},
		{"\ntemplate [[host_name(\"x\")]] kernel void nope<float>;", "k.metal:2: msl: no kernel template nope"},
	} {
		_, errs := scanKernels(tc.src, lex("k.metal", tc.src))
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.src, errs, tc.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	src := "kernel void k(device float * y [[buffer(0)]],\n" +
		"              uint i [[thread_position_in_grid]]) {\n" +
		"    threadgroup float buf[32];\n" +
		"    threadgroup float2 tile[4][8];\n" +
		"    threadgroup atomic_uint count;\n" +
		"    threadgroup float * p = buf;\n" +
		"    threadgroup_barrier(mem_flags::mem_threadgroup);\n" +
		"}\n" +
		"template [[host_name(\"x\")]] kernel void t<float>();\n"
	got, errs := sanitize("k.metal", src)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if n, m := strings.Count(got, "\n"), strings.Count(src, "\n")+1; n != m {
		t.Errorf("line count %d, want %d (the #line marker plus the source)", n, m)
	}
	lines := strings.Split(got, "\n")
	for _, w := range []struct {
		line int
		text string
	}{
		{0, `#line 1 "k.metal"`},
		{1, "kernel void k(device float * y              ,"},
		{3, "threadgroup float (&buf)[32] = *(threadgroup float (*)[32])metal::__mtl_tg_alloc(sizeof(float [32]), alignof(float), (__UINTPTR_TYPE__)__PRETTY_FUNCTION__, 3);"},
		{4, "threadgroup float2 (&tile)[4][8] = *(threadgroup float2 (*)[4][8])"},
		{5, "threadgroup atomic_uint (&count) = *(threadgroup atomic_uint (*))metal::__mtl_tg_alloc(sizeof(atomic_uint ), alignof(atomic_uint)"},
		{6, "    threadgroup float * p = buf;"},
	} {
		if !strings.Contains(lines[w.line], w.text) {
			t.Errorf("line %d: %q does not contain %q", w.line, lines[w.line], w.text)
		}
	}
	if l := lines[9]; l != "template"+strings.Repeat(" ", len(`[[host_name("x")]]`)+2)+"kernel void t<float>();" {
		t.Errorf("line 9: %q: attribute not blanked in place", l)
	}
	if _, errs := sanitize("k.metal", "void f() {\n threadgroup float a[4], b[4];\n}"); len(errs) == 0 {
		t.Error("two threadgroup declarators in one statement: no error")
	}
}
