package gen

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Severity says whether a Diagnostic fails the run.
type Severity int

const (
	// Error findings make lint and generate fail.
	Error Severity = iota
	// Warning findings are printed but do not fail a run.
	Warning
)

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one finding about a script, at a position in its file.
type Diagnostic struct {
	File     string // path relative to the module root, with forward slashes
	Line     int    // 1-based; 0 when the finding is about the whole file or folder
	Col      int    // 1-based byte column; 0 when unknown
	Rule     string // kebab-case rule name, as used by luagen:ignore
	Message  string
	Severity Severity
}

// String formats the diagnostic as "file:line:col: rule: message"; a
// warning's message starts with "warning: ".
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Line)
		if d.Col > 0 {
			fmt.Fprintf(&b, ":%d", d.Col)
		}
	}
	b.WriteString(": ")
	b.WriteString(d.Rule)
	b.WriteString(": ")
	if d.Severity == Warning {
		b.WriteString("warning: ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// SortDiagnostics orders diagnostics by file, line, column, rule and message.
func SortDiagnostics(ds []Diagnostic) {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// HasErrors reports whether any diagnostic has Error severity.
func HasErrors(ds []Diagnostic) bool {
	return slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Severity == Error })
}

// DiagnosticsError is returned by Generate when the scripts have findings of
// Error severity. It carries every finding, warnings included.
type DiagnosticsError struct {
	Diagnostics []Diagnostic
}

func (e *DiagnosticsError) Error() string {
	n := 0
	for _, d := range e.Diagnostics {
		if d.Severity == Error {
			n++
		}
	}
	first := ""
	for _, d := range e.Diagnostics {
		if d.Severity == Error {
			first = d.String()
			break
		}
	}
	if n == 1 {
		return "1 error: " + first
	}
	return fmt.Sprintf("%d errors, the first: %s", n, first)
}
