package gen

import (
	"fmt"

	"github.com/yuin/gopher-lua/ast"
)

// Limits of Lua 5.1's compiler as Redis builds it (luaconf.h): a script
// past one of them does not load.
const (
	maxLocals   = 200 // LUAI_MAXVARS: active locals of one function
	maxUpvalues = 60  // LUAI_MAXUPVALUES: upvalues of one function
	maxLevels   = 200 // LUAI_MAXCCALLS: nested blocks and expressions
	maxRegs     = 249 // MAXSTACK is 250: the registers a function may use
)

// compileChecks finds what Lua 5.1 refuses while compiling a script that
// parses: a break outside a loop, "..." outside a vararg function, more than
// maxLocals active locals or maxUpvalues upvalues in a function, more than
// maxLevels syntax levels, and a call whose "(" starts a new line. It walks
// the AST once, in time linear in its size (gopher-lua's own compiler,
// which it replaces, is quadratic in a function's distinct constants).
func compileChecks(file string, chunk []ast.Stmt, toks []luaToken) []Diagnostic {
	c := &compileWalk{file: file, toks: toks, names: map[string][]*cLocal{}}
	c.fn = &cFunc{line: 0, vararg: true, upvals: map[*cLocal]bool{}}
	c.block(chunk, 1)
	c.ambiguousCalls()
	return c.found
}

type cLocal struct{ fn *cFunc }

type cFunc struct {
	parent   *cFunc
	line     int
	vararg   bool
	loops    int
	active   int
	upvals   map[*cLocal]bool
	reported bool
}

type compileWalk struct {
	file  string
	toks  []luaToken
	fn    *cFunc
	names map[string][]*cLocal // innermost last
	found []Diagnostic
	deep  bool // the levels finding was made
}

func (c *compileWalk) add(line int, word, format string, a ...any) {
	col := 1
	if word != "" {
		for _, t := range c.tokensOn(line) {
			if t.text == word {
				col = t.col
				break
			}
		}
	}
	c.found = append(c.found, Diagnostic{File: c.file, Line: max(line, 1), Col: col, Rule: RuleSyntax, Message: fmt.Sprintf(format, a...)})
}

// tokensOn returns the tokens of a line, found by binary search.
func (c *compileWalk) tokensOn(line int) []luaToken {
	lo, hi := 0, len(c.toks)
	for lo < hi {
		m := (lo + hi) / 2
		if c.toks[m].line < line {
			lo = m + 1
		} else {
			hi = m
		}
	}
	end := lo
	for end < len(c.toks) && c.toks[end].line == line {
		end++
	}
	return c.toks[lo:end]
}

func (c *compileWalk) level(lvl, line int) {
	if lvl > maxLevels && !c.deep {
		c.deep = true
		c.add(line, "", "chunk has too many syntax levels: Lua 5.1 allows %d nested blocks and expressions", maxLevels)
	}
}

// declare brings locals into scope; undo takes them out again.
func (c *compileWalk) declare(names []string, line int) []string {
	for _, n := range names {
		c.names[n] = append(c.names[n], &cLocal{fn: c.fn})
	}
	c.fn.active += len(names)
	if c.fn.active > maxLocals && !c.fn.reported {
		c.fn.reported = true
		where := "main function"
		if c.fn.line > 0 {
			where = fmt.Sprintf("function at line %d", c.fn.line)
		}
		c.add(line, "", "%s has more than %d local variables", where, maxLocals)
	}
	return names
}

func (c *compileWalk) undo(names []string) {
	for _, n := range names {
		s := c.names[n]
		c.names[n] = s[:len(s)-1]
	}
	c.fn.active -= len(names)
}

func (c *compileWalk) ref(name string, line int) {
	s := c.names[name]
	if len(s) == 0 {
		return
	}
	v := s[len(s)-1]
	for f := c.fn; f != nil && f != v.fn; f = f.parent {
		if f.upvals[v] {
			break
		}
		f.upvals[v] = true
		if len(f.upvals) > maxUpvalues && !f.reported {
			f.reported = true
			c.add(line, "", "function at line %d has more than %d upvalues", f.line, maxUpvalues)
		}
	}
}

