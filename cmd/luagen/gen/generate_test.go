package gen

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

const plainScript = "-- @return nil\nreturn nil\n"

// TestUnsafeFileNames: a file name with a control or invisible character
// would break the comments of the generated code; Parse refuses it with a
// name finding that quotes it, and Generate writes nothing.
func TestUnsafeFileNames(t *testing.T) {
	for _, name := range []string{"a\nb.lua", "a\rb.lua", "tab\there.lua", "del\x7f.lua", "bidi\u202e.lua", "zero\u200bwidth.lua", "line\u2028sep.lua"} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{"lua/" + name: {Data: []byte(plainScript)}, "lua/ok.lua": {Data: []byte(plainScript)}}
			scripts, diags := Parse(fsys, Config{})
			if len(scripts) != 1 || scripts[0].File != "lua/ok.lua" {
				t.Errorf("Parse returned %d scripts, want only lua/ok.lua", len(scripts))
			}
			if len(diags) != 1 {
				t.Fatalf("want one finding, got %v", diags)
			}
			d := diags[0]
			if d.File != "lua" || d.Rule != RuleName || d.Severity != Error ||
				!strings.HasPrefix(d.Message, "file name "+strconv.Quote(name)+" holds ") ||
				strings.ContainsAny(d.String(), "\r\n\t\x7f") {
				t.Errorf("finding %q, want a name error on lua quoting %s", d.String(), strconv.Quote(name))
			}
			out, err := Generate(fsys, Config{})
			var de *DiagnosticsError
			if out != nil || !errors.As(err, &de) {
				t.Errorf("Generate = %d files, %v; want a *DiagnosticsError", len(out), err)
			}
		})
	}
	// The source folder's path is written into the generated code as well.
	fsys := fstest.MapFS{"l\nua/ok.lua": {Data: []byte(plainScript)}}
	_, diags := Parse(fsys, Config{Src: "l\nua"})
	if len(diags) != 1 || diags[0].Rule != RuleFolder || strings.Contains(diags[0].String(), "\n") {
		t.Errorf("Parse of folder \"l\\nua\": %q, want one folder error", diags)
	}
}

// TestGeneratePackageName: the package name must be one Go code can import.
func TestGeneratePackageName(t *testing.T) {
	fsys := fstest.MapFS{"lua/ok.lua": {Data: []byte(plainScript)}}
	for name, want := range map[string]string{
		"_":      `package name "_" is the blank identifier, which names no package`,
		"func":   `package name "func" is a Go keyword`,
		"main":   `package name "main" would make a command, not a package to import`,
		"init":   `package name "init" cannot be imported: init is reserved for init functions`,
		"my-pkg": `package name "my-pkg" is not a Go identifier`,
		"1x":     `package name "1x" is not a Go identifier`,
	} {
		if err := CheckPackageName(name); err == nil || err.Error() != want {
			t.Errorf("CheckPackageName(%q) = %v, want %q", name, err, want)
		}
		if out, err := Generate(fsys, Config{Package: name}); out != nil || err == nil || err.Error() != want {
			t.Errorf("Generate with package %q = %d files, %v; want %q", name, len(out), err, want)
		}
	}
	for _, name := range []string{"generated", "scripts", "_x", "x_1", "Scripts", "ünicode"} {
		if err := CheckPackageName(name); err != nil {
			t.Errorf("CheckPackageName(%q) = %v, want nil", name, err)
		}
	}
}
