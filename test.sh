#!/usr/bin/env bash
# The one test command (README "Test"). On a fresh Debian/Ubuntu machine it installs
# what the tests need (clang-19 for the Metal interpreter, qemu-user-static for the
# arm64 kernels) and then runs, with CGO_ENABLED=0: go mod tidy -diff, gofmt, go vet
# (linux and darwin/arm64), the cross-builds, the tests both with Go assembly and
# with -tags noasm, and the kernels/cpu tests for linux/arm64 under qemu.
#
# Installing uses apt-get, as root or through sudo when sudo exists. When that is
# not possible the script says what to install and how. With CI=true (.ci/run) a
# missing clang or an unreachable module proxy fails the run; elsewhere the script
# runs what it can (the Metal interpreter tests skip and say why).
#
# Sourcing the file (source ./test.sh) defines the functions below and runs nothing;
# testsh_test.go tests the install steps that way.
set -euo pipefail

step() { printf '\n== %s\n' "$*"; }

ci() { [ "${CI:-}" = true ]; }

have_clang() { # clang >= 16: the Metal interpreter needs _Float16 and __bf16
	local c v
	for c in clang-19 clang-18 clang-17 clang-16; do command -v "$c" >/dev/null 2>&1 && return 0; done
	command -v clang >/dev/null 2>&1 || return 1
	v=$(clang -dumpversion 2>/dev/null | cut -d. -f1)
	[ -n "$v" ] && [ "$v" -ge 16 ]
}

have_qemu() { command -v qemu-aarch64-static >/dev/null 2>&1; }

# apt_install installs Debian packages as root: directly when we are root, else
# through sudo when it exists. On failure it sets install_err to the reason.
install_err=""
apt_install() {
	local sudo=""
	install_err=""
	if ! command -v apt-get >/dev/null 2>&1; then
		install_err="no apt-get on this system"
		return 1
	fi
	if [ "$(id -u)" != 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			install_err="not root and no sudo"
			return 1
		fi
		sudo="sudo "
	fi
	if ! ${sudo}apt-get update -qq; then
		install_err="${sudo}apt-get update failed"
		return 1
	fi
	if ! ${sudo}env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; then
		install_err="${sudo}apt-get install $* failed"
		return 1
	fi
}

# ensure_clang installs clang-19 when no clang >= 16 is present. If that fails it
# prints what to install; it returns non-zero only under CI=true.
ensure_clang() {
	have_clang && return 0
	step "installing clang-19 (needed by the Metal interpreter tests)"
	if apt_install clang-19 && have_clang; then
		return 0
	fi
	[ -n "$install_err" ] || install_err="apt-get installed clang-19 but no clang-19 is on PATH"
	cat >&2 <<-EOF
		test.sh: clang >= 16 is missing and could not be installed ($install_err).
		The Metal interpreter tests need it. Install it, then rerun ./test.sh:
		    Debian/Ubuntu:  sudo apt-get install clang-19   (as root: apt-get install clang-19)
		    elsewhere:      any clang >= 16 on PATH as clang-19 … clang-16 or clang
	EOF
	if ci; then
		echo "test.sh: CI=true: the Metal interpreter tests must run, so this is an error" >&2
		return 1
	fi
	echo "test.sh: continuing without clang: the Metal interpreter tests will skip" >&2
}

# ensure_qemu installs qemu-user-static when missing; without it the arm64 tests
# are skipped with a message (see the last step), in CI too.
ensure_qemu() {
	have_qemu && return 0
	step "installing qemu-user-static (runs the arm64 kernel tests)"
	apt_install qemu-user-static && return 0
	echo "test.sh: could not install qemu-user-static ($install_err): install it with sudo apt-get install qemu-user-static" >&2
}

# check_tidy fails when go.mod or go.sum is not tidy. When go mod tidy cannot run
# (usually: the module proxy is unreachable) it fails under CI=true and warns
# elsewhere.
check_tidy() {
	local diff errs
	errs=$(mktemp)
	if diff=$(go mod tidy -diff 2>"$errs"); then
		rm -f "$errs"
		return 0
	fi
	if [ -n "$diff" ]; then
		printf '%s\n' "$diff"
		echo "test.sh: go.mod/go.sum are not tidy: run go mod tidy and commit the result" >&2
		rm -f "$errs"
		return 1
	fi
	cat "$errs" >&2
	rm -f "$errs"
	echo "test.sh: go mod tidy -diff could not run (is the module proxy reachable? GOPROXY=$(go env GOPROXY))" >&2
	if ci; then
		return 1
	fi
	echo "test.sh: continuing without the go.mod check" >&2
}

# Sourced: stop here, with the functions defined.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
	return 0
fi

cd "$(dirname "$0")"
export CGO_ENABLED=0

ensure_clang
ensure_qemu

step "go mod tidy -diff"
check_tidy

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "not gofmt'ed:"; echo "$bad"; exit 1; fi

step "go vet (linux/amd64, darwin/arm64, linux/arm64)"
go vet ./...
GOOS=darwin GOARCH=arm64 go vet ./...
GOOS=linux GOARCH=arm64 go vet ./...

step "cross-builds"
GOOS=darwin GOARCH=arm64 go build ./...
GOOS=linux GOARCH=arm64 go build ./...
go build -tags noasm ./...

step "go test ./..."
go test -count=1 -timeout 30m ./...

step "go test -tags noasm ./..."
go test -count=1 -timeout 30m -tags noasm ./...

# The arm64 assembly (NEON, SDOT) runs under qemu user emulation: -cpu max has
# FEAT_DotProd, cortex-a72 has NEON only, so both kernel sets and the fallback
# run. qemu checks correctness, not speed.
step "kernels/cpu tests for linux/arm64 under qemu (-cpu max, -cpu cortex-a72)"
if have_qemu; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	GOARCH=arm64 go test -c -o "$tmp/cpu.test" ./kernels/cpu
	for c in max cortex-a72; do
		echo "-cpu $c"
		(cd kernels/cpu && qemu-aarch64-static -cpu "$c" "$tmp/cpu.test" -test.count=1 -test.timeout=10m)
	done
else
	echo "SKIPPED: qemu-aarch64-static is missing and apt-get could not install it (install qemu-user-static)"
fi
