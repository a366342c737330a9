package gen

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

type varKind uint8

const (
	varLocal varKind = iota
	varParam
	varLoop
	varFunc
)

// what names a kind of variable in messages.
func (k varKind) what() string {
	switch k {
	case varParam:
		return "parameter"
	case varLoop:
		return "loop variable"
	case varFunc:
		return "local function"
	}
	return "local"
}

// lvar is one declared local variable.
type lvar struct {
	name      string
	kind      varKind
	line, col int
	reads     int
	// assigned is set by the first assignment; keys and keysTable stay true
	// while every value assigned so far is an entry of KEYS (keys) or the
	// KEYS table itself (keysTable). keysList stays true while every value
	// is a table whose entries are all keys ({KEYS[1], KEYS[2]}, {} or KEYS
	// itself), every write into it (t[i] = v, table.insert(t, v)) is a key
	// or nil, and it is only read: indexed, counted, given to a function
	// of listReaders or to a local function whose parameter stays a list of
	// keys. Any other use (passed, stored, aliased, returned) ends it.
	assigned  bool
	keys      bool
	keysTable bool
	keysList  bool
	// litsOnly stays true while every value assigned so far is a string
	// literal (or a local known to hold one); lits is the set of those
	// strings, sorted and joined by litSep (empty: no value known yet). It
	// tells which commands a command name held in a local can be. multi is
	// set once the local is given a value a second time (by assignment, or
	// by another call for a parameter): the walk does not follow the order
	// of assignments, so the command at a given call is known only when
	// the set has one element or the local took one value.
	litsOnly bool
	lits     string
	merges   int // values given in this pass
	multi    bool
	// params are the parameters of the function this local was declared
	// with (local function f, or local f = function): each direct call
	// f(...) assigns its arguments to them. When f is read in any other
	// way (passed, stored, returned) or assigned again, its calls are no
	// longer all known and nothing is known of the parameters.
	params []*lvar
	// alias is "call" or "pcall" for a local that holds redis.call or
	// redis.pcall (local rcall = redis.call): calls through it are checked
	// as direct calls. It is cleared when the local takes another value.
	alias string
	// retKeys: a local function whose every return statement returns an
	// entry of KEYS (local function key() return KEYS[1] end), so that its
	// calls give a key.
	retKeys bool
	// kvList stays true while the writes into the table alternate a key
	// and any value ({KEYS[1], ARGV[1]}, or table.insert(t, KEYS[i]) then
	// table.insert(t, ARGV[i])): unpack of it fits MSET-like commands,
	// whose keys are every other argument. kvOdd: the next write is a
	// value.
	kvList bool
	kvOdd  bool
	// prefix: every value is a declared key prefix (Config.KeyPrefixArgs).
	prefix bool
	// data: every value was read from Redis (a redis.call reply, an
	// element of one, or text joined to one): with @datakeys, a key.
	data bool
}

// fnInfo is what the walk learns of a function body.
type fnInfo struct {
	returns int  // return statements with a value
	retKeys bool // every one returns an entry of KEYS
}

type lscope struct {
	parent *lscope
	vars   map[string]*lvar
}

// paramUse records how a script reads KEYS or ARGV.
type paramUse struct {
	all     bool         // a non-literal index or the table used as a value
	literal map[int]bool // positions read as KEYS[n] with a literal n
}

// valInfo is what the alias tracking knows of an assigned value.
type valInfo struct {
	keys, keysTable, keysList bool
	none                      bool // a literal nil: no value yet, as "local k"
	// litsOnly: the value is one of the string literals in lits (joined by
	// litSep). The zero value knows nothing, as for keys. multi: see lvar.
	litsOnly bool
	lits     string
	multi    bool
	// alias: the value is redis.call or redis.pcall. kvList, kvOdd: a
	// table of alternating keys and values (see lvar).
	alias  string
	kvList bool
	kvOdd  bool
	// prefix: every value is a declared key prefix (Config.KeyPrefixArgs).
	prefix bool
	// data: the value was read from Redis (see lvar).
	data bool
}

// maxLits bounds a literal set: past it the local is taken as unknown, which
// keeps the fixed point cheap on a script with long chains of assignments.
const maxLits = 8

// litSep joins the strings of a literal set: Redis command names never
// contain it.
const litSep = "\x00"

// unionLits merges two literal sets.
func unionLits(a, b string) string {
	if a == "" || a == b {
		return b
	}
	if b == "" {
		return a
	}
	set := strings.Split(a+litSep+b, litSep)
	slices.Sort(set)
	return strings.Join(slices.Compact(set), litSep)
}

type linter struct {
	s        *Script
	lines    []string
	toks     []luaToken
	cur      int                    // index of the last identifier token matched to the AST
	cursors  map[string]int         // last token found by find, per purpose
	identTok map[*ast.IdentExpr]int // the token of each identifier met
	scope    *lscope
	vars     []*lvar
	keys     paramUse
	argv     paramUse
	diags    []Diagnostic
	// fns are the functions being walked, innermost last; nil for the
	// main chunk.
	fns []*fnInfo
	// noWrites names what makes the script read-only ("@flag read-only",
	// "flags=no-writes"), "" when it may write.
	noWrites string
	// prefixes and keyPrefixes are the ARGV and KEYS positions that carry
	// a key prefix.
	prefixes, keyPrefixes map[int]bool
	// target is the Redis version the scripts must run on (luagen.json
	// "redis"); nil when none is set.
	target *RedisVersion
	// callbacks are the functions a Functions library registers.
	callbacks map[*ast.FunctionExpr]callback
	// prior holds, per local (by its declaration's line and column), what
	// the previous pass found of every value assigned to it anywhere: the
	// alias tracking then sees assignments that come later in the source
	// (in a loop, or in a function called afterwards).
	prior map[[2]int]valInfo
}

func newLinter(s *Script, src []byte, toks []luaToken) *linter {
	noWrites := ""
	switch {
	case s.ReadOnly:
		noWrites = "@flag read-only"
	case shebangFlag(s.Shebang, "no-writes"):
		noWrites = "flags=no-writes"
	}
	return &linter{
		noWrites: noWrites,
		s:        s,
		lines:    strings.Split(string(src), "\n"),
		toks:     toks,
		cur:      -1,
		cursors:  map[string]int{},
		identTok: make(map[*ast.IdentExpr]int, len(toks)/4),
		keys:     paramUse{literal: map[int]bool{}},
		argv:     paramUse{literal: map[int]bool{}},
	}
}

func (l *linter) run(chunk []ast.Stmt) {
	if l.s.Library != "" {
		l.callbacks = registeredCallbacks(chunk)
		l.s.Functions = l.s.Functions[:0]
		for _, cb := range l.callbacks {
			if cb.name != "" && validName(strings.ReplaceAll(cb.name, "-", "_")) {
				fn := Function{Name: cb.name, GoName: GoName(strings.ReplaceAll(cb.name, "-", "_")), NoWrites: cb.noWrites}
				l.diags = append(l.diags, functionDocs(l.s, &fn, cb.line)...)
				l.s.Functions = append(l.s.Functions, fn)
			}
		}
		slices.SortFunc(l.s.Functions, func(a, b Function) int { return strings.Compare(a.Name, b.Name) })
	}
	l.scope = &lscope{vars: map[string]*lvar{}}
	l.stmts(chunk)
	l.finish()
}

// report adds a finding at a token, or at column 1 of line when tok < 0.
func (l *linter) report(tok, line int, rule string, sev Severity, format string, a ...any) {
	col := 1
	if tok >= 0 && tok < len(l.toks) {
		line, col = l.toks[tok].line, l.toks[tok].col
	}
	l.diags = append(l.diags, Diagnostic{
		File: l.s.File, Line: line, Col: col, Rule: rule, Severity: sev,
		Message: fmt.Sprintf(format, a...),
	})
}

