package gen

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/txtar"

	// The generated code that compileGenerated and buildGenerated build
	// inside this module imports luart and miniredis: these imports keep
	// them in the module's go.mod (go mod tidy does not look into
	// testdata).
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/lualock/lualock/luart"
)

var update = flag.Bool("update", false, "rewrite the want/ sections of gen/testdata/*.txtar with the current output")

// goldenConfig is the Config of every golden case, with the settings of
// its luagen.json when it has one.
var goldenConfig = Config{Src: "lua", Package: "generated"}

// TestGolden runs Lint and Generate on every testdata/*.txtar archive (see
// docs/STYLE.md rule 21). An archive is given to gen as it is, through txtar.FS,
// so its lua/ entries are the scripts; its comment says what the case covers.
// The want/ sections are the expectations, compared byte for byte:
//
//	-- want/diagnostics --   every finding of Lint, one d.String() a line, in
//	                         Lint's order; empty when the scripts are clean
//	-- want/<base>_lua.go -- the generated file of lua/<base>.lua
//	-- want/luagen.go --     the shared generated file
//
// want/diagnostics is required. A case compares only its subject: the
// generated files it lists, which Generate must write (so it must succeed);
// the files it does not list are not compared (the shared file is the
// subject of gen_multiple_scripts and functions_build, each script's file
// of the case about it). When a case lists no file, Generate must succeed
// exactly when no finding is an error. A failing Generate must return a
// *DiagnosticsError carrying Lint's findings.
//
// Lint and Generate run twice on every case and must give the same result.
// The files of a successful Generate must be gofmt'd, and each script's file
// must hold the script byte for byte in its Source constant, with the SHA1
// of those bytes. Unless -short, the generated packages of all the cases are
// then type-checked and vetted at once with the go command.
//
// go test ./gen -update rewrites the want/ sections with txtar.Format. To
// start a generation case, add an empty section for each file it is about
// (-- want/<base>_lua.go --) and run -update.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.txtar")
	}
	var (
		mu        sync.Mutex
		generated = map[string]map[string][]byte{} // case -> Generate's output
	)
	t.Run("case", func(t *testing.T) {
		for _, file := range files {
			name := strings.TrimSuffix(filepath.Base(file), ".txtar")
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if out := goldenCase(t, file); out != nil {
					mu.Lock()
					generated[name] = out
					mu.Unlock()
				}
			})
		}
	})
	if testing.Short() {
		t.Log("-short: the generated code is not compiled")
		return
	}
	t.Run("compile", func(t *testing.T) {
		compileGenerated(t, generated)
	})
}

// goldenCase checks one archive and returns Generate's output, nil when
// Generate failed.
func goldenCase(t *testing.T, file string) map[string][]byte {
	a, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(a.Comment)) == "" {
		t.Errorf("the archive has no comment: say what the case covers")
	}
	want := map[string][]byte{} // want/ sections, without the prefix
	wantGo := false
	for _, f := range a.Files {
		rest, ok := strings.CutPrefix(f.Name, "want/")
		if !ok {
			continue
		}
		if _, dup := want[rest]; dup {
			t.Fatalf("section want/%s appears twice", rest)
		}
		switch {
		case rest == "diagnostics":
		case strings.HasSuffix(rest, ".go") && !strings.Contains(rest, "/"):
			wantGo = true
		default:
			t.Fatalf("unknown section want/%s: want/diagnostics or want/<file>.go", rest)
		}
		want[rest] = f.Data
	}

	fsys, err := txtar.FS(a)
	if err != nil {
		t.Fatal(err)
	}
	goldenConfig := goldenConfig
	if b, err := fs.ReadFile(fsys, ConfigFileName); err == nil {
		// A case with a luagen.json at its root runs with its settings.
		fc, err := LoadFileConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		goldenConfig = goldenConfig.FromFile(fc)
	}
	diags := Lint(fsys, goldenConfig)
	if !slices.IsSortedFunc(diags, compareDiagnostics) {
		t.Errorf("Lint's findings are not sorted:\n%s", formatDiagnostics(diags))
	}
	got := map[string][]byte{"diagnostics": formatDiagnostics(diags)}
	if again := formatDiagnostics(Lint(fsys, goldenConfig)); !bytes.Equal(again, got["diagnostics"]) {
		t.Errorf("Lint is not deterministic:\n%s", lineDiff(got["diagnostics"], again))
	}

	out, err := Generate(fsys, goldenConfig)
	if err != nil {
		var de *DiagnosticsError
		if !errors.As(err, &de) {
			t.Fatalf("Generate: %v (%T), want a *DiagnosticsError", err, err)
		}
		if !HasErrors(diags) {
			t.Errorf("Generate failed but Lint found no error: %v", err)
		}
		if g, w := formatDiagnostics(de.Diagnostics), got["diagnostics"]; !bytes.Equal(g, w) {
			t.Errorf("Generate's DiagnosticsError differs from Lint:\n%s", lineDiff(w, g))
		}
		if wantGo && !*update {
			t.Errorf("Generate failed, but the case expects generated files: %v", err)
		}
		out = nil
	} else {
		if HasErrors(diags) {
			t.Errorf("Generate succeeded although Lint found errors:\n%s", got["diagnostics"])
		}
		checkGenerated(t, fsys, goldenConfig, out)
		for name := range want {
			if b, ok := out[name]; ok && name != "diagnostics" {
				got[name] = b // the case's subject: only the files it lists
			}
		}
	}

	if *update {
		writeGolden(t, file, a, got)
		return out
	}
	if _, ok := want["diagnostics"]; !ok {
		t.Errorf("no -- want/diagnostics -- section (run go test ./gen -update)")
	}
	for _, name := range sortedKeys(got) {
		w, ok := want[name]
		if !ok {
			continue
		}
		if !bytes.Equal(got[name], w) {
			t.Errorf("want/%s differs (run go test ./gen -update to accept):\n%s", name, lineDiff(w, got[name]))
		}
	}
	for _, name := range sortedKeys(want) {
		if _, ok := got[name]; !ok {
			t.Errorf("the case expects want/%s, which Generate did not write", name)
		}
	}
	return out
}

