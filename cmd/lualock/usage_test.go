//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runBin runs the built lualock binary with args, without Redis, and
// returns its exit code, stdout and stderr.
func runBin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), "REDIS_URL=redis://127.0.0.1:1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lualock %q: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// lualock without arguments prints a few lines (the subcommands and where
// the full help is) on stderr and exits 2; help, -h and --help print the
// full help on stdout and exit 0.
func TestShortUsage(t *testing.T) {
	code, stdout, stderr := runBin(t)
	if code != exitUsage || stdout != "" || stderr != shortUsage {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q; want %d and the short usage", code, stdout, stderr, exitUsage)
	}
	if n := strings.Count(stderr, "\n"); n > 6 {
		t.Errorf("the short usage has %d lines, want a few", n)
	}
	for _, want := range []string{"lualock lock", "lualock status", "lualock unlock", "lualock help"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the short usage lacks %q", want)
		}
	}
	for _, arg := range []string{"help", "-h", "--help"} {
		if code, stdout, _ := runBin(t, arg); code != 0 || stdout != usageText {
			t.Errorf("%s: exit %d, stdout %.80q...; want 0 and the full help", arg, code, stdout)
		}
	}
}

// synopsisExempt are flags a subcommand accepts that its synopsis leaves
// out on purpose (documented in the help's flags all the same).
var synopsisExempt = map[string][]string{"status": {"fair"}}

var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z][A-Za-z-]*)`)

// The flags each subcommand defines (as its -h lists them) are the flags
// of its synopsis in the help, in docs/CLI.md and in the README, and each
// has an entry in the help's flags section.
func TestFlagsDocumented(t *testing.T) {
	var docs []string
	for _, f := range []string{"../../docs/CLI.md", "../../README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, f, string(b))
	}
	flagSection := usageText[strings.Index(usageText, "\nflags:\n"):]
	for _, sub := range []string{"lock", "status", "unlock"} {
		code, stdout, _ := runBin(t, sub, "-h")
		if code != 0 {
			t.Fatalf("%s -h: exit %d", sub, code)
		}
		var defined []string
		for _, m := range flagLine.FindAllStringSubmatch(stdout, -1) {
			defined = append(defined, m[1])
		}
		if len(defined) == 0 {
			t.Fatalf("%s -h lists no flag: %q", sub, stdout)
		}
		for _, f := range defined {
			if !strings.Contains(flagSection, "\n  -"+f+" ") && !strings.Contains(flagSection, "\n  -"+f+"\n") {
				t.Errorf("the help's flags section lacks -%s (of %s)", f, sub)
			}
		}
		check := func(where, text string) {
			t.Helper()
			line := synopsis(text, sub)
			if line == "" {
				t.Errorf("%s: no synopsis line for lualock %s", where, sub)
				return
			}
			var named []string
			for _, m := range regexp.MustCompile(`\[?-([A-Za-z](?:[A-Za-z-]*[A-Za-z])?)\b`).FindAllStringSubmatch(line, -1) {
				named = append(named, m[1])
			}
			for _, f := range defined {
				if !slices.Contains(named, f) && !slices.Contains(synopsisExempt[sub], f) {
					t.Errorf("%s: the synopsis of lualock %s lacks -%s: %q", where, sub, f, line)
				}
			}
			for _, f := range named {
				if !slices.Contains(defined, f) {
					t.Errorf("%s: the synopsis of lualock %s names -%s, which it does not define", where, sub, f)
				}
			}
		}
		check("lualock help", usageText)
		for i := 0; i < len(docs); i += 2 {
			check(docs[i], docs[i+1])
		}
	}
}

// synopsis returns the first line of text that starts (after blanks) with
// "lualock SUB " and names the NAME argument, or "".
func synopsis(text, sub string) string {
	for _, line := range strings.Split(text, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "lualock "+sub+" ") && strings.Contains(l, " NAME") {
			return l
		}
	}
	return ""
}