// match finds the identifier token of a name the walk meets on line (or up
// to maxLine for declarations): the first one spelled name after the last
// token matched. The walk visits names in source order, so this pairs every
// name of the AST with its token. It returns -1 when there is none.
func (l *linter) match(name string, line, maxLine int) int {
	for j := l.cur + 1; j < len(l.toks); j++ {
		t := l.toks[j]
		if t.line < line {
			continue
		}
		if t.line > maxLine {
			break
		}
		if t.kind == tokIdent && !t.field && t.text == name {
			l.cur = j
			return j
		}
	}
	// Out of step: take the first such token of the line.
	for j, t := range l.toks {
		if t.line == line && t.kind == tokIdent && !t.field && t.text == name {
			return j
		}
	}
	return -1
}

// find returns the next token on line, after the last one find returned for
// the same purpose, for which ok holds; -1 when there is none.
func (l *linter) find(purpose string, line int, ok func(luaToken) bool) int {
	start := 0
	if c, seen := l.cursors[purpose]; seen {
		start = c + 1
	}
	for j := start; j < len(l.toks); j++ {
		t := l.toks[j]
		if t.line > line {
			break
		}
		if t.line == line && ok(t) {
			l.cursors[purpose] = j
			return j
		}
	}
	return -1
}

func (l *linter) push() { l.scope = &lscope{parent: l.scope, vars: map[string]*lvar{}} }
func (l *linter) pop()  { l.scope = l.scope.parent }

// lookup returns the local a name refers to, nil for a global.
func (l *linter) lookup(name string) *lvar {
	for sc := l.scope; sc != nil; sc = sc.parent {
		if v, ok := sc.vars[name]; ok {
			return v
		}
	}
	return nil
}

// declare brings a local into the current scope, warning when it shadows or
// redeclares another.
func (l *linter) declare(name string, kind varKind, tok, line int) *lvar {
	v := &lvar{name: name, kind: kind, line: line, col: 1, keys: true, keysTable: true, keysList: true, litsOnly: true, kvList: true, prefix: true, data: true}
	if tok >= 0 {
		v.line, v.col = l.toks[tok].line, l.toks[tok].col
	}
	if p, ok := l.prior[[2]int{v.line, v.col}]; ok {
		v.keys, v.keysTable, v.keysList, v.litsOnly, v.lits, v.multi, v.prefix, v.data = p.keys, p.keysTable, p.keysList, p.litsOnly, p.lits, p.multi, p.prefix, p.data
	}
	if name != "_" {
		if prev, ok := l.scope.vars[name]; ok {
			l.report(tok, line, RuleShadowedLocal, Warning,
				"%s %s redeclares the %s %s of line %d in the same scope: assign to it, or use another name",
				kind.what(), name, prev.kind.what(), name, prev.line)
		} else if prev := l.lookup(name); prev != nil {
			l.report(tok, line, RuleShadowedLocal, Warning,
				"%s %s shadows the %s %s of line %d: use another name",
				kind.what(), name, prev.kind.what(), name, prev.line)
		}
	}
	l.scope.vars[name] = v
	l.vars = append(l.vars, v)
	return v
}

// assign records a value assigned to a local. A literal nil is no value:
// "local k = nil" then "k = KEYS[1]" makes k a key, as "local k" would.
func (l *linter) assign(v *lvar, val valInfo) {
	if val.none {
		return
	}
	v.assigned = true
	first := v.merges == 0
	v.merge(val)
	if first {
		v.alias = val.alias
	} else if v.alias != val.alias {
		v.alias = ""
	}
	v.retKeys = false
	if v.params != nil {
		l.escape(v) // another value: calls may no longer reach the function
	}
}

// escape drops what is known of the parameters of v's function: some of
// its calls are out of sight.
func (l *linter) escape(v *lvar) {
	for _, p := range v.params {
		p.keys, p.keysTable, p.keysList, p.litsOnly = false, false, false, false
	}
}

// merge narrows what is known of a local by one more value it may hold.
func (v *lvar) merge(val valInfo) {
	v.keys = v.keys && val.keys
	v.keysTable = v.keysTable && val.keysTable
	v.keysList = v.keysList && val.keysList
	v.kvList = v.kvList && val.kvList
	v.prefix = v.prefix && val.prefix
	v.data = v.data && val.data
	if val.kvList {
		v.kvOdd = val.kvOdd
	}
	v.litsOnly = v.litsOnly && val.litsOnly
	if v.litsOnly {
		v.lits = unionLits(v.lits, val.lits)
		if strings.Count(v.lits, litSep) >= maxLits {
			v.litsOnly = false
		}
	}
	v.merges++
	v.multi = v.multi || v.merges > 1
}

func (l *linter) stmts(list []ast.Stmt) {
	for _, st := range list {
		l.stmt(st)
	}
}

func (l *linter) block(list []ast.Stmt) {
	l.push()
	l.stmts(list)
	l.pop()
}

