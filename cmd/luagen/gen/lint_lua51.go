package gen

import (
	"fmt"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// gopher-lua parses a little more than Redis's Lua 5.1 compiles: empty
// statements (";;", or ";" opening a block), string escapes \ddd above
// 255, and, since it checks them only when compiling, a break outside a
// loop and "..." outside a vararg function. lua51Syntax runs after a clean
// parse and reports the first such problem as a syntax finding.
func lua51Syntax(file string, chunk []ast.Stmt, toks []luaToken) (Diagnostic, bool) {
	var found []Diagnostic
	if d, ok := emptyStatement(file, toks); ok {
		found = append(found, d)
	}
	if d, ok := escapeTooLarge(file, toks); ok {
		found = append(found, d)
	}
	found = append(found, compileChecks(file, chunk, toks)...)
	if len(found) == 0 {
		return Diagnostic{}, false
	}
	SortDiagnostics(found)
	return found[0], true
}

// emptyStatement finds a ";" that follows no statement: Lua 5.1 allows one
// after a statement and as a separator of table fields, never on its own.
func emptyStatement(file string, toks []luaToken) (Diagnostic, bool) {
	type open struct {
		bracket string
		params  bool // the parameter list of a function
	}
	var stack []open
	funcPending := false // after "function", until its "("
	var prev *luaToken
	prevParams := false // prev is the ")" closing a parameter list
	for i := range toks {
		t := &toks[i]
		if t.kind == tokKeyword && t.text == "function" {
			funcPending = true
		}
		if t.kind == tokPunct {
			switch t.text {
			case "(":
				stack = append(stack, open{"(", funcPending})
				funcPending = false
			case "{", "[":
				stack = append(stack, open{bracket: t.text})
			case ")", "}", "]":
				closedParams := false
				if len(stack) > 0 {
					closedParams = stack[len(stack)-1].params
					stack = stack[:len(stack)-1]
				}
				prev, prevParams = t, closedParams
				continue
			case ";":
				bad := false
				if len(stack) > 0 && stack[len(stack)-1].bracket == "{" {
					bad = prev != nil && prev.kind == tokPunct && (prev.text == "{" || prev.text == "," || prev.text == ";")
				} else {
					bad = prev == nil || prevParams ||
						(prev.kind == tokPunct && prev.text == ";") ||
						(prev.kind == tokKeyword && (prev.text == "do" || prev.text == "then" || prev.text == "else" || prev.text == "repeat"))
				}
				if bad {
					return Diagnostic{File: file, Line: t.line, Col: t.col, Rule: RuleSyntax,
						Message: "';' with no statement before it: Lua 5.1, which Redis runs, has no empty statement"}, true
				}
			}
		}
		prev, prevParams = t, false
	}
	return Diagnostic{}, false
}

// escapeTooLarge finds a decimal escape \ddd above 255 in a quoted string.
func escapeTooLarge(file string, toks []luaToken) (Diagnostic, bool) {
	for _, t := range toks {
		if t.kind != tokString || (t.text[0] != '"' && t.text[0] != '\'') {
			continue
		}
		s := t.text
		for i := 1; i < len(s); i++ {
			if s[i] != '\\' || i+1 >= len(s) {
				continue
			}
			j, v := i+1, 0
			for j < len(s) && j < i+4 && luaDigit(s[j]) {
				v = v*10 + int(s[j]-'0')
				j++
			}
			if j > i+1 && v > 255 {
				line, col := t.line, t.col+i
				if nl := strings.LastIndexByte(s[:i], '\n'); nl >= 0 {
					line += strings.Count(s[:i], "\n")
					col = i - nl
				}
				return Diagnostic{File: file, Line: line, Col: col, Rule: RuleSyntax,
					Message: fmt.Sprintf("escape sequence \\%s is too large: Lua 5.1 allows \\0 to \\255", s[i+1:j])}, true
			}
			i++ // skip the escaped character
		}
	}
	return Diagnostic{}, false
}