func (c *compileWalk) block(list []ast.Stmt, lvl int) {
	c.level(lvl, firstLine(list))
	var scope []string
	for _, st := range list {
		scope = append(scope, c.stmt(st, lvl)...)
	}
	c.undo(scope)
}

func firstLine(list []ast.Stmt) int {
	if len(list) > 0 {
		return list[0].Line()
	}
	return 1
}

// stmt walks one statement at syntax level lvl and returns the locals it
// declares in the enclosing block.
func (c *compileWalk) stmt(st ast.Stmt, lvl int) []string {
	switch st := st.(type) {
	case *ast.AssignStmt:
		c.exprs(st.Lhs, lvl)
		c.exprs(st.Rhs, lvl)
		c.registers(st.Rhs, 0, st.Line())
	case *ast.LocalAssignStmt:
		if len(st.Names) == 1 && len(st.Exprs) == 1 {
			if f, ok := st.Exprs[0].(*ast.FunctionExpr); ok && c.isLocalFunction(st) {
				names := c.declare(st.Names, st.Line())
				c.function(f, lvl+1, false)
				return names
			}
		}
		c.exprs(st.Exprs, lvl)
		c.registers(st.Exprs, 0, st.Line())
		return c.declare(st.Names, st.Line())
	case *ast.FuncCallStmt:
		c.expr(st.Expr, lvl+1)
		c.registers([]ast.Expr{st.Expr}, 0, st.Line())
	case *ast.DoBlockStmt:
		c.block(st.Stmts, lvl+1)
	case *ast.WhileStmt:
		c.expr(st.Condition, lvl+1)
		c.loop(st.Stmts, lvl+1, nil, st.Line())
	case *ast.RepeatStmt:
		c.fn.loops++
		c.level(lvl+1, st.Line())
		var scope []string
		for _, s := range st.Stmts {
			scope = append(scope, c.stmt(s, lvl+1)...)
		}
		c.expr(st.Condition, lvl+2)
		c.undo(scope)
		c.fn.loops--
	case *ast.IfStmt:
		c.expr(st.Condition, lvl+1)
		c.block(st.Then, lvl+1)
		c.block(st.Else, lvl+1)
	case *ast.NumberForStmt:
		c.expr(st.Init, lvl+1)
		c.expr(st.Limit, lvl+1)
		c.expr(st.Step, lvl+1)
		// (for index), (for limit), (for step) and the variable.
		c.loop(st.Stmts, lvl+1, []string{"(for index)", "(for limit)", "(for step)", st.Name}, st.Line())
	case *ast.GenericForStmt:
		c.exprs(st.Exprs, lvl)
		c.loop(st.Stmts, lvl+1, append([]string{"(for generator)", "(for state)", "(for control)"}, st.Names...), st.Line())
	case *ast.FuncDefStmt:
		if st.Name.Func != nil {
			c.expr(st.Name.Func, lvl+1)
		} else {
			c.expr(st.Name.Receiver, lvl+1)
		}
		c.function(st.Func, lvl+1, st.Name.Func == nil)
	case *ast.ReturnStmt:
		c.exprs(st.Exprs, lvl)
		c.registers(st.Exprs, 0, st.Line())
	case *ast.BreakStmt:
		if c.fn.loops == 0 {
			c.add(st.Line(), "break", "break outside a loop")
		}
	}
	return nil
}

func (c *compileWalk) isLocalFunction(st *ast.LocalAssignStmt) bool {
	for _, t := range c.tokensOn(st.Line()) {
		if t.kind == tokKeyword && t.text == "function" {
			return true
		}
	}
	return false
}

func (c *compileWalk) loop(body []ast.Stmt, lvl int, vars []string, line int) {
	c.fn.loops++
	vars = c.declare(vars, line)
	c.block(body, lvl)
	c.undo(vars)
	c.fn.loops--
}

func (c *compileWalk) function(f *ast.FunctionExpr, lvl int, method bool) {
	fn := &cFunc{parent: c.fn, line: f.Line(), upvals: map[*cLocal]bool{}}
	var params []string
	if method {
		params = append(params, "self")
	}
	if f.ParList != nil {
		params = append(params, f.ParList.Names...)
		fn.vararg = f.ParList.HasVargs
		if fn.vararg {
			params = append(params, "arg")
		}
	}
	outer := c.fn
	c.fn = fn
	params = c.declare(params, f.Line())
	c.block(f.Stmts, lvl)
	c.undo(params)
	c.fn = outer
}