func (l *linter) stmt(st ast.Stmt) {
	switch st := st.(type) {
	case *ast.AssignStmt:
		targets := make([]*lvar, len(st.Lhs))
		for i, lhs := range st.Lhs {
			switch t := lhs.(type) {
			case *ast.IdentExpr:
				tok := l.match(t.Value, t.Line(), t.Line())
				l.identTok[t] = tok
				if v := l.lookup(t.Value); v != nil {
					targets[i] = v
				} else {
					l.report(tok, t.Line(), RuleGlobalAssign, Error,
						"assignment to global %s: Redis forbids globals; declare it with local", t.Value)
				}
			case *ast.AttrGetExpr:
				if id, ok := t.Object.(*ast.IdentExpr); ok && l.isParamTable(id) {
					l.expr(t)
					break
				}
				l.fieldWrite(t.Object, "assignment to a field of global %s: Redis forbids changing globals; keep the table in a local")
				l.expr(t.Key)
			default:
				l.expr(lhs)
			}
		}
		for i, e := range st.Rhs {
			if i < len(targets) && targets[i] != nil && l.readAlias(e) {
				continue // local rcall; rcall = redis.call: followed
			}
			l.expr(e)
		}
		vals := l.values(st.Rhs, len(st.Lhs))
		for i, v := range targets {
			if v != nil {
				l.assign(v, vals[i])
			}
		}
		for i, lhs := range st.Lhs {
			if t, ok := lhs.(*ast.AttrGetExpr); ok && !vals[i].none { // nil removes an entry
				l.listWrite(t.Object, vals[i].keys)
			}
		}

	case *ast.LocalAssignStmt:
		maxLine := st.Line()
		if len(st.Exprs) > 0 {
			maxLine = max(maxLine, st.Exprs[0].Line())
		}
		toks := make([]int, len(st.Names))
		for i, name := range st.Names {
			toks[i] = l.match(name, st.Line(), maxLine)
		}
		if f, ok := l.localFunction(st, toks); ok {
			v := l.declare(st.Names[0], varFunc, toks[0], st.Line())
			l.assign(v, valInfo{})
			// Bound before the body, which may call f itself.
			fi := l.function(f, false, func(ps []*lvar) { v.params = ps })
			v.retKeys = fi.returns > 0 && fi.retKeys
			break
		}
		var params []*lvar // of local f = function(...) ... end
		retKeys := false
		for i, e := range st.Exprs {
			if f, ok := e.(*ast.FunctionExpr); ok && len(st.Names) == 1 && len(st.Exprs) == 1 {
				fi := l.function(f, false, func(ps []*lvar) { params = ps })
				retKeys = fi.returns > 0 && fi.retKeys
				continue
			}
			if i < len(st.Names) && l.readAlias(e) {
				continue // local rcall = redis.call: followed
			}
			l.expr(e)
		}
		vals := l.values(st.Exprs, len(st.Names))
		for i, name := range st.Names {
			v := l.declare(name, varLocal, toks[i], st.Line())
			if len(st.Exprs) > 0 {
				l.assign(v, vals[i])
			}
			v.params = params
			v.retKeys = retKeys
		}

	case *ast.FuncCallStmt:
		l.expr(st.Expr)

	case *ast.DoBlockStmt:
		l.block(st.Stmts)

	case *ast.WhileStmt:
		l.expr(st.Condition)
		l.block(st.Stmts)

	case *ast.RepeatStmt:
		// The condition sees the locals of the body.
		l.push()
		l.stmts(st.Stmts)
		l.expr(st.Condition)
		l.pop()

	case *ast.IfStmt:
		l.expr(st.Condition)
		l.block(st.Then)
		l.block(st.Else)

	case *ast.NumberForStmt:
		tok := l.match(st.Name, st.Line(), max(st.Line(), exprLine(st.Init)))
		l.expr(st.Init)
		l.expr(st.Limit)
		l.expr(st.Step)
		// The loop variable has a scope of its own around the body: a local
		// of the body named like it shadows it.
		l.push()
		v := l.declare(st.Name, varLoop, tok, st.Line())
		l.assign(v, valInfo{})
		l.block(st.Stmts)
		l.pop()

	case *ast.GenericForStmt:
		maxLine := st.Line()
		if len(st.Exprs) > 0 {
			maxLine = max(maxLine, st.Exprs[0].Line())
		}
		toks := make([]int, len(st.Names))
		for i, name := range st.Names {
			toks[i] = l.match(name, st.Line(), maxLine)
		}
		for _, e := range st.Exprs {
			l.expr(e)
		}
		overKeys := len(st.Exprs) == 1 && l.iteratesKeys(st.Exprs[0])
		overData := len(st.Exprs) == 1 && l.iteratesData(st.Exprs[0])
		l.push()
		for i, name := range st.Names {
			v := l.declare(name, varLoop, toks[i], st.Line())
			l.assign(v, valInfo{keys: overKeys && i == 1, data: overData})
		}
		l.block(st.Stmts)
		l.pop()

	case *ast.FuncDefStmt:
		l.funcDef(st)

	case *ast.ReturnStmt:
		for _, e := range st.Exprs {
			l.expr(e)
		}
		if n := len(l.fns); n > 0 {
			fi := l.fns[n-1]
			fi.returns++
			fi.retKeys = fi.retKeys && len(st.Exprs) == 1 && l.fromKeys(st.Exprs[0])
		}

	case *ast.LabelStmt:
		tok := l.find("label", st.Line(), func(t luaToken) bool { return t.kind == tokPunct && t.text == "::" })
		l.find("label", st.Line(), func(t luaToken) bool { return t.kind == tokPunct && t.text == "::" }) // the closing ::
		l.report(tok, st.Line(), RuleGoto, Error,
			"label ::%s:: is Lua 5.2 syntax and Redis runs Lua 5.1, which rejects it: use a loop with break or a flag", st.Name)

	case *ast.GotoStmt:
		tok := l.find("goto", st.Line(), func(t luaToken) bool { return t.kind == tokKeyword && t.text == "goto" })
		l.report(tok, st.Line(), RuleGoto, Error,
			"goto is Lua 5.2 syntax and Redis runs Lua 5.1, which rejects it: use a loop with break or a flag")
	}
}

// localFunction reports whether a local statement is "local function f",
// which gopher-lua parses like "local f = function": only the tokens tell.
func (l *linter) localFunction(st *ast.LocalAssignStmt, toks []int) (*ast.FunctionExpr, bool) {
	if len(st.Names) != 1 || len(st.Exprs) != 1 || toks[0] < 2 {
		return nil, false
	}
	f, ok := st.Exprs[0].(*ast.FunctionExpr)
	if !ok {
		return nil, false
	}
	kw, local := l.toks[toks[0]-1], l.toks[toks[0]-2]
	if kw.kind == tokKeyword && kw.text == "function" && local.kind == tokKeyword && local.text == "local" {
		return f, true
	}
	return nil, false
}

func (l *linter) funcDef(st *ast.FuncDefStmt) {
	name := st.Name
	method := name.Func == nil
	if method {
		l.fieldWrite(name.Receiver, "function "+funcName(name)+" sets a field of global %s: Redis forbids changing globals; keep the table in a local")
	} else {
		switch t := name.Func.(type) {
		case *ast.IdentExpr:
			tok := l.match(t.Value, t.Line(), t.Line())
			l.identTok[t] = tok
			if v := l.lookup(t.Value); v != nil {
				l.assign(v, valInfo{})
			} else {
				l.report(tok, t.Line(), RuleGlobalAssign, Error,
					"function %s is global: Redis forbids globals; declare it as local function %s", t.Value, t.Value)
			}
		case *ast.AttrGetExpr:
			l.fieldWrite(t.Object, "function "+funcName(name)+" sets a field of global %s: Redis forbids changing globals; keep the table in a local")
			l.expr(t.Key)
		}
	}
	l.function(st.Func, method, nil)
}

// funcName spells the name of a function statement: a.b.c or a.b:c.
func funcName(n *ast.FuncName) string {
	var spell func(e ast.Expr) string
	spell = func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.IdentExpr:
			return e.Value
		case *ast.AttrGetExpr:
			if k, ok := e.Key.(*ast.StringExpr); ok {
				return spell(e.Object) + "." + k.Value
			}
			return spell(e.Object) + "[...]"
		}
		return "?"
	}
	if n.Func == nil {
		return spell(n.Receiver) + ":" + n.Method
	}
	return spell(n.Func)
}

// fieldWrite handles the table whose field an assignment or a function
// statement sets. When the table is reached from a global, that is a write
// to a global: format says so, with %s for the global's name.
func (l *linter) fieldWrite(obj ast.Expr, format string) {
	var chain []ast.Expr // the index keys from the root outward
	root := obj
	for {
		a, ok := root.(*ast.AttrGetExpr)
		if !ok {
			break
		}
		chain = append([]ast.Expr{a.Key}, chain...)
		root = a.Object
	}
	id, ok := root.(*ast.IdentExpr)
	if !ok || l.lookup(id.Value) != nil || l.isParamTable(id) {
		l.use(obj)
		return
	}
	tok := l.match(id.Value, id.Line(), id.Line())
	l.identTok[id] = tok
	l.report(tok, id.Line(), RuleGlobalAssign, Error, format, id.Value)
	for _, k := range chain {
		l.expr(k)
	}
}

