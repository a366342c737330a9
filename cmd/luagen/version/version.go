// Package version reports the version of the module a command was built
// from, for the --version flag of lualock and luagen. It lives in luagen's
// module, which lualock's requires, as luagen cannot require lualock's.
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
//	lualock v0.0.0-20261124051445-d396f8cab2ad+dirty (go1.26.8)
//	lualock (devel) rev d396f8cab2ad 2026-11-24T05:14:45Z+modified (go1.26.8)
//
// The first is a binary installed from the module proxy (or built at a
// tag), the second one built in a git checkout between tags, with
// uncommitted changes; the third one built by a go command that records the
// revision but no version from it. The version is "(devel)" when the go
// command knew none (go run, -buildvcs=false) and "unknown" when the binary
// has no build information.
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
	if len(rev) > 12 {
		rev = rev[:12]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", name, v)
	// The VCS settings are only there for builds in a checkout. Since Go
	// 1.24 the go command then also derives the version from the checkout:
	// a tag (v0.1.0), or a pseudo-version that names the revision and its
	// time (v0.0.0-20261124051445-d396f8cab2ad), with +dirty when the tree
	// had changes. Say only what the version does not.
	if rev != "" && !strings.Contains(v, rev) {
		fmt.Fprintf(&b, " rev %s", rev)
		if at != "" {
			fmt.Fprintf(&b, " %s", at)
		}
		if modified && !strings.HasSuffix(v, "+dirty") {
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
