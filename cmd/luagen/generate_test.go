package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const setLua = `-- Sets a value.
--
-- @key    key    the key to set
-- @arg    value  string  the value
-- @return status OK
return redis.call('SET', KEYS[1], ARGV[1])
`

const getLua = `-- Reads a value.
--
-- @key    key  the key to read
-- @return string?  the value, nil when missing
-- @flag   read-only
return redis.call('GET', KEYS[1])
`

// scriptsDir makes a temporary working directory holding lua/set.lua and
// lua/get.lua and changes into it.
func scriptsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "lua"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"set.lua": setLua, "get.lua": getLua} {
		if err := os.WriteFile(filepath.Join(dir, "lua", name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	return dir
}

// runWant runs luagen and fails the test unless it exits with want.
func runWant(t *testing.T, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	if got := run(args, &o, &e); got != want {
		t.Fatalf("luagen %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, want, o.String(), e.String())
	}
	return o.String(), e.String()
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// TestGenerateTwice checks that generate is deterministic and that a second
// run leaves the unchanged files alone, modification time included.
func TestGenerateTwice(t *testing.T) {
	dir := scriptsDir(t)
	out := filepath.Join(dir, "generated")
	runWant(t, 0, "generate")
	first := readDir(t, out)
	if len(first) != 3 {
		t.Fatalf("generated %d files, want 3: %v", len(first), first)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for name := range first {
		if err := os.Chtimes(filepath.Join(out, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr := runWant(t, 0, "generate")
	if stderr != "" {
		t.Errorf("second generate printed %q", stderr)
	}
	second := readDir(t, out)
	if len(second) != len(first) {
		t.Fatalf("second run left %d files, want %d", len(second), len(first))
	}
	for name, b := range first {
		if !bytes.Equal(second[name], b) {
			t.Errorf("%s differs between runs", name)
		}
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(old) {
			t.Errorf("%s was rewritten: mtime %v", name, fi.ModTime())
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644", name, fi.Mode().Perm())
		}
	}
	runWant(t, 0, "check")
}

// TestGenerateWriteFailure checks that when a file cannot be written, no
// generated file changes and no temporary file stays behind.
func TestGenerateWriteFailure(t *testing.T) {
	dir := scriptsDir(t)
	out := filepath.Join(dir, "generated")
	runWant(t, 0, "generate")
	before := readDir(t, out)
	if err := os.WriteFile(filepath.Join(dir, "lua", "set.lua"), []byte(strings.Replace(setLua, "ARGV[1])", "ARGV[1], 'KEEPTTL')", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lua", "get.lua"), []byte(strings.Replace(getLua, "Reads", "Gets", 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	calls := 0
	t.Cleanup(func() { createTemp = os.CreateTemp })
	createTemp = func(dir, pattern string) (*os.File, error) {
		if calls++; calls == 2 {
			return nil, &os.PathError{Op: "open", Path: filepath.Join(dir, "x"), Err: errors.New("disk full")}
		}
		return os.CreateTemp(dir, pattern)
	}
	_, stderr := runWant(t, 1, "generate")
	if want := "luagen: cannot write generated/set_lua.go: disk full\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	after := readDir(t, out)
	if len(after) != len(before) {
		t.Errorf("files after the failure: %d, want %d (temporary files left?)", len(after), len(before))
	}
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s changed although the run failed", name)
		}
	}
}

// TestGenerateReadOnlyOut checks the message for an output folder without
// write permission (not testable as root, who may write anyway).
func TestGenerateReadOnlyOut(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores folder permissions")
	}
	dir := scriptsDir(t)
	out := filepath.Join(dir, "generated")
	if err := os.Mkdir(out, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(out, 0o755) })
	_, stderr := runWant(t, 1, "generate")
	if want := "luagen: cannot write generated/get_lua.go: permission denied\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("files left in the read-only folder: %v", entries)
	}
}

// TestRepository checks that the repository's lua/ generates exactly the
// committed generated/ package.
func TestRepository(t *testing.T) {
	for _, p := range []string{"../../lua", "../../generated"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("no %s: %v", p, err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", "-src", "../../lua", "-out", "../../generated"}, &stdout, &stderr); code != 0 {
		t.Errorf("luagen check on the repository: exit %d\n%s%s", code, stderr.String(), stdout.String())
	}
	// lint on its own, so a failure above says whether lint findings or
	// stale files are the cause.
	stderr.Reset()
	if code := run([]string{"lint", "-src", "../../lua"}, &stdout, &stderr); code != 0 {
		t.Errorf("luagen lint on the repository's lua/: exit %d\n%s", code, stderr.String())
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