func (c *compileWalk) exprs(list []ast.Expr, lvl int) {
	for _, e := range list {
		c.expr(e, lvl+1)
	}
}

// expr walks an expression parsed at syntax level lvl. As in Lua 5.1's
// parser, the right operand of a binary operator and the operand of a
// unary one are a level deeper; a chain of left-associative operators is
// not (its left operands are parsed by the same loop).
func (c *compileWalk) expr(e ast.Expr, lvl int) {
	if e == nil {
		return
	}
	c.level(lvl, e.Line())
	switch e := e.(type) {
	case *ast.IdentExpr:
		c.ref(e.Value, e.Line())
	case *ast.Comma3Expr:
		if !c.fn.vararg {
			c.add(e.Line(), "...", "cannot use '...' outside a vararg function")
		}
	case *ast.AttrGetExpr:
		c.expr(e.Object, lvl)
		if _, ok := e.Key.(*ast.StringExpr); !ok {
			c.expr(e.Key, lvl+1)
		}
	case *ast.TableExpr:
		for _, f := range e.Fields {
			c.expr(f.Key, lvl+1)
			c.expr(f.Value, lvl+1)
		}
	case *ast.FuncCallExpr:
		if e.Func != nil {
			c.expr(e.Func, lvl)
		} else {
			c.expr(e.Receiver, lvl)
		}
		for _, a := range e.Args {
			c.expr(a, lvl+1)
		}
	case *ast.FunctionExpr:
		c.function(e, lvl+1, false)
	case *ast.LogicalOpExpr:
		c.binary(e.Lhs, e.Rhs, lvl)
	case *ast.RelationalOpExpr:
		c.binary(e.Lhs, e.Rhs, lvl)
	case *ast.StringConcatOpExpr:
		c.binary(e.Lhs, e.Rhs, lvl)
	case *ast.ArithmeticOpExpr:
		c.binary(e.Lhs, e.Rhs, lvl)
	case *ast.UnaryMinusOpExpr:
		c.expr(e.Expr, lvl+1)
	case *ast.UnaryNotOpExpr:
		c.expr(e.Expr, lvl+1)
	case *ast.UnaryLenOpExpr:
		c.expr(e.Expr, lvl+1)
	}
}

func (c *compileWalk) binary(lhs, rhs ast.Expr, lvl int) {
	c.expr(lhs, lvl)
	c.expr(rhs, lvl+1)
}

// ambiguousCalls finds a "(" that would call the expression before it but
// starts a new line, which Lua 5.1 refuses as ambiguous: "(f)()" after a
// statement ending in a name, ")" or "]".
func (c *compileWalk) ambiguousCalls() {
	toks := c.toks
	// callArg marks the "{" and strings that are call arguments.
	callArg := make([]bool, len(toks))
	var braces []int
	params := map[int]bool{} // ")" closing a parameter list
	var parens []bool        // for each open "(": it opens a parameter list
	funcPending := false
	for i, t := range toks {
		prevEnds := i > 0 && c.endsPrefix(i-1, callArg, params)
		switch {
		case t.kind == tokKeyword && t.text == "function":
			funcPending = true
		case t.kind == tokString:
			callArg[i] = prevEnds
		case t.kind == tokPunct && t.text == "{":
			callArg[i] = prevEnds
			braces = append(braces, i)
		case t.kind == tokPunct && t.text == "}":
			if n := len(braces); n > 0 {
				callArg[i] = callArg[braces[n-1]]
				braces = braces[:n-1]
			}
		case t.kind == tokPunct && t.text == "(":
			parens = append(parens, funcPending)
			funcPending = false
			if prevEnds && !c.funcName(i-1) {
				p := toks[i-1]
				if end := p.line + countLines(p.text); end != t.line {
					c.found = append(c.found, Diagnostic{File: c.file, Line: t.line, Col: t.col, Rule: RuleSyntax,
						Message: "ambiguous syntax (function call x new statement) near '(': Lua 5.1 reads this ( as a call of the line before; end that statement with ';' or move the ( up"})
				}
			}
		case t.kind == tokPunct && t.text == ")":
			if n := len(parens); n > 0 {
				params[i] = parens[n-1]
				parens = parens[:n-1]
			}
		}
	}
}

