package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoGenerate_deletedScript runs go generate ./... in a module whose
// generated package holds the //go:generate directive in a _test.go file,
// as lualock's does (generated/generate_test.go): after a script is
// deleted, luagen removes its generated file, and go generate, which reads
// a package's test files after its other files, has already read it. With
// the directive in a package that go generate visits before the generated
// one (lualock's root package, as it was), the same run fails: go generate
// listed the removed file and cannot open it.
func TestGoGenerate_deletedScript(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds luagen and runs go generate")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "luagen")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script := "-- @key k the key\n-- @return int?\nreturn tonumber(redis.call('get', KEYS[1]))\n"
	setup := func(t *testing.T, directiveFile string) string {
		dir := t.TempDir()
		files := map[string]string{
			"go.mod":      "module example.com/m\n\ngo 1.24\n",
			"doc.go":      "// Package m uses the scripts.\npackage m\n",
			"lua/a.lua":   script,
			"lua/b.lua":   script,
			directiveFile: "package " + map[bool]string{true: "m", false: "generated"}[directiveFile == "doc_gen.go"] + "\n\n//go:generate $LUAGEN generate -src " + map[bool]string{true: "lua -out generated", false: "../lua -out ."}[directiveFile == "doc_gen.go"] + "\n",
		}
		for name, body := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	generate := func(dir string) (string, error) {
		cmd := exec.Command(goTool, "generate", "./...")
		cmd.Dir = dir
		// Loading the packages needs no download: go-redis, which the
		// generated code imports, is not resolved by go generate.
		cmd.Env = append(os.Environ(), "LUAGEN="+bin, "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Run("directive in the generated package's test file", func(t *testing.T) {
		dir := setup(t, "generated/generate_test.go")
		if out, err := generate(dir); err != nil {
			t.Fatalf("first go generate: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "generated", "b_lua.go")); err != nil {
			t.Fatalf("b_lua.go not generated: %v", err)
		}
		if err := os.Remove(filepath.Join(dir, "lua", "b.lua")); err != nil {
			t.Fatal(err)
		}
		out, err := generate(dir)
		if err != nil {
			t.Fatalf("go generate after deleting lua/b.lua: %v\n%s", err, out)
		}
		if !strings.Contains(out, "removed orphaned generated file") {
			t.Errorf("no removal reported:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(dir, "generated", "b_lua.go")); !os.IsNotExist(err) {
			t.Errorf("b_lua.go still there (%v)", err)
		}
	})
	t.Run("directive in a package visited first", func(t *testing.T) {
		dir := setup(t, "doc_gen.go")
		if out, err := generate(dir); err != nil {
			t.Fatalf("first go generate: %v\n%s", err, out)
		}
		if err := os.Remove(filepath.Join(dir, "lua", "b.lua")); err != nil {
			t.Fatal(err)
		}
		out, err := generate(dir)
		t.Logf("go generate output: %s", out)
		if err == nil || !strings.Contains(out, "b_lua.go") {
			t.Fatalf("go generate with the directive ahead of the generated package: err %v, want the failure this layout has\n%s", err, out)
		}
	})
}
