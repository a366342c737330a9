package gen

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// Rule names of the syntax check and of the AST rules. Each names the rule in
// diagnostics and in luagen:ignore comments.
const (
	// RuleSyntax is the rule of parse errors. When a script does not parse,
	// it is the only finding of the AST rules.
	RuleSyntax = "syntax"
	// RuleGlobalAssign: an assignment to a global variable, a global function
	// (function f() end where f is not a local) or a write to a field of a
	// global table (function a.b() end, a.b = v). Redis forbids globals.
	RuleGlobalAssign = "global-assign"
	// RuleUndefinedGlobal: a read of a name that is neither a local in scope
	// nor one of Globals.
	RuleUndefinedGlobal = "undefined-global"
	// RuleForbiddenCall: a reference to loadstring, load, setfenv, getfenv,
	// dofile, loadfile, require or module, which Redis does not provide or
	// which escape its sandbox.
	RuleForbiddenCall = "forbidden-call"
	// RuleGoto: a goto statement or a label, which Redis's Lua 5.1 rejects.
	RuleGoto = "goto"
	// RuleKeysRange: KEYS[n] with a literal n below 1 or beyond the keys the
	// header declares (unless the last @key is variadic).
	RuleKeysRange = "keys-range"
	// RuleArgvRange: ARGV[n] with a literal n below 1 or beyond the args the
	// header declares (unless the last @arg is variadic).
	RuleArgvRange = "argv-range"
	// RuleUnusedKey: a declared @key that the script never reads.
	RuleUnusedKey = "unused-key"
	// RuleUnusedArg: a declared @arg that the script never reads.
	RuleUnusedArg = "unused-arg"
	// RuleNonKeyArgument: a key argument of redis.call or redis.pcall that
	// does not come from KEYS (see Commands).
	RuleNonKeyArgument = "non-key-argument"
	// RuleRedisVersion: a command, subcommand or option newer than the
	// target Redis version (Config.Redis), or a script feature the target
	// lacks (a #!lua shebang, Functions before 7.0).
	RuleRedisVersion = "redis-version"
	// RuleShadowedLocal (warning): a local that shadows a local of an
	// enclosing scope or redeclares one of the same scope.
	RuleShadowedLocal = "shadowed-local"
	// RuleUnusedLocal (warning): a local variable, local function or loop
	// variable that is never read. Names starting with "_" and function
	// parameters are not reported.
	RuleUnusedLocal = "unused-local"
)

// RuleInfo describes one rule of the syntax check or the AST rules.
type RuleInfo struct {
	Name     string
	Severity Severity
	Doc      string
}

// Rules lists the syntax check and the AST rules that Lint runs on every
// script, with their severity and a one-line description.
var Rules = []RuleInfo{
	{RuleSyntax, Error, "the script does not parse as Lua"},
	{RuleGlobalAssign, Error, "assignment to a global, a global function or a field of a global table"},
	{RuleUndefinedGlobal, Error, "read of a name that is neither a local nor a global Redis provides"},
	{RuleForbiddenCall, Error, "loadstring, load, setfenv, getfenv, dofile, loadfile, require or module"},
	{RuleGoto, Error, "goto or a label, which Lua 5.1 rejects"},
	{RuleKeysRange, Error, "KEYS[n] with a literal n outside the keys the header declares"},
	{RuleArgvRange, Error, "ARGV[n] with a literal n outside the args the header declares"},
	{RuleUnusedKey, Error, "a declared @key the script never reads"},
	{RuleUnusedArg, Error, "a declared @arg the script never reads"},
	{RuleNonKeyArgument, Error, "a key passed to redis.call or redis.pcall that does not come from KEYS"},
	{RuleReadOnlyWrite, Error, "a write command in a script or function declared read-only (@flag read-only, no-writes)"},
	{RuleRedisVersion, Error, "a command, subcommand, option or script feature newer than the target Redis version (luagen.json \"redis\")"},
	{RuleShadowedLocal, Warning, "a local that shadows or redeclares another local"},
	{RuleUnusedLocal, Warning, "a local variable, local function or loop variable never read"},
}

// Globals is the sorted list of the global names a script may read: the
// globals of Redis 7.0's Lua 5.1 environment (its _G as a script sees it),
// less load and loadstring, which are forbidden-call findings, and Redis's
// internal __redis__err__handler. Any other global read is an
// undefined-global finding. Redis 7.0 has no print, os, io, debug, package,
// require, module, dofile, loadfile, setfenv, getfenv or newproxy.
var Globals = []string{
	"ARGV", "KEYS", "_G", "_VERSION", "assert", "bit", "cjson", "cmsgpack",
	"collectgarbage", "coroutine", "error", "gcinfo", "getmetatable",
	"ipairs", "math", "next", "pairs", "pcall", "rawequal", "rawget",
	"rawset", "redis", "select", "setmetatable", "string", "struct", "table",
	"tonumber", "tostring", "type", "unpack", "xpcall",
}