// checkGenerated checks that Generate gives the same bytes a second time,
// that it names the files as OutputName does and that they are gofmt'd.
func checkGenerated(t *testing.T, fsys fs.FS, cfg Config, out map[string][]byte) {
	t.Helper()
	again, err := Generate(fsys, cfg)
	if err != nil {
		t.Fatalf("the second Generate failed: %v", err)
	}
	for _, name := range sortedKeys(out) {
		b := out[name]
		if !bytes.Equal(again[name], b) {
			t.Errorf("Generate is not deterministic: %s differs between two runs:\n%s", name, lineDiff(b, again[name]))
		}
		if name != SharedFile && !strings.HasSuffix(name, "_lua.go") {
			t.Errorf("Generate wrote %s, neither %s nor a <base>_lua.go file", name, SharedFile)
		}
		if !IsGenerated(b) {
			t.Errorf("%s does not start with %q", name, GeneratedHeader)
		}
		formatted, err := format.Source(b)
		if err != nil {
			t.Errorf("%s does not parse: %v", name, err)
		} else if !bytes.Equal(formatted, b) {
			t.Errorf("%s is not gofmt'd:\n%s", name, lineDiff(b, formatted))
		}
	}
	for name := range again {
		if _, ok := out[name]; !ok {
			t.Errorf("Generate is not deterministic: the second run also wrote %s", name)
		}
	}
	if _, ok := out[SharedFile]; !ok {
		t.Errorf("Generate wrote no %s", SharedFile)
	}
	checkSources(t, fsys, out)
}

// checkSources checks every script's file against its script: one
// <base>_lua.go per lua/<base>.lua, the first line docs/STYLE.md rule 18 asks for,
// a <Name>Source constant that evaluates to the file byte for byte (its
// includes expanded), and a <Name>SHA1 constant that is that text's SHA1.
func checkSources(t *testing.T, fsys fs.FS, out map[string][]byte) {
	t.Helper()
	entries, err := fs.ReadDir(fsys, goldenConfig.Src)
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".lua") {
			scripts = append(scripts, path.Join(goldenConfig.Src, e.Name()))
		}
	}
	if len(out) != len(scripts)+1 {
		t.Errorf("Generate wrote %d files for %d scripts, want one per script and %s", len(out), len(scripts), SharedFile)
	}
	for _, file := range scripts {
		name := OutputName(file)
		b, ok := out[name]
		if !ok {
			t.Errorf("Generate wrote no %s for %s", name, file)
			continue
		}
		src, err := fs.ReadFile(fsys, file)
		if err != nil {
			t.Fatal(err)
		}
		src, _, _ = expandIncludes(fsys, file, src) // what Redis runs
		if _, lib := libraryName(strings.SplitN(string(src), "\n", 2)[0]); lib && strings.HasPrefix(string(src), "#!") {
			continue // a Functions library: no EVALSHA constants
		}
		first, _, _ := strings.Cut(string(b), "\n")
		if want := "// Code generated by luagen from " + file + ". DO NOT EDIT."; first != want {
			t.Errorf("%s starts with %q, want %q", name, first, want)
		}
		consts, err := stringConsts(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var source, sha []string
		for c := range consts {
			if strings.HasSuffix(c, "Source") {
				source = append(source, c)
			}
			if strings.HasSuffix(c, "SHA1") {
				sha = append(sha, c)
			}
		}
		if len(source) != 1 || len(sha) != 1 {
			t.Errorf("%s declares the string constants %v, want one <Name>Source and one <Name>SHA1", name, sortedKeys(consts))
			continue
		}
		if got := consts[source[0]]; got != string(src) {
			t.Errorf("%s: %s is not %s byte for byte:\n%s", name, source[0], file, lineDiff(src, []byte(got)))
		}
		sum := sha1.Sum(src)
		if got, want := consts[sha[0]], hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: %s = %q, want %q", name, sha[0], got, want)
		}
	}
}

