package kernels

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/shaders"
)

// TestMain checks that the package's tests dispatch every kernel of package
// shaders at least once. It points INGOT_MSL_TRACE at a temporary file unless
// it is set already (then the caller's trace file is read, and kept), runs the
// tests, and, when the whole suite ran on the interpreter (no -run, -skip or
// -short), fails if a kernel defined in shaders/*.metal never ran.
func TestMain(m *testing.M) {
	flag.Parse()
	trace, own := os.Getenv("INGOT_MSL_TRACE"), false
	if trace == "" {
		f, err := os.CreateTemp("", "ingot-msl-trace-*")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f.Close()
		trace, own = f.Name(), true
		os.Setenv("INGOT_MSL_TRACE", trace)
	}
	code := m.Run()
	if b := os.Getenv("INGOT_TEST_BACKEND"); code == 0 && wholeSuite() && msl.Available() == nil && (b == "" || b == "metal-emu") {
		ran, err := tracedKernels(trace)
		if err == nil {
			var missing []string
			for _, k := range shaderKernels(shaders.Files()) {
				if !ran[k] {
					missing = append(missing, k)
				}
			}
			if len(missing) > 0 {
				err = fmt.Errorf("kernels never dispatched by the tests: %s", strings.Join(missing, ", "))
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: kernel coverage:", err)
			code = 1
		}
	}
	if own {
		os.Remove(trace)
	}
	os.Exit(code)
}

// wholeSuite reports whether every test ran (no -run, -skip or -short).
func wholeSuite() bool {
	for _, f := range []string{"test.run", "test.skip"} {
		if fl := flag.Lookup(f); fl != nil && fl.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
}

func tracedKernels(file string) (map[string]bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ran := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		ran[strings.TrimSpace(s.Text())] = true
	}
	return ran, s.Err()
}

var (
	hostNameRE = regexp.MustCompile(`\[\[host_name\("([A-Za-z0-9_]+)"\)\]\]`)
	kernelRE   = regexp.MustCompile(`^kernel\s+void\s+([A-Za-z0-9_]+)\s*\(`)
	templateRE = regexp.MustCompile(`^template\s*<`)
)

// shaderKernels returns the host names of the kernels defined in the .metal
// files: explicit template instantiations ([[host_name("…")]]) and plain
// `kernel void name(` definitions not preceded by a template header.
func shaderKernels(files []shaders.File) []string {
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f.Name, ".metal") {
			continue
		}
		prev := ""
		for _, line := range strings.Split(f.Source, "\n") {
			if m := hostNameRE.FindStringSubmatch(line); m != nil {
				out = append(out, m[1])
			} else if m := kernelRE.FindStringSubmatch(line); m != nil && !templateRE.MatchString(prev) {
				out = append(out, m[1])
			}
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "//") {
				prev = t
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestShaderKernelNames checks the parser above against the interpreter's own
// list of the library's kernels, and the names against STYLE §3:
// <op>_<weight dtype>_<activation dtype>[_<variant>], lowercase.
func TestShaderKernelNames(t *testing.T) {
	names := shaderKernels(shaders.Files())
	grammar := regexp.MustCompile(`^[a-z]+(_[a-z0-9]+)*_f32(_[a-z0-9]+)*$`)
	for _, n := range names {
		if !grammar.MatchString(n) {
			t.Errorf("kernel %s does not follow <op>_<dtype>…_f32[_<variant>]", n)
		}
	}
	lib := msltest.Open(t, ShaderFiles()...).Kernels() // the interpreter's library, whatever INGOT_TEST_BACKEND says
	slices.Sort(lib)
	if !slices.Equal(names, lib) {
		t.Errorf("kernels parsed from shaders/*.metal\n%v\ndiffer from the library's\n%v", names, lib)
	}
}

// TestShaderSource compiles shaders.Source(), the single translation unit the
// real device's newLibraryWithSource gets, on the interpreter: the
// concatenation must not redefine anything and must hold every kernel.
func TestShaderSource(t *testing.T) {
	dev := msltest.Open(t, msl.File{Name: "library.metal", Source: shaders.Source()})
	got := dev.Kernels()
	slices.Sort(got)
	if want := shaderKernels(shaders.Files()); !slices.Equal(got, want) {
		t.Errorf("kernels of shaders.Source()\n%v\nwant\n%v", got, want)
	}
}
