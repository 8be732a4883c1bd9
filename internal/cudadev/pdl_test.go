package cudadev

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/cuda/ptx"
)

var headerLine = regexp.MustCompile(`(?m)^\.(version|target) .*$`)

// TestGridDependent: every entry of every committed PTX module gets exactly
// one griddepcontrol.wait, each followed by griddepcontrol.launch_dependents:
// where the entry marks it (the NVIDIA mat-vecs, after their first weight
// loads), else before its first instruction and after its declarations; the
// module declares PTX 7.8 for sm_90; the rest of the text is unchanged.
func TestGridDependent(t *testing.T) {
	const src = `.version 7.0
.target sm_70
.address_size 64
.extern .shared .align 16 .b8 __ingot_smem[];
.visible .entry k1(
	.param .u64 k1_param_0
)
.maxntid 256, 1, 1
{
	.reg .b32 	%r<3>;

// %bb.0:
	mov.u32 	%r1, %tid.x;
	ret;
}
.entry k2()
{
$L__BB1_1:
	bra.uni 	$L__BB1_1;
}
.entry k3()
{
	.reg .b32 	%r<3>;
	ld.global.u32 	%r1, [%rd1];
	// begin inline asm
	// ingot:griddepcontrol.wait
	// end inline asm
	ld.global.u32 	%r2, [%rd2];
}
`
	const want = `.version 7.8
.target sm_90
.address_size 64
.extern .shared .align 16 .b8 __ingot_smem[];
.visible .entry k1(
	.param .u64 k1_param_0
)
.maxntid 256, 1, 1
{
	.reg .b32 	%r<3>;

// %bb.0:
	griddepcontrol.wait;
	griddepcontrol.launch_dependents;
	mov.u32 	%r1, %tid.x;
	ret;
}
.entry k2()
{
	griddepcontrol.wait;
	griddepcontrol.launch_dependents;
$L__BB1_1:
	bra.uni 	$L__BB1_1;
}
.entry k3()
{
	.reg .b32 	%r<3>;
	ld.global.u32 	%r1, [%rd1];
	// begin inline asm
	griddepcontrol.wait;
	griddepcontrol.launch_dependents;
	// end inline asm
	ld.global.u32 	%r2, [%rd2];
}
`
	if got, n := gridDependent(src); got != want || n != 3 {
		t.Errorf("gridDependent: %d entries, got\n%s\nwant\n%s", n, got, want)
	}
	marked := 0
	for _, m := range ptx.Modules() {
		src, _ := ptx.Source(m)
		got, n := gridDependent(src)
		entries := strings.Count(src, ".entry ")
		marked += strings.Count(src, gridWaitMarker)
		if n != entries {
			t.Errorf("%s: %d entries, %d changed", m, entries, n)
		}
		// exactly one wait, then the trigger, in every entry's body
		for i, e := range strings.Split(got, ".entry ")[1:] {
			body, _, _ := strings.Cut(e, "\n}\n")
			if strings.Count(body, "griddepcontrol.wait;") != 1 || strings.Count(body, "griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;") != 1 {
				t.Errorf("%s: entry %d: %d waits", m, i, strings.Count(body, "griddepcontrol.wait;"))
			}
		}
		want := headerLine.ReplaceAllStringFunc(src, func(l string) string {
			if strings.HasPrefix(l, ".version") {
				return ".version 7.8"
			}
			return ".target sm_90"
		})
		want = strings.ReplaceAll(want, "\t"+gridWaitMarker+"\n", "")
		if strings.ReplaceAll(got, "\tgriddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;\n", "") != want {
			t.Errorf("%s: more changed than the waits, the version and the target", m)
		}
	}
	if marked < 36 { // matvec_q_nv's instantiations
		t.Errorf("%d entries mark their wait, want the NVIDIA mat-vecs' (36 or more)", marked)
	}
}
