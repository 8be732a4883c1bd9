package msl

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// genVersion changes whenever the generator's output changes, so cached
// libraries are rebuilt.
const genVersion = "msl-gen-1"

//go:embed rt/metal_stdlib rt/msl_runtime.h rt/runtime.c
var rtFS embed.FS

func rtFile(name string) string {
	b, err := rtFS.ReadFile("rt/" + name)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return string(b)
}

// metalHeaders are Metal's standard headers; each resolves to the compat
// <metal_stdlib>.
var metalHeaders = []string{
	"metal_stdlib", "metal_simdgroup_matrix", "metal_simdgroup", "metal_atomic", "metal_math",
	"metal_compute", "metal_integer", "metal_common", "metal_relational", "metal_geometric",
	"metal_types", "metal_numeric", "metal_pack", "metal_array", "metal_matrix", "metal_limits",
	"metal_type_traits", "metal_graphics", "metal_uniform", "metal_logging",
}

// A toolchain is a clang that can build the interpreter's libraries.
type toolchain struct {
	path    string
	version string // first line of `clang --version`
	major   int
	f16c    bool // amd64 host with F16C: half conversions in hardware
}

var (
	clangMu    sync.Mutex
	clangFound = map[string]*toolchain{}
)

var clangVersion = regexp.MustCompile(`clang version (\d+)\.`)

// clangAt returns compiler c (a name on PATH or a path) and its version, or
// false when it is missing or does not say it is clang.
func clangAt(c string) (*toolchain, bool) {
	p, err := exec.LookPath(c)
	if err != nil {
		return nil, false
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return nil, false
	}
	m := clangVersion.FindSubmatch(out)
	if m == nil {
		return nil, false
	}
	major, _ := strconv.Atoi(string(m[1]))
	return &toolchain{path: p, version: strings.SplitN(string(out), "\n", 2)[0], major: major}, true
}

// findClang returns the compiler to use: explicit if set, else the first of
// $INGOT_CLANG, clang-19, clang-18, clang-17, clang-16, clang with version ≥ 16.
func findClang(explicit string) (*toolchain, error) {
	clangMu.Lock()
	defer clangMu.Unlock()
	if tc, ok := clangFound[explicit]; ok {
		return tc, nil
	}
	var cands []string
	if explicit != "" {
		cands = []string{explicit}
	} else {
		if env := os.Getenv("INGOT_CLANG"); env != "" {
			cands = append(cands, env)
		}
		cands = append(cands, "clang-19", "clang-18", "clang-17", "clang-16", "clang")
	}
	var tooOld []string
	for _, c := range cands {
		tc, ok := clangAt(c)
		if !ok {
			continue
		}
		if tc.major < 16 {
			tooOld = append(tooOld, fmt.Sprintf("%s is clang %d", tc.path, tc.major))
			continue
		}
		if runtime.GOARCH == "amd64" {
			if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
				tc.f16c = regexp.MustCompile(`\bf16c\b`).Match(b)
			}
		}
		clangFound[explicit] = tc
		return tc, nil
	}
	if len(tooOld) > 0 {
		return nil, fmt.Errorf("%w; %s", ErrNoCompiler, strings.Join(tooOld, ", "))
	}
	if explicit != "" {
		return nil, fmt.Errorf("%w; %q not usable", ErrNoCompiler, explicit)
	}
	return nil, ErrNoCompiler
}

const defines = "-D__METAL_VERSION__=310 -D__HAVE_BFLOAT__=1 -D__INGOT_MSL__=1"

func (tc *toolchain) kernelFlags() []string {
	f := []string{
		"-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc",
		"-Xclang", "-cl-ext=+cl_khr_fp16,+__cl_clang_function_pointers,+__cl_clang_variadic_functions",
		"-O1", "-fPIC", "-fvisibility=hidden",
		"-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", // the runtime hashes call sites
		"-ftrivial-auto-var-init=pattern", // uninitialized private variables read as NaN
		"-ffp-contract=off", "-ferror-limit=20", "-Wno-unknown-attributes",
	}
	f = append(f, strings.Fields(defines)...)
	if tc.f16c {
		f = append(f, "-mf16c")
	}
	return f
}

func (tc *toolchain) runtimeFlags() []string {
	return []string{"-x", "c", "-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-omit-frame-pointer", "-Wall"}
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func cacheDir(opts Options) (string, error) {
	dir := opts.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "ingot", "msl")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("msl: cache: %w", err)
	}
	return dir, nil
}

// writeAtomic writes b to name through a temporary file and a rename, so
// concurrent builders (parallel test binaries) never see partial files.
func writeAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), name)
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