// stringConsts parses a Go file and evaluates its package-level string
// constants: literals, joined with +.
func stringConsts(src []byte) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
	if err != nil {
		return nil, err
	}
	var eval func(e ast.Expr) (string, error)
	eval = func(e ast.Expr) (string, error) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				return strconv.Unquote(e.Value)
			}
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				x, err := eval(e.X)
				if err != nil {
					return "", err
				}
				y, err := eval(e.Y)
				return x + y, err
			}
		}
		return "", fmt.Errorf("not a string constant: %T", e)
	}
	consts := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					return nil, fmt.Errorf("const %s has no value", n.Name)
				}
				v, err := eval(vs.Values[i])
				if err != nil {
					return nil, fmt.Errorf("const %s: %v", n.Name, err)
				}
				consts[n.Name] = v
			}
		}
	}
	return consts, nil
}

// writeGolden rewrites an archive: its comment and inputs as they are, then
// want/diagnostics, then the generated files the case lists, in name order.
func writeGolden(t *testing.T, file string, a *txtar.Archive, got map[string][]byte) {
	t.Helper()
	na := &txtar.Archive{Comment: a.Comment}
	for _, f := range a.Files {
		if !strings.HasPrefix(f.Name, "want/") {
			na.Files = append(na.Files, f)
		}
	}
	na.Files = append(na.Files, txtar.File{Name: "want/diagnostics", Data: got["diagnostics"]})
	for _, name := range sortedKeys(got) {
		if name != "diagnostics" {
			na.Files = append(na.Files, txtar.File{Name: "want/" + name, Data: got[name]})
		}
	}
	if err := os.WriteFile(file, txtar.Format(na), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compileGenerated writes the output of every successful case into a package
// of its own under testdata/_compile*/ (inside this module, so that go-redis
// resolves through its go.mod; the leading underscore keeps ./... patterns
// away from it) and runs go vet, which type-checks them, over all at once.
func compileGenerated(t *testing.T, generated map[string]map[string][]byte) {
	if len(generated) == 0 {
		t.Skip("no case generated code")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to compile the generated code: %v", err)
	}
	dir, err := os.MkdirTemp("testdata", "_compile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	var pkgs []string
	for _, name := range sortedKeys(generated) {
		pkg := filepath.Join(dir, name)
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, b := range generated[name] {
			if err := os.WriteFile(filepath.Join(pkg, file), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(pkg))
	}
	cmd := exec.Command(goTool, append([]string{"vet"}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the generated code: %v\n%s", err, out)
	}
}

// formatDiagnostics prints findings one a line, as luagen does.
func formatDiagnostics(ds []Diagnostic) []byte {
	var b bytes.Buffer
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// compareDiagnostics is the order of docs/STYLE.md rule 20: file, line, column,
// rule, then message.
func compareDiagnostics(a, b Diagnostic) int {
	if c := strings.Compare(a.File, b.File); c != 0 {
		return c
	}
	if a.Line != b.Line {
		return a.Line - b.Line
	}
	if a.Col != b.Col {
		return a.Col - b.Col
	}
	if c := strings.Compare(a.Rule, b.Rule); c != 0 {
		return c
	}
	return strings.Compare(a.Message, b.Message)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lineDiff shows how got differs from want, line by line: the lines both
// share at the start and the end are cut down to a little context, and the
// rest is printed as "-" (want) and "+" (got) lines. Invisible bytes are
// quoted so that a CR or a missing final newline shows.
func lineDiff(want, got []byte) string {
	const context = 3
	split := func(b []byte) []string {
		lines := strings.SplitAfter(string(b), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1] // what follows the final newline
		}
		return lines
	}
	w, g := split(want), split(got)
	pre := 0
	for pre < len(w) && pre < len(g) && w[pre] == g[pre] {
		pre++
	}
	suf := 0
	for suf < len(w)-pre && suf < len(g)-pre && w[len(w)-1-suf] == g[len(g)-1-suf] {
		suf++
	}
	show := func(prefix, line string) string {
		text := strings.TrimSuffix(line, "\n")
		if strings.ContainsAny(text, "\r\x00") || !strings.HasSuffix(line, "\n") {
			return fmt.Sprintf("%s%q\n", prefix, line)
		}
		return prefix + text + "\n"
	}
	var b strings.Builder
	start := max(pre-context, 0)
	fmt.Fprintf(&b, "@@ want line %d, got line %d @@\n", start+1, start+1)
	for _, l := range w[start:pre] {
		b.WriteString(show(" ", l))
	}
	for _, l := range w[pre : len(w)-suf] {
		b.WriteString(show("-", l))
	}
	for _, l := range g[pre : len(g)-suf] {
		b.WriteString(show("+", l))
	}
	for _, l := range w[len(w)-suf : min(len(w)-suf+context, len(w))] {
		b.WriteString(show(" ", l))
	}
	return b.String()
}
