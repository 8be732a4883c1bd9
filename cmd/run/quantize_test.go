//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestQuantizeHelperProcess is not a test: the tests below run the test binary
// with INGOT_QUANTIZE_HELPER=1 to get a real `run` process (main, its signal
// handling included) with the arguments after "--".
func TestQuantizeHelperProcess(t *testing.T) {
	if os.Getenv("INGOT_QUANTIZE_HELPER") != "1" {
		return
	}
	i := slices.Index(os.Args, "--")
	os.Args = append([]string{"run"}, os.Args[i+1:]...)
	main()
}

// quantizeProcess starts `run quantize args...` as a child process.
func quantizeProcess(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestQuantizeHelperProcess$", "--", "quantize"}, args...)...)
	cmd.Env = append(os.Environ(), "INGOT_QUANTIZE_HELPER=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(stderr)
}

// stopMidRun waits for the child's first progress report (written after its first
// tensor is on disk) and stops it with SIGSTOP, so the test acts on a run that is
// certainly under way. It returns the child's temporary directory.
func stopMidRun(t *testing.T, cmd *exec.Cmd, stderr *bufio.Reader, parent string) string {
	t.Helper()
	if _, err := stderr.ReadString('['); err != nil {
		t.Fatalf("no progress from run quantize: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	names := dirNames(t, parent)
	if len(names) != 1 || !strings.HasPrefix(names[0], ".out.tmp-") {
		t.Fatalf("mid-run the output's folder holds %v, want one .out.tmp-* directory (did the run finish before SIGSTOP?)", names)
	}
	return filepath.Join(parent, names[0])
}

// TestQuantizeSignals sends SIGTERM and SIGKILL to `run quantize` mid-run. SIGTERM
// must end it with an error and no files left; after SIGKILL, which leaves the
// temporary directory, the next quantize to the same path must remove it.
func TestQuantizeSignals(t *testing.T) {
	src := bigModel(t)
	t.Run("SIGTERM", func(t *testing.T) {
		parent := t.TempDir()
		cmd, stderr := quantizeProcess(t, "-model", src, "-out", filepath.Join(parent, "out"), "-bits", "2", "-group", "128")
		stopMidRun(t, cmd, stderr, parent)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Process.Signal(syscall.SIGCONT)
		rest, _ := readAll(stderr)
		err := cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
			t.Errorf("run quantize after SIGTERM: %v, want exit status 130\n%s", err, rest)
		}
		if !strings.Contains(rest, "interrupted") {
			t.Errorf("stderr does not say the run was interrupted:\n%s", rest)
		}
		if left := dirNames(t, parent); len(left) != 0 {
			t.Errorf("SIGTERM left %v", left)
		}
	})
	t.Run("SIGKILL", func(t *testing.T) {
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		cmd, stderr := quantizeProcess(t, "-model", src, "-out", out, "-bits", "2", "-group", "128")
		stale := stopMidRun(t, cmd, stderr, parent)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if _, err := os.Stat(stale); err != nil {
			t.Fatalf("SIGKILL left no temporary directory to clean: %v", err)
		}
		cmd, stderr = quantizeProcess(t, "-model", filepath.Join(refDir, "tinycode-llama"), "-out", out, "-bits", "4")
		rest, _ := readAll(stderr)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("quantize after SIGKILL: %v\n%s", err, rest)
		}
		if got := dirNames(t, parent); !slices.Equal(got, []string{"out"}) {
			t.Errorf("after the next quantize the output's folder holds %v, want [out]", got)
		}
	})
}

// bigModel writes a model whose quantization takes a few hundred milliseconds:
// tinycode-llama's config and 24 bf16 matrices of 1024×2048 zeros. The weights
// file is sparse, so it costs no disk.
func bigModel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(refDir, "tinycode-llama", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	const n, rows, cols = 24, 1024, 2048
	hdr := map[string]any{}
	for i := range n {
		off := int64(i) * rows * cols * 2
		hdr[fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i)] = map[string]any{
			"dtype": "BF16", "shape": []int{rows, cols}, "data_offsets": []int64{off, off + rows*cols*2}}
	}
	hb, _ := json.Marshal(hdr)
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := binary.Write(f, binary.LittleEndian, uint64(len(hb))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(hb); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 + int64(len(hb)) + n*rows*cols*2); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readAll(r *bufio.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
