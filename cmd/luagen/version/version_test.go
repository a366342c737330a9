package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "luagen unknown"},
		{"installed from the proxy", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/lualock/lualock", Version: "v0.1.0"},
		}, "luagen v0.1.0 (go1.26.8)"},
		{"built in a clean checkout", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/lualock/lualock", Version: "(devel)"},
			Settings: []debug.BuildSetting{
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: "340d726a1b2c3d4e5f60718293a4b5c6d7e8f901"},
				{Key: "vcs.time", Value: "2026-11-24T04:02:00Z"},
				{Key: "vcs.modified", Value: "false"},
			},
		}, "luagen (devel) rev 340d726a1b2c 2026-11-24T04:02:00Z (go1.26.8)"},
		{"built in a checkout between tags (Go 1.24+: a pseudo-version)", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Version: "v0.0.0-20261124051445-d396f8cab2ad+dirty"},
			Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "d396f8cab2ad0123456789abcdef012345678901"},
				{Key: "vcs.time", Value: "2026-11-24T05:14:45Z"},
				{Key: "vcs.modified", Value: "true"},
			},
		}, "luagen v0.0.0-20261124051445-d396f8cab2ad+dirty (go1.26.8)"},
		{"built in a modified checkout", &debug.BuildInfo{
			Main: debug.Module{Version: "v0.2.0-rc.1"},
			Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "abc"},
				{Key: "vcs.modified", Value: "true"},
			},
		}, "luagen v0.2.0-rc.1 rev abc+modified"},
		{"empty main version", &debug.BuildInfo{}, "luagen (devel)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := format("luagen", tt.bi); got != tt.want {
				t.Errorf("format = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestString checks the text of the test binary itself: it has build
// information (go test embeds it), so the name and the Go version show.
func TestString(t *testing.T) {
	got := String("lualock")
	bi, _ := debug.ReadBuildInfo()
	if !strings.HasPrefix(got, "lualock ") || !strings.HasSuffix(got, "("+bi.GoVersion+")") {
		t.Errorf("String = %q, want lualock ... (%s)", got, bi.GoVersion)
	}
}

func TestIsFlag(t *testing.T) {
	for arg, want := range map[string]bool{
		"version": true, "-version": true, "--version": true,
		"-v": false, "versions": false, "": false,
	} {
		if got := IsFlag(arg); got != want {
			t.Errorf("IsFlag(%q) = %v, want %v", arg, got, want)
		}
	}
}
