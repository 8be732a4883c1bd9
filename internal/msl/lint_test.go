package msl

import (
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		rule string // "" means clean
		line int
	}{
		{"vector cast", "kernel void k() {\n  float4 y = (float4)x;\n}", ruleVectorCast, 2},
		{"vector cast of expr", "x = (half4)(a + b);", ruleVectorCast, 1},
		{"packed cast", "p = (packed_float3)v;", ruleVectorCast, 1},
		{"cast in macro", "#define LOAD(p) (float4)(*(p))\n", ruleVectorCast, 1},
		{"scalar cast ok", "float y = (float)h + (uint)x;", "", 0},
		{"pointer cast ok", "device float4 *p = (device float4 *)x;", "", 0},
		{"sizeof ok", "n = sizeof(float4) * 2;", "", 0},
		{"constructor ok", "y = float4(x);", "", 0},
		{"prototype ok", "float f(float4);", "", 0},
		{"return cast", "return (float2)v;", ruleVectorCast, 1},
		{"bool vector to float", "y = float4(a < b);", ruleBoolVector, 1},
		{"bool vector eq", "\n\nm = uint2(a.xy == b.xy);", ruleBoolVector, 3},
		{"ternary ok", "y = float4(a < b ? x : z);", "", 0},
		{"template arg ok", "y = float4(foo<T>(x));", "", 0},
		{"scalar args ok", "y = float4(a, b < c, 0, 1);", "", 0},
		{"comparison times", "y = x * (a > b);", ruleCompareArith, 1},
		{"comparison plus", "y = (a != b) + x;", ruleCompareArith, 1},
		{"negated comparison", "y = -(a >= b);", ruleCompareArith, 1},
		{"if ok", "if (a < b) -x;", "", 0},
		{"call ok", "y = f(a < b) * 2;", "", 0},
		{"select ok", "y = select(float4(0), float4(1), a < b);", "", 0},
		{"comment ok", "// y = (float4)x;\n/* float4(a < b) */", "", 0},
		{"shift ok", "y = (a << 2) + (b >> 1);", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := lintFile("t.metal", tc.src)
			if tc.rule == "" {
				for _, e := range errs {
					t.Errorf("unexpected: %v", e)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("got %d findings %v, want one %s", len(errs), errs, tc.rule)
			}
			if e := errs[0]; e.Rule != tc.rule || e.Line != tc.line || e.File != "t.metal" {
				t.Errorf("got %v, want rule %s at line %d", e, tc.rule, tc.line)
			}
		})
	}
}

func TestLintFailsBuild(t *testing.T) {
	_, err := checkFiles([]File{
		{"a.metal", "kernel void k(device float4 *x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  x[i] = (float4)x[i].yxzw;\n}\n"},
		{"b.metal", "\n\nfloat4 f(float4 a, float4 b) { return float4(a < b); }\n"},
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"a.metal:2: msl lint [vector-cast]", "b.metal:3: msl lint [bool-vector-convert]", "2 lint error(s)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not mention %q", err, w)
		}
	}
}
