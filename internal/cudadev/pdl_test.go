package cudadev

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/cuda/ptx"
)

var headerLine = regexp.MustCompile(`(?m)^\.(version|target) .*$`)

// TestGridDependent: every entry of every committed PTX module gets exactly
// one griddepcontrol.wait, before its first instruction and after its
// declarations, and the module declares PTX 7.8 for sm_90; the rest of the
// text is unchanged.
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
	mov.u32 	%r1, %tid.x;
	ret;
}
.entry k2()
{
	griddepcontrol.wait;
$L__BB1_1:
	bra.uni 	$L__BB1_1;
}
`
	if got, n := gridDependent(src); got != want || n != 2 {
		t.Errorf("gridDependent: %d entries, got\n%s\nwant\n%s", n, got, want)
	}
	for _, m := range ptx.Modules() {
		src, _ := ptx.Source(m)
		got, n := gridDependent(src)
		entries := strings.Count(src, ".entry ")
		if n != entries || strings.Count(got, "griddepcontrol.wait;") != entries {
			t.Errorf("%s: %d entries, %d waits", m, entries, n)
		}
		want := headerLine.ReplaceAllStringFunc(src, func(l string) string {
			if strings.HasPrefix(l, ".version") {
				return ".version 7.8"
			}
			return ".target sm_90"
		})
		if strings.ReplaceAll(got, "\tgriddepcontrol.wait;\n", "") != want {
			t.Errorf("%s: more changed than the waits, the version and the target", m)
		}
	}
}
