//go:build unix

package ingot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestShInstall runs test.sh's ensure_clang and check_tidy with a PATH of
// stand-ins (id, sudo, apt-get, clang, go) and checks what each situation does:
// which install commands run, what the user is told, and that only CI=true turns
// a missing clang or an unreachable module proxy into a failure.
func TestTestShInstall(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("test.sh needs bash: ", err)
	}
	const (
		uid1000   = "echo 1000"
		uid0      = "echo 0"
		logArgs   = `echo "$(basename "$0") $*" >> "$LOG"`
		sudo      = logArgs + `; exec "$@"`
		aptFails  = logArgs + "; exit 100"
		aptClang  = logArgs + `; case "$*" in *install*clang-19*) printf '#!/bin/sh\n' > "$BIN/clang-19"; chmod +x "$BIN/clang-19";; esac`
		clang14   = `echo 14.0.0`
		goUntidy  = `[ "$1" = env ] && { echo https://proxy.golang.org; exit 0; }; echo "diff current/go.mod tidy/go.mod"; exit 1`
		goOffline = `[ "$1" = env ] && { echo https://proxy.golang.org; exit 0; }; echo "go: downloading x: dial tcp: lookup proxy.golang.org: no such host" >&2; exit 1`
		goTidy    = `exit 0`
	)
	for _, tc := range []struct {
		name  string
		run   string            // the shell function to call
		ci    bool              // CI=true
		tools map[string]string // stand-in scripts by name
		fail  bool              // the function must return non-zero
		log   string            // the stand-ins' calls, in order
		say   []string          // what stderr must contain
	}{
		{name: "clang present", run: "ensure_clang", ci: true,
			tools: map[string]string{"id": uid1000, "clang-19": "", "apt-get": aptFails}},
		{name: "not root, no sudo", run: "ensure_clang",
			tools: map[string]string{"id": uid1000, "apt-get": aptFails},
			say:   []string{"not root and no sudo", "sudo apt-get install clang-19", "will skip"}},
		{name: "not root, no sudo, CI", run: "ensure_clang", ci: true, fail: true,
			tools: map[string]string{"id": uid1000, "apt-get": aptFails},
			say:   []string{"not root and no sudo", "sudo apt-get install clang-19", "CI=true"}},
		{name: "sudo, apt-get fails", run: "ensure_clang",
			tools: map[string]string{"id": uid1000, "sudo": sudo, "apt-get": aptFails},
			log:   "sudo apt-get update -qq\napt-get update -qq\n",
			say:   []string{"sudo apt-get update failed", "sudo apt-get install clang-19", "will skip"}},
		{name: "sudo installs", run: "ensure_clang", ci: true,
			tools: map[string]string{"id": uid1000, "sudo": sudo, "apt-get": aptClang},
			log:   "sudo apt-get update -qq\napt-get update -qq\nsudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19\napt-get install -y -qq clang-19\n"},
		{name: "root installs without sudo", run: "ensure_clang", ci: true,
			tools: map[string]string{"id": uid0, "apt-get": aptClang},
			log:   "apt-get update -qq\napt-get install -y -qq clang-19\n"},
		{name: "clang 14, no apt-get, CI", run: "ensure_clang", ci: true, fail: true,
			tools: map[string]string{"id": uid0, "clang": clang14},
			say:   []string{"no apt-get", "clang >= 16"}},
		{name: "tidy", run: "check_tidy", ci: true, tools: map[string]string{"go": goTidy}},
		{name: "untidy", run: "check_tidy", fail: true, tools: map[string]string{"go": goUntidy},
			say: []string{"not tidy"}},
		{name: "proxy unreachable", run: "check_tidy", tools: map[string]string{"go": goOffline},
			say: []string{"no such host", "module proxy reachable", "continuing"}},
		{name: "proxy unreachable, CI", run: "check_tidy", ci: true, fail: true, tools: map[string]string{"go": goOffline},
			say: []string{"no such host", "module proxy reachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			for _, tool := range []string{"cut", "cat", "env", "basename", "chmod", "mktemp", "rm"} {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range tc.tools {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			log := filepath.Join(t.TempDir(), "log")
			cmd := exec.Command(bash, "-c", "source ./test.sh && "+tc.run)
			cmd.Env = []string{"PATH=" + bin, "BIN=" + bin, "LOG=" + log, fmt.Sprintf("CI=%v", tc.ci), "TMPDIR=" + t.TempDir()}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if failed := err != nil; failed != tc.fail {
				t.Errorf("%s returned %v, want failure %v\nstderr:\n%s", tc.run, err, tc.fail, stderr.String())
			}
			got, _ := os.ReadFile(log)
			if string(got) != tc.log {
				t.Errorf("calls:\n%s\nwant:\n%s", got, tc.log)
			}
			for _, s := range tc.say {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr does not say %q:\n%s", s, stderr.String())
				}
			}
			if len(tc.say) == 0 && strings.Contains(stderr.String(), "test.sh:") {
				t.Errorf("unexpected complaint:\n%s", stderr.String())
			}
		})
	}
}
