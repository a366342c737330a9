package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// importTruth is the header a reviewer writes for each script of
// testdata/import/rdb (names from the Go code's own vocabulary, types from
// what the script does with the value): for each script its @key and @arg
// lines as "name" or "name type" ("..." marks a variadic one; "|"
// separates names equally right), then its @return type.
var importTruth = map[string][]string{
	"enqueue":      {"key task", "key pending", "arg msg|encoded bytes", "arg id string", "arg now int", "return int"},
	"dequeue":      {"key pending", "key paused", "key active", "key lease", "arg lease_expiry|expire int", "arg prefix|task_key_prefix string", "return []string"},
	"forward":      {"key scheduled", "key pending", "arg now int", "arg prefix|task_key_prefix string", "return int"},
	"pause":        {"key paused", "arg at|now int", "return status"},
	"extend_lease": {"key lease", "arg expire|expiry int", "arg ids... string", "return int"},
	"size":         {"key pending", "key scheduled", "return int"},
	"count_paused": {"key paused...", "return int"},
}

var draftedLine = regexp.MustCompile(`^-- @(key|arg|return)\s+(\S+)(?:\s+(\S+))?`)

// TestImport drafts the scripts of testdata/import/rdb (a task queue's
// Redis package in asynq's idioms), checks that every drafted file parses
// with no header finding, that the Go code is untouched, that the call
// sites are printed and that an existing file is never overwritten, and
// measures how many drafted header lines are right against importTruth.
func TestImport(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: loads a package with go list")
	}
	goFile := filepath.Join("testdata", "import", "rdb", "rdb.go")
	before, err := os.ReadFile(goFile)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"import", "-write", "-src", filepath.Join(out, "lua"), "./testdata/import/rdb"}, &stdout, &stderr); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, stderr.String(), stdout.String())
	}
	if after, _ := os.ReadFile(goFile); !bytes.Equal(before, after) {
		t.Fatal("import changed the Go code")
	}
	for _, site := range []string{"rdb.go:57: enqueueCmd.Run -> Enqueue(", "rdb.go:145: r.client.Eval -> Size(", "rdb.go:162: r.client.EvalRO -> CountPaused("} {
		if !strings.Contains(stdout.String(), site) {
			t.Errorf("stdout lacks the call site %q:\n%s", site, stdout.String())
		}
	}
	scripts, ds := gen.Parse(os.DirFS(out), gen.Config{Src: "lua"})
	for _, d := range ds {
		if d.Rule == gen.RuleHeader || d.Rule == gen.RuleName {
			t.Errorf("drafted file: %s", d)
		}
	}
	if len(scripts) != len(importTruth) {
		t.Errorf("drafted %d scripts, want %d", len(scripts), len(importTruth))
	}
	right, total := 0, 0
	for name, truth := range importTruth {
		b, err := os.ReadFile(filepath.Join(out, "lua", name+".lua"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var drafted []string
		for _, line := range strings.Split(string(b), "\n") {
			if m := draftedLine.FindStringSubmatch(line); m != nil {
				d := m[1] + " " + m[2]
				if m[1] == "arg" {
					d += " " + m[3]
				}
				drafted = append(drafted, d)
			}
		}
		for i, want := range truth {
			total++
			if i < len(drafted) && lineMatches(drafted[i], want) {
				right++
			} else {
				got := "(none)"
				if i < len(drafted) {
					got = drafted[i]
				}
				t.Logf("%s: drafted %q, a reviewer writes %q", name, got, want)
			}
		}
		if len(drafted) != len(truth) {
			t.Errorf("%s: drafted %d header lines, want %d: %q", name, len(drafted), len(truth), drafted)
		}
	}
	t.Logf("luagen import: %d of %d drafted @key/@arg/@return lines right", right, total)
	// At least 3 in 4 right on this package (it measured 26 of 30).
	if right*4 < total*3 {
		t.Errorf("only %d of %d drafted lines right", right, total)
	}

	// Without -write the drafts are printed and nothing is written; with
	// no package named, it is a usage error.
	stdout.Reset()
	empty := filepath.Join(t.TempDir(), "lua")
	if code := run([]string{"import", "-src", empty, "./testdata/import/rdb"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "-- @key    task  TODO") {
		t.Errorf("import without -write: exit %d, stdout:\n%s", code, stdout.String())
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("import without -write created %s: %v", empty, err)
	}
	if code := run([]string{"import"}, &stdout, &stderr); code != 2 {
		t.Errorf("import with no package: exit %d, want 2", code)
	}

	// A second import does not overwrite what the first wrote.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"import", "-write", "-src", filepath.Join(out, "lua"), "./testdata/import/rdb"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not overwritten") {
		t.Errorf("second import: exit %d, %q; want 1 and not overwritten", code, stderr.String())
	}
}

// lineMatches compares a drafted line ("arg encoded bytes") with a truth
// line whose name may list alternatives ("arg msg|encoded bytes").
func lineMatches(drafted, truth string) bool {
	d, w := strings.Fields(drafted), strings.Fields(truth)
	if len(d) != len(w) || d[0] != w[0] {
		return false
	}
	if !slices.Contains(strings.Split(w[1], "|"), d[1]) {
		return false
	}
	return len(w) < 3 || d[2] == w[2]
}
