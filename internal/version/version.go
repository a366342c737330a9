// Package version reports the version of the lualock module a command was
// built from, for the --version flag of lualock and luagen.
//
// It reads the build information the go command embeds in every binary
// (runtime/debug.ReadBuildInfo): the module version that `go install
// module@version` resolved, and the VCS revision, time and modified flag
// that `go build` records when it builds from a git checkout.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// String returns the one-line version of the command called name, for
// example
//
//	lualock v0.1.0 (go1.26.8)
//	lualock (devel) rev 340d726a1b2c 2026-11-24T04:02:00Z+modified (go1.26.8)
//
// The version is "(devel)" when the binary was built inside the module's own
// checkout (go build, go run) and "unknown" when the binary has no build
// information.
func String(name string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return format(name, nil)
	}
	return format(name, bi)
}

// format builds String's text from bi (nil: no build information).
func format(name string, bi *debug.BuildInfo) string {
	if bi == nil {
		return name + " unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", name, v)
	// A module version from the proxy already names its commit; the VCS
	// settings are only present for builds from a checkout.
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		fmt.Fprintf(&b, " rev %s", rev)
		if at != "" {
			fmt.Fprintf(&b, " %s", at)
		}
		if modified {
			b.WriteString("+modified")
		}
	}
	if bi.GoVersion != "" {
		fmt.Fprintf(&b, " (%s)", bi.GoVersion)
	}
	return b.String()
}

// IsFlag reports whether arg asks for the version: "version", "-version" or
// "--version".
func IsFlag(arg string) bool {
	switch arg {
	case "version", "-version", "--version":
		return true
	}
	return false
}