// function walks a function body in a new scope holding its parameters.
// Nothing is known of the parameters' values, unless bind is given: the
// function is then a local one, whose parameters take the arguments of its
// calls (see lvar.params), and bind receives them before the body is
// walked, so that recursive calls count.
func (l *linter) function(f *ast.FunctionExpr, method bool, bind func([]*lvar)) *fnInfo {
	l.push()
	fi := &fnInfo{retKeys: true}
	l.fns = append(l.fns, fi)
	defer func() { l.fns = l.fns[:len(l.fns)-1] }()
	if method {
		v := &lvar{name: "self", kind: varParam, line: f.Line(), assigned: true}
		l.scope.vars["self"] = v
	}
	if f.ParList != nil && f.ParList.HasVargs {
		// Lua 5.1 (LUA_COMPAT_VARARG, as Redis builds it) gives a vararg
		// function a local arg holding its extra arguments.
		l.scope.vars["arg"] = &lvar{name: "arg", kind: varParam, line: f.Line(), assigned: true}
	}
	var params []*lvar
	if f.ParList != nil {
		for _, name := range f.ParList.Names {
			tok := l.match(name, f.Line(), max(f.Line(), f.LastLine()))
			v := l.declare(name, varParam, tok, f.Line())
			if bind == nil {
				l.assign(v, valInfo{})
			} else {
				v.assigned = true // by the calls: see callArgs
			}
			params = append(params, v)
		}
	}
	if bind != nil {
		bind(params)
	}
	if cb, ok := l.callbacks[f]; ok {
		// A registered function: its first parameter holds the keys of
		// the FCALL, as KEYS does a script's.
		if len(params) > 0 {
			p := params[0]
			p.assigned, p.keysTable, p.keysList, p.keys = true, true, true, false
		}
		if cb.noWrites {
			outer := l.noWrites
			l.noWrites = "the no-writes flag of function " + cb.name
			defer func() { l.noWrites = outer }()
		}
	}
	l.stmts(f.Stmts)
	l.pop()
	return fi
}

// callArgs assigns the arguments of a direct call of a local function to
// its parameters: a parameter comes from KEYS only when every call passes
// an entry of KEYS (or the KEYS table) in its place. A missing argument is
// nil, which is neither.
func (l *linter) callArgs(f *lvar, args []ast.Expr) {
	vals := l.values(args, len(f.params))
	for i, p := range f.params {
		p.merge(vals[i])
	}
}

// values tells, for each of n targets, what the alias tracking knows of the
// value the expression list gives it.
func (l *linter) values(exprs []ast.Expr, n int) []valInfo {
	out := make([]valInfo, n)
	for i := range out {
		switch {
		case i < len(exprs):
			if _, isNil := exprs[i].(*ast.NilExpr); isNil {
				out[i] = valInfo{none: true}
				continue
			}
			lits, only := l.literals(exprs[i])
			alias, _ := l.aliasOf(exprs[i])
			kv, odd := l.isKVList(exprs[i])
			out[i] = valInfo{keys: l.fromKeys(exprs[i]), keysTable: l.isKeysTable(exprs[i]), keysList: l.isKeysList(exprs[i]),
				litsOnly: only, lits: lits, alias: alias, kvList: kv, kvOdd: odd, prefix: l.isPrefix(exprs[i]), data: l.fromData(exprs[i])}
		case len(exprs) > 0:
			// Extra targets take the further results of a final call.
			out[i] = valInfo{keys: l.isUnpackKeys(exprs[len(exprs)-1]), data: l.fromData(exprs[len(exprs)-1])}
		}
	}
	return out
}

// isParamTable reports whether id is the global KEYS or ARGV.
func (l *linter) isParamTable(id *ast.IdentExpr) bool {
	return (id.Value == "KEYS" || id.Value == "ARGV") && l.lookup(id.Value) == nil
}

// isKeys reports whether e is the global KEYS, or a local (once assigned)
// for which flag holds.
func (l *linter) isKeys(e ast.Expr, flag func(*lvar) bool) bool {
	id, ok := e.(*ast.IdentExpr)
	if !ok {
		return false
	}
	if v := l.lookup(id.Value); v != nil {
		return v.assigned && flag(v)
	}
	return id.Value == "KEYS"
}

// isKeysTable reports whether e is the KEYS table or a local that holds it.
func (l *linter) isKeysTable(e ast.Expr) bool {
	return l.isKeys(e, func(v *lvar) bool { return v.keysTable })
}

// holdsKeys reports whether every entry of e is a key: e is KEYS, or a
// local that holds a list of keys (KEYS among them; see lvar.keysList).
func (l *linter) holdsKeys(e ast.Expr) bool {
	return l.isKeys(e, func(v *lvar) bool { return v.keysList })
}

// isKeysList reports whether e is a table whose entries are all keys: a
// table constructor whose every value is a key ({} too) or what holdsKeys
// accepts, in each of e's alternatives.
func (l *linter) isKeysList(e ast.Expr) bool {
	for _, alt := range alternatives(e) {
		t, ok := alt.(*ast.TableExpr)
		if !ok {
			if !l.holdsKeys(alt) {
				return false
			}
			continue
		}
		for _, f := range t.Fields {
			if !l.fromKeys(f.Value) {
				return false
			}
		}
	}
	return true
}

// alternatives returns the expressions whose value e takes: for a or b,
// a's and b's; for c and a, a's (or c's false value, which is no key, list
// or command either); else e itself. So the idiom c and KEYS[1] or KEYS[2]
// is a key when both entries are.
func alternatives(e ast.Expr) []ast.Expr {
	op, ok := e.(*ast.LogicalOpExpr)
	switch {
	case !ok:
		return []ast.Expr{e}
	case op.Operator == "and":
		return alternatives(op.Rhs)
	}
	return append(alternatives(op.Lhs), alternatives(op.Rhs)...)
}

// dropList ends the list of keys of the local e, if it is one: its table
// is given a value that is no key (e[k] = v, table.insert(e, v)) or used in
// a way the walk does not follow.
func (l *linter) dropList(e ast.Expr) {
	if id, ok := e.(*ast.IdentExpr); ok {
		if v := l.lookup(id.Value); v != nil {
			v.keysList = false
			v.kvList = false
		}
	}
}

// listWrite records a value written into the table of the local e (e[k] =
// v, table.insert(e, v)): a value that is no key ends its list of keys, and
// keeps a list of alternating keys and values only in a value's place.
func (l *linter) listWrite(e ast.Expr, key bool) {
	id, ok := e.(*ast.IdentExpr)
	if !ok {
		return
	}
	v := l.lookup(id.Value)
	if v == nil {
		return
	}
	v.keysList = v.keysList && key
	if v.kvList && !v.kvOdd && !key {
		v.kvList = false
	}
	v.kvOdd = !v.kvOdd
}

// isKVList reports whether e is a table of alternating keys and values
// ({KEYS[1], ARGV[1], KEYS[2], ARGV[2]}, {} or a local holding one), and
// whether its next entry is a value (it holds an odd number).
func (l *linter) isKVList(e ast.Expr) (bool, bool) {
	switch e := e.(type) {
	case *ast.TableExpr:
		for i, f := range e.Fields {
			if f.Key != nil || i%2 == 0 && !l.fromKeys(f.Value) {
				return false, false
			}
		}
		return true, len(e.Fields)%2 == 1
	case *ast.IdentExpr:
		if v := l.lookup(e.Value); v != nil && v.assigned {
			return v.kvList, v.kvOdd
		}
	}
	return false, false
}

// aliasOf reports whether e is redis.call or redis.pcall, or a local that
// holds one of them, and which ("call" or "pcall").
func (l *linter) aliasOf(e ast.Expr) (string, bool) {
	if name, ok := l.redisFunc(e); ok {
		return name, true
	}
	if id, ok := e.(*ast.IdentExpr); ok {
		if v := l.lookup(id.Value); v != nil && v.alias != "" {
			return v.alias, true
		}
	}
	return "", false
}

// readAlias walks e when it is an alias (see aliasOf) given to a local, a
// use the walk follows, and reports whether it was one.
func (l *linter) readAlias(e ast.Expr) bool {
	if _, ok := l.aliasOf(e); !ok {
		return false
	}
	switch e := e.(type) {
	case *ast.AttrGetExpr:
		l.read(e.Object.(*ast.IdentExpr))
	case *ast.IdentExpr:
		l.readAs(e, true)
	}
	return true
}

