package gen

import (
	"slices"

	"github.com/yuin/gopher-lua/ast"
)

// callback is a function registered with redis.register_function.
type callback struct {
	name     string
	noWrites bool
	line     int // of the local function or of the register call: its doc block is above
}

// registeredCallbacks finds the functions a Functions library registers at
// its top level: redis.register_function('name', f) or
// redis.register_function{function_name = 'name', callback = f, flags =
// {...}}, f being a function or a local function declared before. Their
// first parameter is the call's keys (KEYS of a script), their second its
// args; a no-writes flag makes them read-only.
func registeredCallbacks(chunk []ast.Stmt) map[*ast.FunctionExpr]callback {
	locals := map[string]*ast.FunctionExpr{}
	lines := map[*ast.FunctionExpr]int{}
	out := map[*ast.FunctionExpr]callback{}
	for _, st := range chunk {
		if la, ok := st.(*ast.LocalAssignStmt); ok && len(la.Names) == 1 && len(la.Exprs) == 1 {
			if f, ok := la.Exprs[0].(*ast.FunctionExpr); ok {
				locals[la.Names[0]] = f
				lines[f] = la.Line()
			}
			continue
		}
		cs, ok := st.(*ast.FuncCallStmt)
		if !ok {
			continue
		}
		c, ok := cs.Expr.(*ast.FuncCallExpr)
		if !ok || !isRegisterFunction(c.Func) || len(c.Args) == 0 {
			continue
		}
		var cb callback
		var fn ast.Expr
		switch {
		case len(c.Args) >= 2:
			if s, ok := c.Args[0].(*ast.StringExpr); ok {
				cb.name = s.Value
			}
			fn = c.Args[1]
		default:
			t, ok := c.Args[0].(*ast.TableExpr)
			if !ok {
				continue
			}
			for _, f := range t.Fields {
				k, ok := f.Key.(*ast.StringExpr)
				if !ok {
					continue
				}
				switch k.Value {
				case "function_name":
					if s, ok := f.Value.(*ast.StringExpr); ok {
						cb.name = s.Value
					}
				case "callback":
					fn = f.Value
				case "flags":
					if ft, ok := f.Value.(*ast.TableExpr); ok {
						cb.noWrites = slices.ContainsFunc(ft.Fields, func(x *ast.Field) bool {
							s, ok := x.Value.(*ast.StringExpr)
							return ok && s.Value == "no-writes"
						})
					}
				}
			}
		}
		cb.line = cs.Line()
		switch f := fn.(type) {
		case *ast.FunctionExpr:
			out[f] = cb
		case *ast.IdentExpr:
			if lf, ok := locals[f.Value]; ok {
				cb.line = lines[lf]
				out[lf] = cb
			}
		}
	}
	return out
}

// isRegisterFunction reports whether e is redis.register_function.
func isRegisterFunction(e ast.Expr) bool {
	a, ok := e.(*ast.AttrGetExpr)
	if !ok {
		return false
	}
	id, ok := a.Object.(*ast.IdentExpr)
	k, ok2 := a.Key.(*ast.StringExpr)
	return ok && ok2 && id.Value == "redis" && k.Value == "register_function"
}