// checkFiles validates names and lints and sanitizes every file.
func checkFiles(files []File) (sanitized map[string]string, err error) {
	if len(files) == 0 {
		return nil, errors.New("msl: no source files")
	}
	var lints lintErrors
	var errs []error
	sanitized = map[string]string{}
	nmetal := 0
	for _, f := range files {
		if f.Name == "" || f.Name != path.Base(f.Name) || strings.ContainsAny(f.Name, "\\\"\n") || f.Name == "." {
			return nil, fmt.Errorf("msl: bad file name %q (want a base name like rmsnorm.metal)", f.Name)
		}
		if _, dup := sanitized[f.Name]; dup {
			return nil, fmt.Errorf("msl: file %s given twice", f.Name)
		}
		if strings.HasSuffix(f.Name, ".metal") {
			nmetal++
		}
		lints = append(lints, lintFile(f.Name, f.Source)...)
		s, serrs := sanitize(f.Name, f.Source)
		errs = append(errs, serrs...)
		sanitized[f.Name] = s
	}
	if len(lints) > 0 {
		return nil, lints
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if nmetal == 0 {
		return nil, errors.New("msl: no .metal file among the sources")
	}
	return sanitized, nil
}

// runner returns a function running tc in a directory, at most NumCPU at
// once, whose errors carry clang's diagnostics with tmp's paths cut.
func (tc *toolchain) runner(tmp string) func(dir string, args ...string) (string, error) {
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	return func(dir string, args ...string) (string, error) {
		sem <- struct{}{}
		defer func() { <-sem }()
		cmd := exec.Command(tc.path, args...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			msg := strings.ReplaceAll(stderr.String(), tmp+"/", "")
			if i := strings.Index(msg, "PLEASE submit a bug report"); i >= 0 {
				msg = msg[:i] + "(clang crashed; stack dump cut)"
			}
			return "", fmt.Errorf("%w\n%s", err, strings.TrimSpace(msg))
		}
		return stdout.String(), nil
	}
}

// scanUnits preprocesses each unit (in srcDir, the fake system headers in
// fakeDir) with defines, in parallel, and returns its kernels; errors are
// prefixed with what.
func scanUnits(clang func(dir string, args ...string) (string, error), units []File, srcDir, fakeDir, defines, what string) ([][]kernelDecl, error) {
	scanned := make([][]kernelDecl, len(units))
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"-E", "-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++", "-I", fakeDir, "-iquote", srcDir}, strings.Fields(defines)...)
			out, err := clang(srcDir, append(args, u.Name)...)
			if err != nil {
				errs[i] = fmt.Errorf("%s %s: %w", what, u.Name, err)
				return
			}
			ks, kerrs := scanKernels(out, lexBase(u.Name, out))
			scanned[i], errs[i] = ks, errors.Join(kerrs...)
		}()
	}
	wg.Wait()
	return scanned, errors.Join(errs...)
}

