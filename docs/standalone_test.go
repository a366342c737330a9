package docs

import (
	"bufio"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// notStandalone matches what a reader of the repository cannot follow: a
// path of a developer's machine, a file beside the clone rather than in it,
// and a reference to an issue tracker by number (say what the code does
// and why instead).
// The pattern is built from character classes so that this file does not
// itself contain what it rejects (other checkers grep for the same text).
var notStandalone = regexp.MustCompile(`/[w]ork/|/[h]ome/|/[U]sers/|[A-Za-z]:\\Users\\|\.\./[s]hared\b|\b[Ii]ssues? #?[0-9]+`)

// TestRepository_standsAlone fails on a machine path, a reference outside
// the repository or an "issue N" reference in the Go and Lua comments and
// the Markdown files of every module of the repository (CHANGELOG.md
// keeps its history).
func TestRepository_standsAlone(t *testing.T) {
	root := ".."
	var checked int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		var bad []string
		switch filepath.Ext(path) {
		case ".go":
			bad = goComments(t, path)
		case ".lua":
			bad = luaComments(t, path)
		case ".md":
			if rel == "CHANGELOG.md" {
				return nil
			}
			bad = matchLines(t, path, func(line string) string { return line })
		default:
			return nil
		}
		checked++
		for _, b := range bad {
			t.Errorf("%s:%s", filepath.ToSlash(rel), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the walk missed the repository", checked)
	}
}

// goComments returns "line: text" for each comment of a Go file that
// matches notStandalone.
func goComments(t *testing.T, path string) []string {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, scanner.ScanComments)
	var bad []string
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return bad
		}
		if tok == token.COMMENT && notStandalone.MatchString(lit) {
			bad = append(bad, lineOf(fset, pos)+": "+notStandalone.FindString(lit)+" in a comment")
		}
	}
}

func lineOf(fset *token.FileSet, pos token.Pos) string {
	p := fset.Position(pos)
	return strings.TrimPrefix(p.String(), p.Filename+":")
}

// luaComments returns the lines of a Lua file whose comment (from "--")
// matches notStandalone.
func luaComments(t *testing.T, path string) []string {
	return matchLines(t, path, func(line string) string {
		if i := strings.Index(line, "--"); i >= 0 {
			return line[i:]
		}
		return ""
	})
}

// matchLines returns "line: match" for each line of path whose part (what
// part keeps of it) matches notStandalone.
func matchLines(t *testing.T, path string, part func(string) string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bad []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if m := notStandalone.FindString(part(sc.Text())); m != "" {
			bad = append(bad, strconv.Itoa(n)+": "+m)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return bad
}
