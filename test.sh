#!/usr/bin/env bash
# The one test command (README "Test"). On a fresh Debian/Ubuntu machine it installs
# what the tests need (clang-19 for the Metal interpreter) and then runs, with
# CGO_ENABLED=0: gofmt, go vet (linux and darwin/arm64), the cross-builds, the
# tests both with Go assembly and with -tags noasm, and the kernels/cpu tests
# for arm64 under qemu (qemu-user-static, installed when missing).
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0

step() { printf '\n== %s\n' "$*"; }

have_clang() { # clang >= 16: the Metal interpreter needs _Float16 and __bf16
	for c in clang-19 clang-18 clang-17 clang-16; do command -v "$c" >/dev/null 2>&1 && return 0; done
	v=$(clang -dumpversion 2>/dev/null | cut -d. -f1)
	[ -n "$v" ] && [ "$v" -ge 16 ]
}
if ! have_clang; then
	step "installing clang-19 (needed by the Metal interpreter tests)"
	if command -v apt-get >/dev/null 2>&1; then
		SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
		$SUDO apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-19 >/dev/null
	else
		echo "no apt-get: install clang >= 16 yourself (the Metal interpreter tests need it)"
	fi
fi

have_qemu() { command -v qemu-aarch64-static >/dev/null 2>&1; }
if ! have_qemu && command -v apt-get >/dev/null 2>&1; then
	step "installing qemu-user-static (runs the arm64 kernel tests)"
	SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
	{ $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user-static >/dev/null; } ||
		echo "could not install qemu-user-static"
fi

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