// use walks e where a table is only read: the object of an index, the
// operand of #, an argument of a function of listReaders. A local read
// there keeps its list of keys; anything else is walked as usual.
func (l *linter) use(e ast.Expr) {
	if id, ok := e.(*ast.IdentExpr); ok && l.lookup(id.Value) != nil {
		l.read(id)
		if v := l.lookup(id.Value); v.alias != "" {
			l.report(l.identTok[id], id.Line(), RuleNonKeyArgument, Error,
				"%s holds redis.%s and is taken as a value: the keys of calls made through it cannot be checked; call it directly", id.Value, v.alias)
		}
		return
	}
	l.expr(e)
}

// listReaders are the functions (of Redis's Lua environment) that read a
// table given to them without keeping it or adding entries other than the
// ones checked (table.insert's value is).
var listReaders = map[string]bool{
	"unpack": true, "ipairs": true, "pairs": true, "next": true, "select": true,
	"type": true, "tostring": true, "rawget": true, "rawequal": true,
	"table.concat": true, "table.getn": true, "table.maxn": true,
	"table.insert": true, "table.remove": true, "table.sort": true,
	"cjson.encode": true, "cmsgpack.pack": true,
}

// readerCall reports whether c calls a function of listReaders (the
// global, not a local of that name).
func (l *linter) readerCall(c *ast.FuncCallExpr) bool {
	switch f := c.Func.(type) {
	case *ast.IdentExpr:
		return listReaders[f.Value] && l.lookup(f.Value) == nil
	case *ast.AttrGetExpr:
		lib, ok := f.Object.(*ast.IdentExpr)
		k, ok2 := f.Key.(*ast.StringExpr)
		return ok && ok2 && l.lookup(lib.Value) == nil && listReaders[lib.Value+"."+k.Value]
	}
	return false
}

// fromKeys reports whether e is an entry of KEYS in each of its
// alternatives: KEYS[...], a local whose every assignment so far is one, an
// entry of a list of keys, or unpack of such a table.
func (l *linter) fromKeys(e ast.Expr) bool {
	for _, alt := range alternatives(e) {
		if !l.isKey(alt) {
			return false
		}
	}
	return true
}

// isKey is fromKeys for one alternative.
func (l *linter) isKey(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.AttrGetExpr:
		return l.holdsKeys(e.Object)
	case *ast.IdentExpr:
		v := l.lookup(e.Value)
		return v != nil && v.assigned && v.keys
	case *ast.StringConcatOpExpr:
		return l.isPrefix(e.Lhs) // a declared key prefix .. suffix
	case *ast.FuncCallExpr:
		if id, ok := e.Func.(*ast.IdentExpr); ok {
			if v := l.lookup(id.Value); v != nil && v.retKeys {
				return true // a local function that returns a key
			}
		}
		return l.isUnpackKeys(e)
	}
	return false
}

// fromData reports whether e was read from Redis in each of its
// alternatives: a redis.call or redis.pcall reply, an element of one, a
// local that only ever holds one, or text joined to one (prefix .. id).
func (l *linter) fromData(e ast.Expr) bool {
	for _, alt := range alternatives(e) {
		if !l.isData(alt) {
			return false
		}
	}
	return true
}

// isData is fromData for one alternative.
func (l *linter) isData(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.FuncCallExpr:
		_, _, _, _, ok := l.redisCall(e)
		return ok
	case *ast.IdentExpr:
		v := l.lookup(e.Value)
		return v != nil && v.assigned && v.data
	case *ast.AttrGetExpr:
		return l.isData(e.Object)
	case *ast.StringConcatOpExpr:
		return l.isData(e.Lhs) || l.isData(e.Rhs)
	}
	return false
}

// iteratesData reports whether e is ipairs(x) or pairs(x) of a reply of
// Redis x.
func (l *linter) iteratesData(e ast.Expr) bool {
	c, ok := e.(*ast.FuncCallExpr)
	if !ok || len(c.Args) != 1 {
		return false
	}
	id, ok := c.Func.(*ast.IdentExpr)
	if !ok || !(l.isGlobal(id, "ipairs") || l.isGlobal(id, "pairs")) {
		return false
	}
	return l.fromData(c.Args[0])
}

// literals reports whether e is always one of a known set of string
// literals, and which (joined by litSep; empty when nothing is known yet):
// each of e's alternatives is a literal or a local whose every value is one
// (when it took several values, only if they are all the same literal).
func (l *linter) literals(e ast.Expr) (string, bool) {
	set := ""
	for _, alt := range alternatives(e) {
		lits, ok := l.literal(alt)
		if !ok {
			return "", false
		}
		set = unionLits(set, lits)
	}
	return set, true
}

// literal is literals for one alternative.
func (l *linter) literal(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.StringExpr:
		if strings.Contains(e.Value, litSep) {
			return "", false
		}
		return e.Value, true
	case *ast.IdentExpr:
		// What the previous pass found counts, so that a value assigned
		// later in the source (a loop, a function called afterwards) does.
		v := l.lookup(e.Value)
		if v == nil || !v.litsOnly || v.multi && strings.Contains(v.lits, litSep) {
			return "", false
		}
		return v.lits, true
	}
	return "", false
}

// isGlobal reports whether id names the global name, not a local.
func (l *linter) isGlobal(id ast.Expr, name string) bool {
	x, ok := id.(*ast.IdentExpr)
	return ok && x.Value == name && l.lookup(name) == nil
}

// redisFunc reports whether e is redis.call or redis.pcall (the global
// redis), and which.
func (l *linter) redisFunc(e ast.Expr) (string, bool) {
	a, ok := e.(*ast.AttrGetExpr)
	if !ok || !l.isGlobal(a.Object, "redis") {
		return "", false
	}
	k, ok := a.Key.(*ast.StringExpr)
	if !ok || (k.Value != "call" && k.Value != "pcall") {
		return "", false
	}
	return k.Value, true
}

// isUnpackKeys reports whether e is unpack(KEYS, ...).
func (l *linter) isUnpackKeys(e ast.Expr) bool {
	c, ok := e.(*ast.FuncCallExpr)
	if !ok || len(c.Args) == 0 {
		return false
	}
	f, ok := c.Func.(*ast.IdentExpr)
	return ok && f.Value == "unpack" && l.lookup("unpack") == nil && l.holdsKeys(c.Args[0])
}

// iteratesKeys reports whether e is ipairs(KEYS) or pairs(KEYS).
func (l *linter) iteratesKeys(e ast.Expr) bool {
	c, ok := e.(*ast.FuncCallExpr)
	if !ok || len(c.Args) != 1 {
		return false
	}
	f, ok := c.Func.(*ast.IdentExpr)
	return ok && (f.Value == "ipairs" || f.Value == "pairs") && l.lookup(f.Value) == nil && l.holdsKeys(c.Args[0])
}

