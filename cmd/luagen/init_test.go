package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInit: the README's recipe. generate with flags writes where asked,
// but check without flags would read the defaults; luagen init writes
// luagen.json with the folders, and then generate and check need no
// flags and agree. A second init refuses to overwrite the file.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/app\n\ngo 1.24\n")
	if err := os.MkdirAll(filepath.Join(dir, "lua"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "lua", "get.lua"), "-- @key k the key\n-- @return string?\nreturn redis.call('get', KEYS[1])\n")
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"init", "-src", "lua", "-out", "internal/scripts", "-redis", "6.2"}, &stdout, &stderr); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "luagen.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"src": "lua"`, `"out": "internal/scripts"`, `"redis": "6.2"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("luagen.json lacks %s:\n%s", want, b)
		}
	}
	for _, cmd := range []string{"generate", "check", "lint"} {
		stderr.Reset()
		if code := run([]string{cmd}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s with no flags: exit %d: %s", cmd, code, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "internal", "scripts", "get_lua.go")); err != nil {
		t.Errorf("generate did not write into internal/scripts: %v", err)
	}
	stderr.Reset()
	if code := run([]string{"init"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "exists") {
		t.Errorf("second init: exit %d, %q; want 1 and \"exists\"", code, stderr.String())
	}
	// From a subfolder, init still writes at the module root, paths
	// relative to it; a folder outside the module is refused.
	if err := os.Remove(filepath.Join(dir, "luagen.json")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(dir, "internal"))
	stderr.Reset()
	if code := run([]string{"init", "-src", "../lua", "-out", "../../elsewhere"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "outside the module root") {
		t.Errorf("init with -out outside the module: exit %d, %q", code, stderr.String())
	}
	if code := run([]string{"init", "-src", "../lua", "-out", "scripts"}, &stdout, &stderr); code != 0 {
		t.Fatalf("init from a subfolder: exit %d: %s", code, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "luagen.json")); !strings.Contains(string(b), `"out": "internal/scripts"`) {
		t.Errorf("init from a subfolder wrote:\n%s", b)
	}
}