// forbidden maps the globals a script may not reference to the reason.
var forbidden = map[string]string{
	"loadstring": "loadstring escapes the sandbox: Redis scripts may not compile code at run time; write the code in the script",
	"load":       "load escapes the sandbox: Redis scripts may not compile code at run time; write the code in the script",
	"setfenv":    "Redis 7 does not provide setfenv, which would escape the sandbox: keep values in locals",
	"getfenv":    "Redis 7 does not provide getfenv, which would escape the sandbox: keep values in locals",
	"dofile":     "Redis does not provide dofile: a script cannot read files; put the code in the script",
	"loadfile":   "Redis does not provide loadfile: a script cannot read files; put the code in the script",
	"require":    "Redis does not provide require: a script cannot load modules; put the code in the script",
	"module":     "Redis does not provide module: a script cannot define modules; use local tables and functions",
}

// lintAST parses the script with gopher-lua and runs the AST rules on it. A
// script that does not parse gets a single syntax finding.
func lintAST(s *Script, cfg Config) []Diagnostic {
	src := luaLines(s.Source)
	if s.Shebang != "" {
		// Blank the #! line but keep its line break, so lines stay numbered,
		// as Redis does: it cuts the shebang at the first "\n".
		if i := bytes.IndexByte(s.Source, '\n'); i >= 0 {
			src = luaLines(s.Source[i:])
		} else {
			src = nil
		}
	}
	toks := lexLua(src)
	chunk, err := parse.Parse(bytes.NewReader(hexFloats(src, toks)), s.File)
	bad, malformed := malformedNumber(s.File, toks)
	if err != nil {
		d := syntaxDiagnostic(s.File, src, err)
		if malformed && (bad.Line < d.Line || bad.Line == d.Line && bad.Col < d.Col) {
			d = bad // Lua reports the first error of the file
		}
		return []Diagnostic{d}
	}
	if malformed {
		return []Diagnostic{bad}
	}
	if d, ok := lua51Syntax(s.File, chunk, toks); ok {
		return []Diagnostic{d}
	}
	// Walk until what is known of every local's values stops changing: the
	// flags only ever drop (multi only rises) and the literal sets only
	// grow, within the script's own literals and up to maxLits, so this
	// ends.
	var prior map[[2]int]valInfo
	for {
		l := newLinter(s, src, toks)
		l.prefixes, l.keyPrefixes = prefixPositions(s, cfg)
		l.target = cfg.target()
		l.prior = prior
		l.run(chunk)
		seen := make(map[[2]int]valInfo, len(l.vars))
		for _, v := range l.vars {
			seen[[2]int{v.line, v.col}] = valInfo{prefix: v.prefix, data: v.data, keys: v.keys, keysTable: v.keysTable, keysList: v.keysList, litsOnly: v.litsOnly, lits: v.lits, multi: v.multi}
		}
		if maps.Equal(seen, prior) {
			l.diags = append(l.diags, scriptVersion(s, cfg)...)
			l.diags = append(l.diags, annotationRefs(s)...)
			SortDiagnostics(l.diags)
			return l.diags
		}
		prior = seen
	}
}

// scriptVersion reports the features of a script that its target Redis
// (Config.Redis) lacks: before 7.0, a #!lua first line (Redis 6 reads it as
// Lua, and fails) and Redis Functions.
func scriptVersion(s *Script, cfg Config) []Diagnostic {
	t := cfg.target()
	v7 := RedisVersion{7, 0, 0}
	if t == nil || !t.Less(v7) {
		return nil
	}
	var what string
	switch {
	case s.Library != "" || cfg.Library != "":
		what = "a Redis Functions library (FUNCTION LOAD, FCALL)"
	case s.Shebang != "":
		what = "a #!lua first line"
	default:
		return nil
	}
	return []Diagnostic{{File: s.File, Line: 1, Col: 1, Rule: RuleRedisVersion, Severity: Error,
		Message: fmt.Sprintf("%s needs Redis 7.0, newer than the target Redis %s (luagen.json \"redis\")", what, t)}}
}