func (l *linter) expr(e ast.Expr) {
	switch e := e.(type) {
	case nil:
	case *ast.IdentExpr:
		l.read(e)
		l.dropList(e) // a table taken as a value: its later use is not followed
		if v := l.lookup(e.Value); v != nil && v.alias != "" {
			l.report(l.identTok[e], e.Line(), RuleNonKeyArgument, Error,
				"%s holds redis.%s and is taken as a value: the keys of calls made through it cannot be checked; call it directly", e.Value, v.alias)
		}
		if l.isGlobal(e, "redis") {
			l.report(l.identTok[e], e.Line(), RuleNonKeyArgument, Error,
				"redis taken as a value: the keys of calls made through it cannot be checked; call redis.call or redis.pcall directly")
		}
	case *ast.AttrGetExpr:
		if id, ok := e.Object.(*ast.IdentExpr); ok && l.isGlobal(id, "redis") {
			// redis.status_reply, redis.error_reply...: fine as values.
			l.read(id)
			if name, ok := l.redisFunc(e); ok {
				l.report(l.identTok[id], id.Line(), RuleNonKeyArgument, Error,
					"redis.%s taken as a value: the keys of calls made through it cannot be checked; call redis.%s(...) directly", name, name)
			}
			return
		}
		if id, ok := e.Object.(*ast.IdentExpr); ok {
			if v := l.lookup(id.Value); v != nil && v.assigned && v.keysTable {
				// A local that holds KEYS: its literal indexes are KEYS's.
				l.read(id)
				l.index("KEYS", l.identTok[id], e.Key)
				return
			}
		}
		if id, ok := e.Object.(*ast.IdentExpr); ok && l.lookup(id.Value) == nil {
			switch id.Value {
			case "KEYS", "ARGV":
				if l.s.Library != "" {
					break // reported as undefined below
				}
				tok := l.match(id.Value, id.Line(), id.Line())
				l.identTok[id] = tok
				l.index(id.Value, tok, e.Key)
				return
			case "_G":
				if k, ok := e.Key.(*ast.StringExpr); ok {
					if msg, bad := forbidden[k.Value]; bad {
						tok := l.match(id.Value, id.Line(), id.Line())
						l.identTok[id] = tok
						l.report(tok, id.Line(), RuleForbiddenCall, Error, "%s", msg)
						return
					}
				}
			}
		}
		l.use(e.Object)
		l.expr(e.Key)
	case *ast.FuncCallExpr:
		var callee *lvar
		if id, ok := e.Func.(*ast.IdentExpr); ok {
			callee = l.readAs(id, true)
			if id.Value == "rawset" && callee == nil && len(e.Args) > 0 && l.isGlobal(e.Args[0], "_G") {
				l.report(l.identTok[id], id.Line(), RuleGlobalAssign, Error,
					"rawset(_G, ...) assigns a global: Redis forbids globals; declare it with local")
			}
		} else if _, ok := l.redisFunc(e.Func); ok {
			l.read(e.Func.(*ast.AttrGetExpr).Object.(*ast.IdentExpr))
		} else if e.Func != nil {
			l.expr(e.Func)
		} else {
			l.expr(e.Receiver)
		}
		reader := l.readerCall(e)
		viaPcall := callee == nil && l.isGlobal(e.Func, "pcall") && len(e.Args) > 0
		for i, a := range e.Args {
			if i == 0 && viaPcall && l.readAlias(a) {
				continue // pcall(redis.call, ...): checked as redis.pcall
			}
			if reader || callee != nil && i < len(callee.params) {
				l.use(a) // a parameter's own uses are followed: see below
			} else {
				l.expr(a)
			}
		}
		l.checkCall(e)
		if fa, ok := e.Func.(*ast.AttrGetExpr); ok && l.isGlobal(fa.Object, "table") && len(e.Args) >= 2 {
			if k, ok := fa.Key.(*ast.StringExpr); ok && k.Value == "insert" {
				if len(e.Args) == 2 {
					l.listWrite(e.Args[0], l.fromKeys(e.Args[1]))
				} else {
					l.listWrite(e.Args[0], l.fromKeys(e.Args[len(e.Args)-1]))
					if id, ok := e.Args[0].(*ast.IdentExpr); ok {
						if v := l.lookup(id.Value); v != nil {
							v.kvList = false // an insert at a position: no alternation is known
						}
					}
				}
			}
		}
		if callee != nil && callee.params != nil {
			l.callArgs(callee, e.Args)
			for i, p := range callee.params {
				if i < len(e.Args) && !p.keysList {
					l.dropList(e.Args[i]) // the function writes or passes on its table
				}
			}
		}
	case *ast.TableExpr:
		for _, f := range e.Fields {
			l.expr(f.Key)
			l.expr(f.Value)
		}
	case *ast.FunctionExpr:
		l.function(e, false, nil)
	case *ast.LogicalOpExpr:
		l.expr(e.Lhs)
		l.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		l.expr(e.Lhs)
		l.expr(e.Rhs)
	case *ast.StringConcatOpExpr:
		l.expr(e.Lhs)
		l.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		l.expr(e.Lhs)
		l.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		l.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		l.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		if id, ok := e.Expr.(*ast.IdentExpr); ok && l.isParamTable(id) {
			// #KEYS reads no entry: it does not make every key used.
			l.identTok[id] = l.match(id.Value, id.Line(), id.Line())
			return
		}
		l.use(e.Expr)
	}
}

// read handles a name read as a value.
func (l *linter) read(id *ast.IdentExpr) { l.readAs(id, false) }

// readAs handles a name read as a value, or as the function of a call when
// call is set. It returns the local the name refers to, nil for a global.
func (l *linter) readAs(id *ast.IdentExpr, call bool) *lvar {
	tok := l.match(id.Value, id.Line(), id.Line())
	l.identTok[id] = tok
	if v := l.lookup(id.Value); v != nil {
		v.reads++
		if !call && v.params != nil {
			l.escape(v) // the function may be called out of sight
		}
		return v
	}
	name := id.Value
	if msg, ok := forbidden[name]; ok {
		l.report(tok, id.Line(), RuleForbiddenCall, Error, "%s", msg)
		return nil
	}
	switch {
	case (name == "KEYS" || name == "ARGV") && l.s.Library != "":
		l.report(tok, id.Line(), RuleUndefinedGlobal, Error,
			"%s is not defined in a Functions library: a registered function gets the keys and args of its FCALL as its two parameters", name)
	case name == "KEYS":
		l.keys.all = true
	case name == "ARGV":
		l.argv.all = true
	case !isGlobalName(name):
		l.report(tok, id.Line(), RuleUndefinedGlobal, Error,
			"undefined global %s: a Redis script sees only its locals and the globals Redis provides; declare it with local or check the spelling", name)
	}
	return nil
}

// index handles KEYS[key] or ARGV[key]; tok is the token of KEYS or ARGV.
func (l *linter) index(table string, tok int, key ast.Expr) {
	use, params, rule, tag, noun := &l.keys, l.s.Keys, RuleKeysRange, "@key", "key"
	if table == "ARGV" {
		use, params, rule, tag, noun = &l.argv, l.s.Args, RuleArgvRange, "@arg", "arg"
	}
	if _, ok := key.(*ast.StringExpr); ok {
		return // KEYS.name: not a position
	}
	if l.s.Library != "" {
		l.expr(key) // a registered function's keys: no header declares them
		return
	}
	text, n, ok := literalIndex(key)
	if !ok {
		use.all = true
		l.expr(key)
		return
	}
	if l.s.badParams {
		return // a rejected @key or @arg makes the positions unknown
	}
	line := key.Line()
	variadic := len(params) > 0 && params[len(params)-1].Variadic
	switch {
	case n != math.Trunc(n):
		l.report(tok, line, rule, Error, "%s[%s] is not a whole number: %s positions are 1, 2, 3...", table, text, table)
	case n < 1:
		l.report(tok, line, rule, Error, "%s[%s] is before the first %s: %s counts from 1", table, text, noun, table)
	case n > float64(len(params)) && !variadic:
		plural := "s"
		if len(params) == 1 {
			plural = ""
		}
		l.report(tok, line, rule, Error, "%s[%s] is beyond the %d %s%s the header declares (%s): declare another %s or fix the index",
			table, text, len(params), noun, plural, tag, tag)
	default:
		use.literal[int(n)] = true
	}
}

// literalIndex reads a number literal, possibly negated: its text as
// written, its value and whether it is one.
func literalIndex(e ast.Expr) (string, float64, bool) {
	sign := ""
	if m, ok := e.(*ast.UnaryMinusOpExpr); ok {
		sign, e = "-", m.Expr
	}
	num, ok := e.(*ast.NumberExpr)
	if !ok {
		return "", 0, false
	}
	v, ok := parseLuaNumber(num.Value)
	if !ok {
		return "", 0, false
	}
	if sign != "" {
		v = -v
	}
	return sign + num.Value, v, true
}

