package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCorpus lints and generates every project of a corpus and compares
// the findings with the reviewed expectation file expected.txt of the
// corpus (go test ./gen -run TestCorpus -update rewrites it). A corpus is a
// folder holding manifest.json (an array of {"dir", ...} naming each
// project and, for third-party code, its project, version and licence)
// and, per project, a lua/ folder and an optional luagen.json. The default
// corpus, testdata/corpus, is written by lualock to reproduce the idioms of
// real projects (no line is copied); LUAGEN_CORPUS=/path runs the test
// over another one, such as a corpus of third-party scripts kept where
// their licences allow. The log says how many projects generate with no
// finding of error severity.
func TestCorpus(t *testing.T) {
	root := os.Getenv("LUAGEN_CORPUS")
	if root == "" {
		root = filepath.Join("testdata", "corpus")
	}
	b, err := os.ReadFile(filepath.Join(root, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []struct {
		Dir string `json:"dir"`
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	var got bytes.Buffer
	generated, clean := 0, 0
	for _, p := range manifest {
		dir := filepath.Join(root, p.Dir)
		fsys := os.DirFS(dir)
		cfg := Config{Src: "lua", Package: "corpus"}
		if b, err := os.ReadFile(filepath.Join(dir, ConfigFileName)); err == nil {
			fc, err := LoadFileConfig(b)
			if err != nil {
				t.Fatalf("%s: %v", p.Dir, err)
			}
			cfg = cfg.FromFile(fc)
		}
		files, diags, err := GenerateLint(fsys, cfg)
		var de *DiagnosticsError
		switch {
		case err == nil:
			generated++
			ignores := countIgnores(t, dir)
			if ignores == 0 {
				clean++
				fmt.Fprintf(&got, "%s: generates %d files\n", p.Dir, len(files))
			} else {
				fmt.Fprintf(&got, "%s: generates %d files, with %d per-line ignores\n", p.Dir, len(files), ignores)
			}
		case errors.As(err, &de):
			fmt.Fprintf(&got, "%s: does not generate\n", p.Dir)
		default:
			t.Errorf("%s: %v", p.Dir, err)
		}
		for _, d := range diags {
			d.File = p.Dir + "/" + d.File
			fmt.Fprintf(&got, "  %s\n", d)
		}
	}
	fmt.Fprintf(&got, "%d of %d projects generate with no per-line ignore\n", clean, len(manifest))
	t.Logf("%d of %d projects generate", generated, len(manifest))
	want := filepath.Join(root, "expected.txt")
	if *update {
		if err := os.WriteFile(want, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	wb, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("%v (run with -update to write it, then review it)", err)
	}
	if !bytes.Equal(wb, got.Bytes()) {
		t.Errorf("findings differ from %s (review, then -update):\n%s", want, lineDiff(wb, got.Bytes()))
	}
}

// countIgnores counts the luagen:ignore comments of a project's scripts.
func countIgnores(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".lua") {
			return err
		}
		b, err := os.ReadFile(path)
		n += strings.Count(string(b), "luagen:ignore")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
