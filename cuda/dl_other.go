//go:build !(linux && (amd64 || arm64)) || nogpu

package cuda

import "runtime"

const supported = false

func dlopen(path string) (uintptr, error) {
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		return 0, unavailable("not in this build: built with -tags nogpu, CPU only", nil)
	}
	return 0, unavailable("not supported on "+runtime.GOOS+"/"+runtime.GOARCH, nil)
}

func dlsym(h uintptr, name string) uintptr { return 0 }

func call(fn uintptr, args ...uintptr) Result { panic("cuda: no driver on this platform") }

func callv(fn uintptr, args []uintptr) Result { panic("cuda: no driver on this platform") }

func gettid() int { return 0 }
