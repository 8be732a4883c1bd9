package ingot

import (
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/deptest"
)

// TestDependencyDirection pins the import graph of STYLE.md §1.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/ingot-llm/ingot/"
	deptest.Imports(t, "./model", deptest.Bad{
		mod + "metal":    "model talks to kernels.Backend only",
		mod + "shaders":  "model talks to kernels.Backend only",
		mod + "tokenize": "model works on token ids; the root package joins it to tokenize",
	})
	deptest.Deps(t, "./tokenize", deptest.Bad{
		mod + "model":   "tokenize and model don't import each other",
		mod + "kernels": "tokenize knows nothing of ops",
	})
	deptest.Deps(t, "./metal", deptest.Bad{
		mod + "kernels": "metal is a binding layer; it must not know about ops",
		mod + "model":   "metal is a binding layer",
		mod + "shaders": "metal compiles whatever source it is given",
	})
	deptest.Deps(t, "./shaders", deptest.Bad{
		mod + "metal":   "shaders is embedded source, no logic",
		mod + "kernels": "shaders is embedded source, no logic",
	})
	deptest.Deps(t, "./cuda", deptest.Bad{ // cuda → purego, x/sys (and the standard library) only
		mod + "kernels":      "cuda is a binding layer; it must not know about ops",
		mod + "model":        "cuda is a binding layer",
		mod + "metal":        "cuda is a binding layer",
		mod + "shaders":      "cuda loads whatever PTX it is given",
		mod + "cuda/ptx":     "cuda loads whatever PTX it is given",
		mod + "internal/msl": "the PTX is generated at go generate time, not linked",
	})
	deptest.Deps(t, "./cuda/ptx", deptest.Bad{
		mod + "cuda":         "cuda/ptx is embedded data, no logic",
		mod + "kernels":      "cuda/ptx is embedded data, no logic",
		mod + "internal/msl": "the PTX is generated at go generate time, not linked",
		mod + "shaders":      "the PTX is generated at go generate time, not linked",
	})
	deptest.Deps(t, "./kernels/cpu", deptest.Bad{
		mod + "kernels": "kernels/cpu is slice loops; kernels adapts it",
		mod + "metal":   "kernels/cpu runs everywhere",
	})
}

// TestCudadevSeam: the CUDA device is a seam like the interpreter's, below
// the ops.
func TestCudadevSeam(t *testing.T) {
	const mod = "github.com/ingot-llm/ingot/"
	deptest.Deps(t, "./internal/cudadev", deptest.Bad{
		mod + "kernels": "a device seam knows nothing of ops",
		mod + "model":   "a device seam knows nothing of models",
	})
}

// TestExamplesPublic: the runnable examples import only what a user can, so
// they can be copied as they are.
func TestExamplesPublic(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "example_test.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); strings.Contains(p, "/internal/") {
			t.Errorf("example_test.go imports %s", p)
		}
	}
}

// TestNoCgo fails if any package of the module, on any target we ship, imports "C".
func TestNoCgo(t *testing.T) {
	deptest.NoCgo(t, "./...")
}
