package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// TestStaticRunsInEmptyChroot copies this machine's static build alone into an
// empty directory and runs `/ingot -version` chrooted there with an empty
// environment: what a FROM scratch container gives it. The chroot needs root;
// otherwise a user namespace maps us to root inside it (unshare -r).
func TestStaticRunsInEmptyChroot(t *testing.T) {
	name := "ingot-linux-" + runtime.GOARCH + "-static"
	src := filepath.Join(dist(t), name)
	if _, err := os.Stat(src); err != nil {
		t.Skipf("no static build for linux/%s", runtime.GOARCH)
	}
	root := t.TempDir()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "ingot"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/ingot", "-version")
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	how := "as root"
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 {
		how = "in a user namespace"
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	}
	out, err := cmd.CombinedOutput()
	// EPERM, EINVAL, ENOSPC, EUSERS: no permission to chroot or to make the
	// namespace. Any other error (ENOENT: no program interpreter in the empty
	// root) is the binary's fault.
	for _, e := range []syscall.Errno{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS} {
		if errors.Is(err, e) {
			missing(t, "cannot chroot %s: %v (run as root, or allow unprivileged user namespaces)", how, err)
		}
	}
	if err != nil {
		t.Fatalf("chroot %s /ingot -version: %v\n%s", root, err, out)
	}
	if got, want := string(out), "ingot "+testVersion+"\n"; got != want {
		t.Errorf("in an empty chroot, -version printed %q, want %q", got, want)
	}
}