// endsPrefix reports whether token i can end a prefix expression, which a
// following "(" would call.
func (c *compileWalk) endsPrefix(i int, callArg []bool, params map[int]bool) bool {
	t := c.toks[i]
	switch t.kind {
	case tokIdent:
		return true
	case tokString:
		return callArg[i]
	case tokPunct:
		switch t.text {
		case ")":
			return !params[i]
		case "]":
			return true
		case "}":
			return callArg[i]
		}
	}
	return false
}

// funcName reports whether the name at token i is part of the name of a
// function statement (function a.b:c), whose "(" opens the parameters.
func (c *compileWalk) funcName(i int) bool {
	for i >= 0 {
		t := c.toks[i]
		switch {
		case t.kind == tokIdent, t.kind == tokPunct && (t.text == "." || t.text == ":"):
			i--
		case t.kind == tokKeyword && t.text == "function":
			return true
		default:
			return false
		}
	}
	return false
}

func countLines(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			n++
		}
	}
	return n
}

// registers checks that a statement's expressions fit Lua 5.1's 250
// registers: each takes the register after the function's active locals
// (and extra, the registers the statement holds besides) and the ones
// before it, and a call needs one register for the function, one for a
// method's self and one for each argument. Redis refuses more as "function
// or expression too complex" (calibrated against redis-server 7.0).
func (c *compileWalk) registers(list []ast.Expr, extra, line int) {
	if c.fn.reported {
		return
	}
	need := 0
	for i, e := range list {
		need = max(need, i+regs(e))
	}
	if total := c.fn.active + extra + need; total > maxRegs {
		c.fn.reported = true
		c.add(line, "", "function or expression too complex: it needs %d registers, more than the %d Lua 5.1 gives a function (split the call, or pass the values in a table)", total, maxRegs)
	}
}

// regs estimates the registers an expression needs, never more than Lua
// 5.1's code generator uses: a constant operand takes none of its own.
func regs(e ast.Expr) int {
	switch e := e.(type) {
	case *ast.FuncCallExpr:
		base := 1
		n := regs(e.Func)
		if e.Func == nil {
			base, n = 2, regs(e.Receiver)
		}
		for i, a := range e.Args {
			n = max(n, base+i+regs(a))
		}
		return max(n, base+len(e.Args))
	case *ast.AttrGetExpr:
		if leaf(e.Key) {
			return regs(e.Object)
		}
		return max(regs(e.Object), 1+regs(e.Key))
	case *ast.StringConcatOpExpr:
		return max(regs(e.Lhs), 1+regs(e.Rhs)) // operands in consecutive registers
	case *ast.ArithmeticOpExpr:
		return binaryRegs(e.Lhs, e.Rhs)
	case *ast.RelationalOpExpr:
		return binaryRegs(e.Lhs, e.Rhs)
	case *ast.LogicalOpExpr:
		return max(regs(e.Lhs), regs(e.Rhs))
	case *ast.UnaryMinusOpExpr:
		return regs(e.Expr)
	case *ast.UnaryNotOpExpr:
		return regs(e.Expr)
	case *ast.UnaryLenOpExpr:
		return regs(e.Expr)
	case *ast.TableExpr:
		n, pending := 1, 0
		for _, f := range e.Fields {
			if f.Key != nil {
				n = max(n, 1+regs(f.Value))
				continue
			}
			pending = pending%50 + 1 // Lua 5.1 stores every 50 list items
			n = max(n, pending+regs(f.Value))
		}
		return n
	}
	return 1
}

func binaryRegs(lhs, rhs ast.Expr) int {
	if leaf(rhs) {
		return regs(lhs)
	}
	return max(regs(lhs), 1+regs(rhs))
}

// leaf reports whether e is a constant or a name, which needs no register
// beyond the one its value goes to.
func leaf(e ast.Expr) bool {
	switch e.(type) {
	case *ast.NumberExpr, *ast.StringExpr, *ast.NilExpr, *ast.TrueExpr, *ast.FalseExpr, *ast.IdentExpr:
		return true
	}
	return false
}
