package main

import "runtime/debug"

// version is the release version, stamped by the release build
// (-ldflags "-X main.version=v1.2.3"). Empty in other builds: versionString
// then reads the module version or VCS revision from the build info.
var version string

// versionString returns the version `run -version` prints.
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "(devel)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "(devel) " + rev
}
