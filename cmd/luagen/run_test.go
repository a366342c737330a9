package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// TestScript runs run() on every testdata/*.txtar archive. An archive holds
// the files to create (extracted into a fresh temporary folder, the working
// directory of the run) and these sections:
//
//	-- args --        the command line, split at white space (required)
//	-- exit --        the exit status (required)
//	-- stderr --      the exact stderr (absent: empty)
//	-- stdout --      the exact stdout (absent: empty, unless stdout-has)
//	-- stdout-has --  lines that stdout must contain, in any order; replaces
//	                  the exact stdout check
//	-- cwd --         a folder of the archive to run in, instead of its root
//	-- setup --       command lines run first, one a line; each must exit 0
//	-- after/PATH --  after setup, PATH is overwritten with the section
//	-- append/PATH -- after setup, the section is appended to PATH
//	-- remove --      after setup, these paths (one a line) are removed
//	-- want/PATH --   after the run, file PATH exists and holds every
//	                  non-empty line of the section
//	-- absent --      paths, one a line, that must not exist after the run
//
// The string $TMP in args, stdout and stderr stands for the folder.
func TestScript(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.txtar")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			runArchive(t, a)
		})
	}
}

func runArchive(t *testing.T, a *txtar.Archive) {
	dir := t.TempDir()
	sections := map[string]string{}
	var wants, later []txtar.File
	write := func(name string, data []byte, flag int) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, flag|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range a.Files {
		switch {
		case strings.Contains(" args exit stderr stdout stdout-has cwd setup remove absent ", " "+f.Name+" "):
			sections[f.Name] = string(f.Data)
		case strings.HasPrefix(f.Name, "want/"):
			wants = append(wants, f)
		case strings.HasPrefix(f.Name, "after/"), strings.HasPrefix(f.Name, "append/"):
			later = append(later, f)
		default:
			write(f.Name, f.Data, os.O_TRUNC)
		}
	}
	for _, s := range []string{"args", "exit"} {
		if _, ok := sections[s]; !ok {
			t.Fatalf("archive has no -- %s -- section", s)
		}
	}
	expand := func(s string) string { return strings.ReplaceAll(s, "$TMP", dir) }
	args := strings.Fields(expand(sections["args"]))
	wantExit, err := strconv.Atoi(strings.TrimSpace(sections["exit"]))
	if err != nil {
		t.Fatalf("exit section: %v", err)
	}

	t.Chdir(filepath.Join(dir, strings.TrimSpace(sections["cwd"])))
	for _, line := range strings.Split(sections["setup"], "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var out bytes.Buffer
		if code := run(strings.Fields(expand(line)), &out, &out); code != 0 {
			t.Fatalf("setup luagen %s: exit %d\n%s", line, code, out.String())
		}
	}
	for _, f := range later {
		if name, ok := strings.CutPrefix(f.Name, "after/"); ok {
			write(name, f.Data, os.O_TRUNC)
		} else {
			write(strings.TrimPrefix(f.Name, "append/"), f.Data, os.O_APPEND)
		}
	}
	for _, path := range strings.Fields(sections["remove"]) {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(path))); err != nil {
			t.Fatal(err)
		}
	}

	var stdout, stderr bytes.Buffer
	got := run(args, &stdout, &stderr)

	if got != wantExit {
		t.Errorf("luagen %s: exit %d, want %d", strings.Join(args, " "), got, wantExit)
	}
	if want := expand(sections["stderr"]); stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s\ndiff:\n%s", stderr.String(), want,
			unifiedDiff("want", "got", []byte(want), stderr.Bytes()))
	}
	if has, ok := sections["stdout-has"]; ok {
		for _, line := range strings.Split(expand(has), "\n") {
			if line != "" && !strings.Contains(stdout.String(), line) {
				t.Errorf("stdout does not contain %q; stdout:\n%s", line, stdout.String())
			}
		}
	} else if want := expand(sections["stdout"]); stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\ndiff:\n%s", stdout.String(), want,
			unifiedDiff("want", "got", []byte(want), stdout.Bytes()))
	}
	for _, f := range wants {
		path := strings.TrimPrefix(f.Name, "want/")
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("want %s: %v", path, err)
			continue
		}
		for _, line := range strings.Split(string(f.Data), "\n") {
			if line != "" && !strings.Contains(string(b), line) {
				t.Errorf("%s does not contain %q", path, line)
			}
		}
	}
	for _, path := range strings.Fields(sections["absent"]) {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(path))); err == nil {
			t.Errorf("%s exists, want it absent", path)
		}
	}
	// A run never leaves temporary files behind.
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".luagen-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// TestBadPackageName: -pkg (or the base name of -out, its default) must be a
// package name Go code can import: no blank identifier, keyword, main or
// init. Nothing is written.
func TestBadPackageName(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string // the first line of stderr
	}{
		{[]string{"generate", "-pkg", "_"}, 2, `luagen: -pkg: package name "_" is the blank identifier, which names no package`},
		{[]string{"check", "-pkg", "_"}, 2, `luagen: -pkg: package name "_" is the blank identifier, which names no package`},
		{[]string{"generate", "-pkg", "func"}, 2, `luagen: -pkg: package name "func" is a Go keyword`},
		{[]string{"generate", "-pkg", "main"}, 2, `luagen: -pkg: package name "main" would make a command, not a package to import`},
		{[]string{"generate", "-pkg", "init"}, 2, `luagen: -pkg: package name "init" cannot be imported: init is reserved for init functions`},
		{[]string{"generate", "-pkg", "1x"}, 2, `luagen: -pkg: package name "1x" is not a Go identifier`},
		{[]string{"generate", "-out", "_"}, 1, `luagen: package name "_" is the blank identifier, which names no package; it is the base name of -out: set -pkg`},
		{[]string{"generate", "-out", "type"}, 1, `luagen: package name "type" is a Go keyword; it is the base name of -out: set -pkg`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := scriptsDir(t)
			_, stderr := runWant(t, tt.code, tt.args...)
			if first, _, _ := strings.Cut(stderr, "\n"); first != tt.want {
				t.Errorf("stderr starts with %q, want %q", first, tt.want)
			}
			for _, d := range []string{"generated", "_", "type"} {
				if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
					t.Errorf("%s was written", d)
				}
			}
		})
	}
}
