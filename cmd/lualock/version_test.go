package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun_version(t *testing.T) {
	for _, arg := range []string{"version", "-version", "--version"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("lualock %s: exit %d, stderr %q", arg, code, stderr.String())
		}
		if out := stdout.String(); !strings.HasPrefix(out, "lualock ") || !strings.HasSuffix(out, ")\n") || strings.Count(out, "\n") != 1 {
			t.Errorf("lualock %s: stdout %q, want one line \"lualock VERSION ... (goX)\"", arg, out)
		}
		if stderr.Len() != 0 {
			t.Errorf("lualock %s: stderr %q, want none", arg, stderr.String())
		}
	}
}