// parseLuaNumber parses a Lua 5.1 number literal: decimal or 0x hexadecimal.
func parseLuaNumber(s string) (float64, bool) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		if strings.ContainsAny(s, ".pP") { // C99 hexadecimal float, as strtod reads it
			if !strings.ContainsAny(s, "pP") {
				s += "p0"
			}
			f, err := strconv.ParseFloat(s, 64)
			return f, err == nil
		}
		u, err := strconv.ParseUint(s[2:], 16, 64)
		return float64(u), err == nil
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// checkCall checks the keys passed to redis.call and redis.pcall.
func (l *linter) checkCall(c *ast.FuncCallExpr) {
	_, fn, args, obj, ok := l.redisCall(c)
	if !ok || len(args) == 0 {
		return
	}
	// The command: a literal, or a name known to hold one of a few literals
	// (each is checked). A command name from ARGV is not known: its keys
	// cannot be checked.
	names, ok := l.literals(args[0])
	if !ok || names == "" {
		return
	}
	callee := fmt.Sprintf("%s...) with the command '%%s'", fn)
	switch x := args[0].(type) {
	case *ast.StringExpr:
		callee = fmt.Sprintf("%s'%%s', ...)", fn)
	case *ast.IdentExpr:
		callee = fmt.Sprintf("%s%s, ...) with %s = '%%s'", fn, x.Value, x.Value)
	}
	// Arguments from a final ... are not known, nor their positions.
	nargs := len(args) - 1
	if _, ok := args[nargs].(*ast.Comma3Expr); ok && nargs > 0 {
		nargs--
	}
	// lit returns the literal text of argument i (a string or a number).
	lit := func(i int) (string, bool) {
		if i < 1 || i > nargs {
			return "", false
		}
		switch a := args[i].(type) {
		case *ast.NumberExpr:
			return a.Value, true
		case *ast.StringExpr:
			return a.Value, true
		}
		return "", false
	}
	reported := map[int]bool{}
	for _, cmd := range strings.Split(names, litSep) {
		sub, subKnown := lit(1)
		info, known := lookupCommand(cmd, sub, subKnown)
		if l.noWrites != "" && known && info.writes() {
			tok := -1
			if t, ok := l.identTok[obj]; ok {
				tok = t
			}
			l.report(tok, c.Line(), RuleReadOnlyWrite, Error,
				"%s: %s is a write command, which Redis refuses in a script with %s: remove the flag, or the write",
				fmt.Sprintf(callee, cmd), strings.ToUpper(cmd), l.noWrites)
		}
		if !known {
			continue
		}
		l.checkVersion(c, obj, fmt.Sprintf(callee, cmd), cmd, info, nargs, lit)
		positions, _ := info.keyPositions(len(args)-1, lit)
		step2 := len(info.Keys) == 1 && info.Keys[0].KeyStep == 2
		for _, p := range positions {
			if p > nargs {
				break
			}
			arg := args[p]
			if reported[p] || l.fromKeys(arg) {
				continue
			}
			if len(l.s.DataKeys) > 0 && l.fromData(arg) {
				continue // a key read from data, in the slot @datakeys names
			}
			if step2 && p == len(args)-1 && l.isUnpackKV(arg) {
				continue // unpack of alternating keys and values, in a key's place
			}
			reported[p] = true
			which := "the key"
			if len(positions) > 1 || info.manyKeys() {
				which = fmt.Sprintf("key argument %d", p)
			}
			// Point at the argument when it starts with a name, else at redis.
			tok := -1
			if t, ok := l.identTok[obj]; ok {
				tok = t
			}
			if id := leftmostIdent(arg); id != nil {
				if t, ok := l.identTok[id]; ok && t >= 0 {
					tok = t
				}
			}
			if id, ok := arg.(*ast.IdentExpr); ok {
				if v := l.lookup(id.Value); v != nil && v.kind == varParam {
					which += fmt.Sprintf(" (parameter %s: a parameter is a key only when its local function is only ever called, by name, with a KEYS entry in its place)", id.Value)
				}
			}
			l.report(tok, c.Line(), RuleNonKeyArgument, Error,
				"%s: %s is not taken from KEYS; Redis Cluster needs every key declared: pass it in KEYS and declare it with @key",
				fmt.Sprintf(callee, cmd), which)
		}
	}
}

// checkVersion reports a command, subcommand or option newer than the
// target Redis version (luagen.json "redis").
func (l *linter) checkVersion(c *ast.FuncCallExpr, obj *ast.IdentExpr, callee, cmd string, info *Command, nargs int, lit func(int) (string, bool)) {
	if l.target == nil {
		return
	}
	tok := -1
	if t, ok := l.identTok[obj]; ok {
		tok = t
	}
	report := func(what, since string) {
		l.report(tok, c.Line(), RuleRedisVersion, Error,
			"%s: %s needs Redis %s, newer than the target Redis %s (luagen.json \"redis\")", callee, what, since, l.target)
	}
	if v, err := ParseRedisVersion(info.Since); err == nil && l.target.Less(v) {
		what := strings.ToUpper(cmd)
		if i := strings.IndexByte(info.Name, '|'); i >= 0 {
			what = strings.ToUpper(strings.ReplaceAll(info.Name, "|", " "))
		}
		report(what, info.Since)
		return
	}
	for i := 1; i <= nargs; i++ {
		s, ok := lit(i)
		if !ok {
			continue
		}
		if since, ok := info.Options[strings.ToUpper(s)]; ok {
			if v, err := ParseRedisVersion(since); err == nil && l.target.Less(v) {
				report(strings.ToUpper(cmd)+" "+strings.ToUpper(s), since)
			}
		}
	}
}

// redisCall reports whether c calls Redis: redis.call(...) or
// redis.pcall(...), through a local alias of either (rcall(...)), or as
// pcall(redis.call, ...). It returns "call" or "pcall", the function as
// written for messages up to its command ("redis.call(", "rcall(",
// "pcall(redis.call, "), the arguments from the command on, and the name
// that the finding points at when no argument names one.
func (l *linter) redisCall(c *ast.FuncCallExpr) (method, fn string, args []ast.Expr, at *ast.IdentExpr, ok bool) {
	if m, ok := l.redisFunc(c.Func); ok {
		return m, "redis." + m + "(", c.Args, c.Func.(*ast.AttrGetExpr).Object.(*ast.IdentExpr), true
	}
	id, isID := c.Func.(*ast.IdentExpr)
	if !isID {
		return "", "", nil, nil, false
	}
	if v := l.lookup(id.Value); v != nil && v.alias != "" {
		return v.alias, id.Value + "(", c.Args, id, true
	}
	if l.isGlobal(id, "pcall") && len(c.Args) > 0 {
		if _, ok := l.aliasOf(c.Args[0]); ok {
			return "pcall", "pcall(" + exprText(c.Args[0]) + ", ", c.Args[1:], id, true
		}
	}
	return "", "", nil, nil, false
}

// exprText spells redis.call or a local's name.
func exprText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.IdentExpr:
		return e.Value
	case *ast.AttrGetExpr:
		if k, ok := e.Key.(*ast.StringExpr); ok {
			return exprText(e.Object) + "." + k.Value
		}
	}
	return "?"
}

// isUnpackKV reports whether e is unpack(t) of a local t holding
// alternating keys and values, a key first and a value last.
func (l *linter) isUnpackKV(e ast.Expr) bool {
	c, ok := e.(*ast.FuncCallExpr)
	if !ok || len(c.Args) != 1 {
		return false
	}
	f, ok := c.Func.(*ast.IdentExpr)
	if !ok || f.Value != "unpack" || l.lookup("unpack") != nil {
		return false
	}
	kv, odd := l.isKVList(c.Args[0])
	return kv && !odd
}