// syntaxDiagnostic turns a gopher-lua parse error into a finding.
func syntaxDiagnostic(file string, src []byte, err error) Diagnostic {
	d := Diagnostic{File: file, Line: 1, Col: 1, Rule: RuleSyntax}
	var pe *parse.Error
	if !errors.As(err, &pe) {
		d.Message = "the script does not parse: " + strings.TrimSpace(err.Error())
		return d
	}
	lines := strings.Split(string(src), "\n")
	if len(lines) > 1 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the empty text after the final newline
	}
	msg := pe.Message
	tok := pe.Token
	if i := strings.IndexAny(tok, "\r\n"); i >= 0 {
		tok = tok[:i]
	}
	if len(tok) > 30 {
		tok = tok[:30] + "..."
	}
	switch {
	case pe.Pos.Line == parse.EOF || pe.Pos.Line > len(lines)+1 ||
		(pe.Pos.Line == len(lines)+1 && pe.Pos.Column > 0):
		d.Line = len(lines)
		d.Col = len(strings.TrimRight(lines[len(lines)-1], "\r")) + 1
		d.Message = msg + " at the end of the file"
		if msg == "syntax error" {
			d.Message += ": is an end, a closing bracket or an expression missing?"
		}
		return d
	case pe.Pos.Column == 0 && pe.Pos.Line > 1:
		// The scanner stopped on a line break: the error is at the end of
		// the line before (an unterminated string, for instance).
		d.Line = pe.Pos.Line - 1
		text := lines[d.Line-1]
		d.Col = len(text) + 1
		if i := strings.LastIndex(text, tok); tok != "" && i >= 0 {
			d.Col = i + 1
			if i > 0 && (text[i-1] == '"' || text[i-1] == '\'') {
				d.Col = i // point at the opening quote
			}
		}
	default:
		d.Line = max(pe.Pos.Line, 1)
		text := lines[d.Line-1]
		col := max(pe.Pos.Column, 1)
		// The parser reports the column of the last byte of the token it
		// could not take; point at its first byte.
		if tok != "" && !strings.HasPrefix(text[min(col-1, len(text)):], tok) &&
			col-len(tok) >= 0 && col <= len(text) && text[col-len(tok):col] == tok {
			col = col - len(tok) + 1
		}
		d.Col = col
	}
	if tok != "" {
		d.Message = fmt.Sprintf("%s near '%s'", msg, tok)
	} else {
		d.Message = msg
	}
	return d
}

// malformedNumber finds the first numeral that Lua 5.1 rejects (see
// luaNumeral) and returns the syntax finding Redis's compiler gives for it.
// gopher-lua's parser takes "1e" and "1e+" as numbers, which Redis refuses
// to load.
func malformedNumber(file string, toks []luaToken) (Diagnostic, bool) {
	for _, t := range toks {
		if t.kind == tokNumber && !luaNumeral(t.text) {
			return Diagnostic{File: file, Line: t.line, Col: t.col, Rule: RuleSyntax,
				Message: fmt.Sprintf("malformed number near '%s'", t.text)}, true
		}
	}
	return Diagnostic{}, false
}

// isGlobalName reports whether name is one of Globals.
func isGlobalName(name string) bool {
	for _, g := range Globals {
		if g == name {
			return true
		}
	}
	return false
}

// exprLine returns the line of an expression, 0 for nil.
func exprLine(e ast.Expr) int {
	if e == nil {
		return 0
	}
	return e.Line()
}

// hexFloats returns src with every hexadecimal numeral that has a fraction
// or a binary exponent (0x1p4, 0x.8), which Lua 5.1 reads through strtod
// but gopher-lua's parser refuses, written as a decimal of the same length
// (or as 0 padded with spaces when the decimal is longer), so that the parse
// keeps every position. src is not changed.
func hexFloats(src []byte, toks []luaToken) []byte {
	var out []byte
	lineStart := 0 // offset of the current line in src
	line := 1
	for _, t := range toks {
		if t.kind != tokNumber || len(t.text) < 3 || t.text[0] != '0' || t.text[1]|0x20 != 'x' {
			continue
		}
		if !strings.ContainsAny(t.text[2:], ".pP") || !luaNumeral(t.text) {
			continue
		}
		if out == nil {
			out = append([]byte(nil), src...)
		}
		for line < t.line {
			lineStart += bytes.IndexByte(src[lineStart:], '\n') + 1
			line++
		}
		at := lineStart + t.col - 1
		v, _ := parseLuaNumber(t.text)
		dec := strconv.FormatFloat(v, 'g', -1, 64)
		if len(dec) > len(t.text) || strings.ContainsAny(dec, "+") {
			dec = "0"
		}
		copy(out[at:], dec+strings.Repeat(" ", len(t.text)-len(dec)))
	}
	if out == nil {
		return src
	}
	return out
}
