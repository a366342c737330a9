package docs

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetImports are the packages a snippet may use. A snippet that is a
// whole file (it starts with "package") imports what it needs from these;
// any other snippet sees all of them, by their usual names.
var snippetImports = []string{
	"context", "errors", "fmt", "log", "log/slog", "os", "sync/atomic", "time",
	"github.com/redis/go-redis/v9",
	"github.com/lualock/lualock",
	"github.com/lualock/lualock/generated",
	"github.com/lualock/lualock/luart",
}

// fragmentVars are the variables a fragment (a snippet that is neither a
// whole file nor a list of declarations) may use without declaring them;
// work stands for the caller's job.
const fragmentVars = `ctx context.Context, rdb *redis.Client, client *lualock.Client, lock *lualock.Lock, work func(context.Context) error`

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file string
	line int // of the opening fence
	src  string
}

// goBlocks returns the ```go blocks of a Markdown file.
func goBlocks(t *testing.T, file string) []snippet {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []snippet
	var cur *snippet
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{file: file, line: n}
			b.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.src = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Errorf("%s:%d: ```go block not closed", file, cur.line)
	}
	return out
}

// TestSnippetsCompile type-checks every ```go block of README.md and
// docs/*.md against the packages of this module. A block is either a whole
// file ("package main" and its imports), top-level declarations, or
// statements, which are checked as the body of a function that has the
// variables of fragmentVars. Unused variables and imports are allowed;
// anything else the type checker finds is an error at its Markdown line.
func TestSnippetsCompile(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../README.md"}, files...)
	var all []snippet
	for _, f := range files {
		all = append(all, goBlocks(t, f)...)
	}
	if len(all) == 0 {
		t.Fatal("no ```go block found")
	}

	// The export data of the packages and their dependencies, compiled by
	// the go command, is what the type checker imports.
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, snippetImports...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list -export %v: %v", snippetImports, err)
	}
	export := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			export[path] = file
		}
	}
	allowed := map[string]bool{}
	for _, p := range snippetImports {
		allowed[p] = true
	}

	var imports strings.Builder
	imports.WriteString("import (\n")
	for _, p := range snippetImports {
		fmt.Fprintf(&imports, "\t%q\n", p)
	}
	imports.WriteString(")\n")

	for _, s := range all {
		name := fmt.Sprintf("%s:%d", strings.TrimPrefix(s.file, "../"), s.line)
		t.Run(name, func(t *testing.T) {
			src, offset := wrap(s.src, imports.String())
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, s.file, src, 0)
			if err != nil {
				t.Fatalf("%s: does not parse: %s", at(s, err.Error(), offset), strip(err.Error()))
			}
			gc := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
				if file, ok := export[path]; ok {
					return os.Open(file)
				}
				return nil, fmt.Errorf("no export data for %s", path)
			})
			conf := types.Config{
				Importer: importerFunc(func(path string) (*types.Package, error) {
					if !allowed[path] {
						return nil, fmt.Errorf("snippets may import only %v (add it to snippetImports)", snippetImports)
					}
					return gc.Import(path)
				}),
				Error: func(err error) {
					msg := err.Error()
					if strings.Contains(msg, "declared and not used") || strings.Contains(msg, "imported") && strings.Contains(msg, "not used") {
						return
					}
					t.Errorf("%s: %s", at(s, msg, offset), strip(msg))
				},
			}
			_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
		})
	}
}

// wrap turns a snippet into a Go file. It returns the file and the number
// of lines it added before the snippet's first line.
func wrap(src, imports string) (string, int) {
	if strings.HasPrefix(strings.TrimSpace(src), "package ") {
		return src, 0
	}
	// Declarations: they parse as a file once given a package clause.
	decls := "package snippet\n" + imports + src
	if _, err := parser.ParseFile(token.NewFileSet(), "", decls, 0); err == nil {
		return decls, 1 + strings.Count(imports, "\n")
	}
	head := "package snippet\n" + imports + "func _(" + fragmentVars + ") error {\n{\n"
	return head + src + "}\nreturn nil\n}\n", strings.Count(head, "\n")
}

var lineRE = regexp.MustCompile(`^[^:]*:(\d+):\d+: `)

// strip removes the position in the wrapped file from a message.
func strip(msg string) string { return lineRE.ReplaceAllString(msg, "") }

// at maps a position in the wrapped file to the Markdown file's line.
func at(s snippet, msg string, offset int) string {
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		var n int
		fmt.Sscan(m[1], &n)
		return fmt.Sprintf("%s:%d", s.file, s.line+n-offset)
	}
	return fmt.Sprintf("%s:%d", s.file, s.line)
}

// importerFunc is a types.Importer.
type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
