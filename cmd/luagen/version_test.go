package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun_version(t *testing.T) {
	for _, arg := range []string{"version", "-version", "--version"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, &stdout, &stderr); code != 0 {
			t.Fatalf("luagen %s: exit %d, stderr %q", arg, code, stderr.String())
		}
		if out := stdout.String(); !strings.HasPrefix(out, "luagen ") || !strings.HasSuffix(out, ")\n") || strings.Count(out, "\n") != 1 {
			t.Errorf("luagen %s: stdout %q, want one line \"luagen VERSION ... (goX)\"", arg, out)
		}
		if stderr.Len() != 0 {
			t.Errorf("luagen %s: stderr %q, want none", arg, stderr.String())
		}
	}
}