// buildLibrary compiles files into a shared library and returns its path,
// reusing the cache when sources, compiler and options match.
func buildLibrary(files []File, opts Options, tc *toolchain) (string, error) {
	sanitized, err := checkFiles(files)
	if err != nil {
		return "", err
	}
	dir, err := cacheDir(opts)
	if err != nil {
		return "", err
	}
	rtParts := []string{genVersion, runtime.GOARCH, tc.path, tc.version, strings.Join(tc.kernelFlags(), " "),
		rtFile("metal_stdlib"), rtFile("msl_runtime.h"), rtFile("runtime.c")}
	parts := append([]string(nil), rtParts...)
	for _, f := range files {
		parts = append(parts, f.Name, f.Source)
	}
	so := filepath.Join(dir, "lib-"+hashOf(parts...)+".so")
	if _, err := os.Stat(so); err == nil {
		now := time.Now()
		os.Chtimes(so, now, now) // keeps it from pruneCache
		return so, nil
	}
	defer pruneCache(dir)

	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("msl: %w", err)
	}
	defer os.RemoveAll(tmp)
	srcDir, fakeDir, incDir, bldDir := filepath.Join(tmp, "src"), filepath.Join(tmp, "fake"), filepath.Join(tmp, "inc"), filepath.Join(tmp, "build")
	for _, d := range []string{srcDir, fakeDir, incDir, bldDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("msl: %w", err)
		}
	}
	write := func(name, s string) error { return os.WriteFile(name, []byte(s), 0o644) }
	for _, h := range metalHeaders {
		body := "#include <metal_stdlib>\n"
		if h == "metal_stdlib" {
			body = rtFile("metal_stdlib")
		}
		if err := write(filepath.Join(fakeDir, h), ""); err != nil {
			return "", err
		}
		if err := write(filepath.Join(incDir, h), body); err != nil {
			return "", err
		}
	}
	if err := write(filepath.Join(incDir, "msl_runtime.h"), rtFile("msl_runtime.h")); err != nil {
		return "", err
	}
	var units []File
	var headers []string
	for _, f := range files {
		if err := write(filepath.Join(srcDir, f.Name), f.Source); err != nil {
			return "", err
		}
		if err := write(filepath.Join(bldDir, f.Name), sanitized[f.Name]); err != nil {
			return "", err
		}
		if strings.HasSuffix(f.Name, ".metal") {
			units = append(units, f)
		} else {
			headers = append(headers, f.Name, sanitized[f.Name])
		}
	}

	clang := tc.runner(tmp)
	// compileCached compiles src (named name in bldDir) with flags into a
	// cached object keyed by key.
	compileCached := func(name, src, key string, flags []string) (string, error) {
		obj := filepath.Join(dir, "obj-"+key+".o")
		if _, err := os.Stat(obj); err == nil {
			now := time.Now()
			os.Chtimes(obj, now, now)
			return obj, nil
		}
		if err := write(filepath.Join(bldDir, name), src); err != nil {
			return "", err
		}
		out := filepath.Join(bldDir, name+".o")
		args := append(append([]string(nil), flags...), "-I", incDir, "-iquote", bldDir, "-c", name, "-o", out)
		if _, err := clang(bldDir, args...); err != nil {
			return "", fmt.Errorf("msl: compile %s: %w", strings.TrimSuffix(name, ".cpp"), err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return "", err
		}
		if err := writeAtomic(obj, b); err != nil {
			return "", fmt.Errorf("msl: cache: %w", err)
		}
		return obj, nil
	}

	// The runtime compiles while the kernels are scanned.
	var wg sync.WaitGroup
	var rtObj string
	var rtErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rtObj, rtErr = compileCached("runtime.c", rtFile("runtime.c"), hashOf(append(rtParts, "runtime")...), tc.runtimeFlags())
	}()

	scanned, err := scanUnits(clang, units, srcDir, fakeDir, defines, "msl: preprocess")
	wg.Wait()
	if err != nil {
		return "", err
	}
	if rtErr != nil {
		return "", rtErr
	}

	// Number the kernels; a header's kernel seen from two units is emitted once.
	var all []kernelDecl
	byHost := map[string]kernelDecl{}
	unitKernels := make([][]kernelDecl, len(units))
	unitIDs := make([][]int, len(units))
	for i, ks := range scanned {
		for _, k := range ks {
			if prev, ok := byHost[k.host]; ok {
				if prev.where == k.where && prev.target == k.target {
					continue
				}
				return "", fmt.Errorf("msl: kernel %q defined twice (%s, %s)", k.host, prev.where, k.where)
			}
			byHost[k.host] = k
			unitKernels[i] = append(unitKernels[i], k)
			unitIDs[i] = append(unitIDs[i], len(all))
			all = append(all, k)
		}
	}

	objs := make([]string, len(units)+1)
	errs := make([]error, len(units)+1)
	for i, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := emitUnit(u.Name, unitKernels[i], unitIDs[i])
			key := hashOf(append(append(append([]string(nil), rtParts...), "unit", u.Name, src, sanitized[u.Name]), headers...)...)
			objs[i], errs[i] = compileCached(u.Name+".cpp", src, key, tc.kernelFlags())
		}()
	}
	reg := emitRegistry(all)
	objs[len(units)], errs[len(units)] = compileCached("registry.c", reg, hashOf(append(rtParts, "registry", reg)...), tc.runtimeFlags())
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	out := filepath.Join(bldDir, "lib.so")
	args := append([]string{"-shared", "-fPIC", "-o", out, rtObj}, objs...)
	args = append(args, "-lm", "-Wl,--no-undefined")
	if _, err := clang(bldDir, args...); err != nil {
		return "", fmt.Errorf("msl: link: %w", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return "", err
	}
	if err := writeAtomic(so, b); err != nil {
		return "", fmt.Errorf("msl: cache: %w", err)
	}
	return so, nil
}

// cacheMaxAge is how long an unused cached library or object is kept.
const cacheMaxAge = 14 * 24 * time.Hour

// pruneCache removes cached files unused for cacheMaxAge and build
// directories left by crashed builds.
func pruneCache(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		age := time.Since(info.ModTime())
		name := e.Name()
		switch {
		case (strings.HasPrefix(name, "lib-") || strings.HasPrefix(name, "obj-")) && age > cacheMaxAge,
			(strings.HasPrefix(name, "build-") || strings.HasPrefix(name, ".tmp-")) && age > 24*time.Hour:
			os.RemoveAll(filepath.Join(dir, name))
		}
	}
}

// lexBase lexes preprocessed output, reducing line-marker paths to base names.
func lexBase(name, src string) []token {
	toks := lex(name, src)
	for i := range toks {
		toks[i].file = path.Base(toks[i].file)
	}
	return toks
}

// Available reports whether the interpreter can run here: nil, or an error
// saying what to install.
func Available() error {
	if !supported {
		return unsupported()
	}
	_, err := findClang("")
	return err
}