// leftmostIdent returns the name an expression starts with, if any.
func leftmostIdent(e ast.Expr) *ast.IdentExpr {
	for {
		switch x := e.(type) {
		case *ast.IdentExpr:
			return x
		case *ast.AttrGetExpr:
			e = x.Object
		case *ast.FuncCallExpr:
			if x.Func != nil {
				e = x.Func
			} else {
				e = x.Receiver
			}
		case *ast.StringConcatOpExpr:
			e = x.Lhs
		case *ast.ArithmeticOpExpr:
			e = x.Lhs
		case *ast.LogicalOpExpr:
			e = x.Lhs
		case *ast.RelationalOpExpr:
			e = x.Lhs
		default:
			return nil
		}
	}
}

// finish reports the unused locals, keys and args.
func (l *linter) finish() {
	for _, v := range l.vars {
		if v.reads > 0 || v.kind == varParam || strings.HasPrefix(v.name, "_") {
			continue
		}
		d := Diagnostic{File: l.s.File, Line: v.line, Col: v.col, Rule: RuleUnusedLocal, Severity: Warning}
		switch v.kind {
		case varLoop:
			d.Message = fmt.Sprintf("loop variable %s is never read: name it _", v.name)
		case varFunc:
			d.Message = fmt.Sprintf("local function %s is never called: remove it", v.name)
		default:
			d.Message = fmt.Sprintf("local %s is never read: remove it, or name it _ if a value must be skipped", v.name)
		}
		l.diags = append(l.diags, d)
	}
	if !l.s.badParams {
		l.unusedParams(l.s.Keys, &l.keys, "KEYS", "@key", RuleUnusedKey)
		l.unusedParams(l.s.Args, &l.argv, "ARGV", "@arg", RuleUnusedArg)
	}
}

func (l *linter) unusedParams(params []Param, use *paramUse, table, tag, rule string) {
	if use.all {
		return
	}
	for i, p := range params {
		pos := i + 1
		used := use.literal[pos]
		if p.Variadic {
			for n := range use.literal {
				used = used || n >= pos
			}
		}
		if used {
			continue
		}
		msg := fmt.Sprintf("%s %s is never used: read it as %s[%d], or remove it from the header", tag, p.Name, table, pos)
		if p.Variadic {
			msg = fmt.Sprintf("%s %s... is never used: read %s[%d] and after, or remove it from the header", tag, p.Name, table, pos)
		}
		l.diags = append(l.diags, Diagnostic{File: l.s.File, Line: p.Line, Col: l.headerCol(p.Line, tag, p.Name), Rule: rule, Message: msg})
	}
}

// headerCol finds the column of a parameter's name in its header line.
func (l *linter) headerCol(line int, tag, name string) int {
	if line < 1 || line > len(l.lines) {
		return 1
	}
	text := l.lines[line-1]
	at := strings.Index(text, tag)
	if at < 0 {
		return 1
	}
	at += len(tag)
	i := strings.Index(text[at:], name)
	if i < 0 {
		return 1
	}
	return at + i + 1
}

// isPrefix reports whether e is a declared key prefix: ARGV[n] or KEYS[n]
// declared one (prefixPositions), or a local that only ever holds one.
func (l *linter) isPrefix(e ast.Expr) bool {
	if len(l.prefixes) == 0 && len(l.keyPrefixes) == 0 {
		return false
	}
	switch e := e.(type) {
	case *ast.AttrGetExpr:
		if id, ok := e.Object.(*ast.IdentExpr); ok && l.isGlobal(id, "ARGV") {
			if _, n, ok := literalIndex(e.Key); ok {
				return l.prefixes[int(n)]
			}
		}
		if id, ok := e.Object.(*ast.IdentExpr); ok && l.isGlobal(id, "KEYS") {
			if _, n, ok := literalIndex(e.Key); ok {
				return l.keyPrefixes[int(n)]
			}
		}
	case *ast.IdentExpr:
		v := l.lookup(e.Value)
		return v != nil && v.assigned && v.prefix
	}
	return false
}

// prefixPositions resolves the key prefixes of a script: Config's
// KeyPrefixArgs, those of the overrides that match its file, and its
// @prefix annotations, each an @arg or @key name, ARGV[n] or KEYS[n]. It
// returns the ARGV and the KEYS positions that carry a prefix.
func prefixPositions(s *Script, cfg Config) (args, keys map[int]bool) {
	names := slices.Clone(cfg.KeyPrefixArgs)
	for _, o := range cfg.Overrides {
		if o.matches(s.File) {
			names = append(names, o.KeyPrefixArgs...)
		}
	}
	for _, a := range s.Prefixes {
		names = append(names, a.Name)
	}
	for _, n := range names {
		isKey, pos := resolveParam(s, n)
		switch {
		case pos == 0:
		case isKey:
			if keys == nil {
				keys = map[int]bool{}
			}
			keys[pos] = true
		default:
			if args == nil {
				args = map[int]bool{}
			}
			args[pos] = true
		}
	}
	return args, keys
}

// KeyPrefixes lists the keys and args of s that carry a key prefix under
// cfg (its KeyPrefixArgs, the overrides matching s's file, and s's
// @prefix annotations), by name: keys first, in order.
func KeyPrefixes(s *Script, cfg Config) []string {
	args, keys := prefixPositions(s, cfg)
	var out []string
	for i, k := range s.Keys {
		if keys[i+1] {
			out = append(out, k.Name)
		}
	}
	for i, a := range s.Args {
		if args[i+1] {
			out = append(out, a.Name)
		}
	}
	return out
}

// resolveParam finds a key or an arg of s by @key or @arg name, or as
// KEYS[n] or ARGV[n]; pos is 0 when there is none (a variadic one is
// none: it is no single value).
func resolveParam(s *Script, name string) (isKey bool, pos int) {
	for _, t := range [...]struct {
		table  string
		isKey  bool
		params []Param
	}{{"KEYS[", true, s.Keys}, {"ARGV[", false, s.Args}} {
		if rest, ok := strings.CutPrefix(name, t.table); ok {
			if i, err := strconv.Atoi(strings.TrimSuffix(rest, "]")); err == nil && strings.HasSuffix(rest, "]") && i >= 1 {
				return t.isKey, i
			}
			return false, 0
		}
		for i, p := range t.params {
			if p.Name == name && !p.Variadic {
				return t.isKey, i + 1
			}
		}
	}
	return false, 0
}

// annotationRefs reports the @prefix and @datakeys annotations that name
// no key or arg of the script (@datakeys: no key).
func annotationRefs(s *Script) []Diagnostic {
	if s.badParams {
		return nil // positions unknown: the @key or @arg finding says why
	}
	var out []Diagnostic
	for _, a := range s.Prefixes {
		if _, pos := resolveParam(s, a.Name); pos == 0 {
			out = append(out, Diagnostic{File: s.File, Line: a.Line, Col: 1, Rule: RuleHeader, Severity: Error,
				Message: fmt.Sprintf("@prefix %s names no @key or @arg of the script (nor KEYS[n], ARGV[n]; a variadic one is no single prefix)", a.Name)})
		}
	}
	for _, a := range s.DataKeys {
		if isKey, pos := resolveParam(s, a.Name); pos == 0 || !isKey {
			out = append(out, Diagnostic{File: s.File, Line: a.Line, Col: 1, Rule: RuleHeader, Severity: Error,
				Message: fmt.Sprintf("@datakeys %s names no @key of the script: name the key whose slot the keys read from data share", a.Name)})
		}
	}
	return out
}
