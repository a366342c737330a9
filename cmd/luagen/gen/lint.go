package gen

import (
	"io/fs"
)

// Lint parses every script of cfg.Src in fsys and checks it. It returns every
// finding, sorted by file, line, column and rule: folder and file problems,
// header errors, syntax errors and the AST rules (see Rules). A finding on a
// line that carries a "luagen:ignore" comment naming its rule (or naming no
// rule) is dropped; folder, file, header and syntax findings cannot be
// silenced: a comment that names one of them, or a name that is no rule, is
// a header finding.
func Lint(fsys fs.FS, cfg Config) []Diagnostic {
	scripts, diags := Parse(fsys, cfg)
	for _, s := range scripts {
		diags = append(diags, lintScript(s, cfg)...)
	}
	SortDiagnostics(diags)
	return diags
}

// lintScript runs the syntax check and the AST rules on one script, drops
// the findings its luagen:ignore comments silence and applies the
// severities of cfg.
func lintScript(s *Script, cfg Config) []Diagnostic {
	var out []Diagnostic
	for _, d := range lintAST(s, cfg) {
		if d.Rule != RuleSyntax && s.silenced(d.Line, d.Rule) {
			continue
		}
		if d, ok := cfg.severity(s.place(d)); ok {
			out = append(out, d)
		}
	}
	return out
}
