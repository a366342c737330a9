package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/tools/go/packages"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// An imported script: a Lua source a Go package keeps as a string.
type imported struct {
	name   string // snake_case, for the file and the Go names
	source string
	sites  []callSite // where it runs
	where  string     // where the source is (file:line)
}

// callSite is a call that runs a script: Run, Eval, EvalSha, ... with the
// keys and args expressions it passes.
type callSite struct {
	pos  string
	call string // as written: enqueueCmd.Run, r.client.Eval
	keys []ast.Expr
	args []ast.Expr
	// spread: the args end with slice... (argv...), elements unknown
	spread ast.Expr
	info   *types.Info
}

// importPackage finds the scripts of the Go package at pattern, drafts a
// header for each, writes lua/<name>.lua into src (never over a file),
// and prints the call sites to switch. It never changes Go code.
func (c *cli) importPackage(pattern, src string, write bool) int {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		c.errorf("import: %v", err)
		return 1
	}
	if len(pkgs) == 0 {
		c.errorf("import: no package matches %s", pattern)
		return 1
	}
	var scripts []*imported
	for _, p := range pkgs {
		for _, e := range p.Errors {
			fmt.Fprintf(c.stderr, "luagen: import: %v (types may be missing)\n", e)
		}
		scripts = append(scripts, findScripts(p)...)
	}
	if len(scripts) == 0 {
		fmt.Fprintf(c.stdout, "no scripts found in %s\n", pattern)
		return 0
	}
	used := map[string]bool{}
	status := 0
	for _, s := range scripts {
		base := s.name
		for i := 2; used[s.name]; i++ {
			s.name = fmt.Sprintf("%s_%d", base, i)
		}
		used[s.name] = true
		text := draftHeader(s) + strings.TrimLeft(s.source, "\n")
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		file := filepath.Join(src, s.name+".lua")
		fmt.Fprintf(c.stdout, "%s (from %s)\n", file, s.where)
		for _, site := range s.sites {
			fmt.Fprintf(c.stdout, "  %s: %s -> %s(ctx, c, %sKeys{...}, %sArgs{...})\n", site.pos, site.call, gen.GoName(s.name), gen.GoName(s.name), gen.GoName(s.name))
		}
		if !write {
			fmt.Fprintf(c.stdout, "%s\n", text)
			continue
		}
		if err := os.MkdirAll(src, 0o755); err != nil {
			c.errorf("import: %v", err)
			return 1
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			c.errorf("import: %v (not overwritten)", err)
			status = 1
			continue
		}
		_, err = f.WriteString(text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			c.errorf("import: %v", err)
			return 1
		}
	}
	return status
}

// findScripts finds redis.NewScript(lit or const) and Eval/EvalRO calls
// with a literal or constant source, and the calls that run the scripts.
func findScripts(p *packages.Package) []*imported {
	var out []*imported
	byObj := map[types.Object]*imported{}
	info := p.TypesInfo
	pos := func(n ast.Node) string {
		ps := p.Fset.Position(n.Pos())
		return fmt.Sprintf("%s:%d", filepath.Base(ps.Filename), ps.Line)
	}
	strVal := func(e ast.Expr) (string, bool) {
		if info != nil {
			if tv, ok := info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
				return constant.StringVal(tv.Value), true
			}
		}
		if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			s, err := strconv.Unquote(bl.Value)
			return s, err == nil
		}
		return "", false
	}
	// Scripts made by NewScript, named by the var they are assigned to.
	for _, f := range p.Syntax {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, v := range vs.Values {
				call, ok := v.(*ast.CallExpr)
				if !ok || !isSel(call.Fun, "NewScript") || len(call.Args) != 1 || i >= len(vs.Names) {
					continue
				}
				src, ok := strVal(call.Args[0])
				if !ok {
					continue
				}
				s := &imported{name: snake(strings.TrimSuffix(strings.TrimSuffix(vs.Names[i].Name, "Cmd"), "Script")), source: src, where: pos(call)}
				out = append(out, s)
				if info != nil {
					byObj[info.Defs[vs.Names[i]]] = s
				}
			}
			return true
		})
	}
	// Calls: script.Run/RunRO/Eval/EvalRO/EvalSha/EvalShaRO, and
	// client.Eval/EvalRO with a source.
	for _, f := range p.Syntax {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			m := sel.Sel.Name
			if id, ok := sel.X.(*ast.Ident); ok && info != nil {
				if s := byObj[info.Uses[id]]; s != nil && slices.Contains([]string{"Run", "RunRO", "Eval", "EvalRO", "EvalSha", "EvalShaRO"}, m) && len(call.Args) >= 3 {
					s.sites = append(s.sites, site(pos(call), id.Name+"."+m, call.Args[2], call.Args[3:], call.Ellipsis.IsValid(), info))
					return true
				}
			}
			// A helper given the script: run(ctx, op, script, keys, args...).
			if info != nil {
				for i, a := range call.Args {
					if id, ok := a.(*ast.Ident); ok {
						if s := byObj[info.Uses[id]]; s != nil && i+1 < len(call.Args) {
							s.sites = append(s.sites, site(pos(call), exprString(sel.X)+"."+m+"(..., "+id.Name+", ...)", call.Args[i+1], call.Args[i+2:], call.Ellipsis.IsValid(), info))
							return true
						}
					}
				}
			}
			if (m == "Eval" || m == "EvalRO") && len(call.Args) >= 3 {
				src, ok := strVal(call.Args[1])
				if !ok {
					return true
				}
				name := "script_" + strings.ReplaceAll(strings.TrimSuffix(pos(call), ".go"), ".go:", "_")
				if id, ok := call.Args[1].(*ast.Ident); ok {
					name = snake(strings.TrimSuffix(strings.TrimSuffix(id.Name, "Src"), "Source"))
				} else if fn := enclosingFunc(f, call); fn != "" {
					name = snake(fn)
				}
				s := &imported{name: name, source: src, where: pos(call)}
				s.sites = append(s.sites, site(pos(call), exprString(sel.X)+"."+m, call.Args[2], call.Args[3:], call.Ellipsis.IsValid(), info))
				out = append(out, s)
			}
			return true
		})
	}
	return out
}

func site(pos, call string, keys ast.Expr, args []ast.Expr, spread bool, info *types.Info) callSite {
	cs := callSite{pos: pos, call: call, info: info}
	cs.keys = elems(keys)
	if spread && len(args) > 0 {
		cs.spread = args[len(args)-1]
		args = args[:len(args)-1]
	}
	cs.args = args
	return cs
}

func isSel(e ast.Expr, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && s.Sel.Name == name
}

// enclosingFunc names the function declaration that holds n.
func enclosingFunc(f *ast.File, n ast.Node) string {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Pos() <= n.Pos() && n.End() <= fd.End() {
			return fd.Name.Name
		}
	}
	return ""
}

var (
	keysRef   = regexp.MustCompile(`KEYS\[(\d+)\]`)
	argvRef   = regexp.MustCompile(`ARGV\[(\d+)\]`)
	localKey  = regexp.MustCompile(`(?m)local\s+([A-Za-z_]\w*)\s*=\s*KEYS\[(\d+)\]\s*(--.*)?$`)
	localArg  = regexp.MustCompile(`(?m)local\s+([A-Za-z_]\w*)\s*=\s*(tonumber\(\s*)?ARGV\[(\d+)\]\s*\)?\s*(--.*)?$`)
	loopFrom  = regexp.MustCompile(`for\s+\w+\s*=\s*(\d+)\s*,\s*#(KEYS|ARGV)`)
	variadicK = regexp.MustCompile(`#KEYS|ipairs\(KEYS\)|unpack\(KEYS`)
	variadicA = regexp.MustCompile(`#ARGV|ipairs\(ARGV\)|unpack\(ARGV`)
)

// param is a drafted @key or @arg.
type param struct {
	name, typ string
	known     bool // the name came from the script or a call site
	variadic  bool
}

// draftHeader drafts the header of s: a TODO description, its keys and
// args (counts from the script; names from its locals, else from the call
// sites; types from the call sites), @return any and TODOs.
func draftHeader(s *imported) string {
	nk, na := maxRef(keysRef, s.source), maxRef(argvRef, s.source)
	// for i = n, #ARGV: a variadic run from position n.
	for _, m := range loopFrom.FindAllStringSubmatch(s.source, -1) {
		if n, _ := strconv.Atoi(m[1]); m[2] == "KEYS" {
			nk = max(nk, n)
		} else {
			na = max(na, n)
		}
	}
	keys := make([]param, nk)
	args := make([]param, na)
	// Call sites: names and types of what they pass.
	for _, site := range s.sites {
		for i, e := range site.keys {
			if i < nk && !keys[i].known {
				if n := exprName(e, true, site.info); n != "" {
					keys[i].name, keys[i].known = n, true
				}
			}
		}
		for i, e := range argExprs(site) {
			if i >= na {
				break
			}
			if !args[i].known {
				if n := exprName(e, false, site.info); n != "" {
					args[i].name, args[i].known = n, true
				}
			}
			if args[i].typ == "" {
				args[i].typ = exprType(e, site.info)
			}
		}
	}
	// The script's locals win for names; tonumber gives a type.
	for _, m := range localKey.FindAllStringSubmatch(s.source, -1) {
		if i, _ := strconv.Atoi(m[2]); i >= 1 && i <= nk {
			keys[i-1].name, keys[i-1].known = snake(m[1]), true
		}
	}
	for _, m := range localArg.FindAllStringSubmatch(s.source, -1) {
		if i, _ := strconv.Atoi(m[3]); i >= 1 && i <= na {
			args[i-1].name, args[i-1].known = snake(m[1]), true
			if m[2] != "" && args[i-1].typ == "" {
				args[i-1].typ = "int"
			}
		}
	}
	if variadicK.MatchString(s.source) {
		if nk == 0 {
			keys = append(keys, param{})
		}
		keys[len(keys)-1].variadic = true
	}
	if variadicA.MatchString(s.source) {
		if na == 0 {
			args = append(args, param{})
		}
		args[len(args)-1].variadic = true
	}
	var b strings.Builder
	b.WriteString("-- TODO: say what " + s.name + " does (drafted by luagen import from " + s.where + ").\n--\n")
	seen := map[string]bool{}
	unique := func(p *param, def string, i int) {
		if p.name == "" || seen[p.name] {
			if p.name == "" {
				p.name = fmt.Sprintf("%s%d", def, i+1)
			} else {
				p.name = fmt.Sprintf("%s_%d", p.name, i+1)
			}
			p.known = false
		}
		seen[p.name] = true
	}
	for i := range keys {
		unique(&keys[i], "key", i)
		doc := "TODO"
		if !keys[i].known {
			doc = "TODO: name and describe this key"
		}
		fmt.Fprintf(&b, "-- @key    %s%s  %s\n", keys[i].name, dots(keys[i].variadic), doc)
	}
	for i := range args {
		unique(&args[i], "arg", i)
		doc := "TODO"
		if !args[i].known {
			doc = "TODO: name and describe this arg"
		}
		t := args[i].typ
		if t == "" {
			t, doc = "string", doc+" (TODO: type)"
		}
		fmt.Fprintf(&b, "-- @arg    %s%s  %s  %s\n", args[i].name, dots(args[i].variadic), t, doc)
	}
	if returnsInt(s.source) {
		b.WriteString("-- @return int  TODO\n")
	} else {
		b.WriteString("-- @return any  TODO: the reply's type (int, string?, []string, ...)\n")
	}
	b.WriteString("-- TODO: @flag idempotent when a second run of the same call changes nothing; @flag read-only when it never writes.\n\n")
	return b.String()
}

func dots(v bool) string {
	if v {
		return "..."
	}
	return ""
}

// argExprs lists the expressions a call site passes as ARGV: its args, or
// the elements of a composite literal spread with "...", or of the local
// slice it names when that was a literal.
func argExprs(s callSite) []ast.Expr {
	out := slices.Clone(s.args)
	if s.spread == nil {
		return out
	}
	return append(out, elems(s.spread)...)
}

// elems returns the elements of a composite literal, or of the one a
// local was declared with (keys := []string{...}); nil otherwise.
func elems(e ast.Expr) []ast.Expr {
	if cl, ok := e.(*ast.CompositeLit); ok {
		return cl.Elts
	}
	id, ok := e.(*ast.Ident)
	if !ok || id.Obj == nil {
		return nil
	}
	if as, ok := id.Obj.Decl.(*ast.AssignStmt); ok {
		for i, l := range as.Lhs {
			if li, ok := l.(*ast.Ident); ok && li.Name == id.Name && i < len(as.Rhs) {
				if cl, ok := as.Rhs[i].(*ast.CompositeLit); ok {
					return cl.Elts
				}
			}
		}
	}
	return nil
}

var (
	returnStmt = regexp.MustCompile(`(?m)^\s*return\s+(.+?)\s*(--.*)?$`)
	intReturn  = regexp.MustCompile(`^(-?\d+|#\S.*|table\.getn\(.*\)|.*\s[-+*]\s.*)$`)
)

// returnsInt reports whether every return statement of src gives an
// integer: a literal, a length, or arithmetic.
func returnsInt(src string) bool {
	ms := returnStmt.FindAllStringSubmatch(src, -1)
	for _, m := range ms {
		if !intReturn.MatchString(m[1]) {
			return false
		}
	}
	return len(ms) > 0
}

// maxRef is the highest n of re's matches (KEYS[n], ARGV[n]).
func maxRef(re *regexp.Regexp, src string) int {
	n := 0
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		if i, err := strconv.Atoi(m[1]); err == nil && i > n && i < 1000 {
			n = i
		}
	}
	return n
}

// exprName names what an expression passes: a variable, a field, a
// function that builds a key (pendingKey(q) gives pending) or a value
// (taskKeyPrefix(q) and base.TaskKeyPrefix(q) give task_key_prefix), the
// receiver of a method
// (leaseExpiry.Unix() gives lease_expiry; time.Now().Unix() gives now),
// in snake_case.
func exprName(e ast.Expr, key bool, info *types.Info) string {
	switch e := e.(type) {
	case *ast.Ident:
		return snake(e.Name)
	case *ast.SelectorExpr:
		return snake(e.Sel.Name)
	case *ast.CallExpr:
		switch f := e.Fun.(type) {
		case *ast.Ident:
			if info != nil && info.Types[f].IsType() && len(e.Args) == 1 { // int64(x), string(b)
				return exprName(e.Args[0], key, info)
			}
			if key {
				return snake(strings.TrimSuffix(f.Name, "Key"))
			}
			return snake(f.Name)
		case *ast.SelectorExpr:
			if key {
				return snake(strings.TrimSuffix(f.Sel.Name, "Key"))
			}
			switch x := f.X.(type) {
			case *ast.Ident:
				if info != nil {
					if _, isPkg := info.Uses[x].(*types.PkgName); isPkg {
						return snake(f.Sel.Name) // base.TaskKeyPrefix(q)
					}
				}
				return snake(x.Name) // leaseExpiry.Unix()
			case *ast.CallExpr: // time.Now().UnixNano()
				if isSel(x.Fun, "Now") {
					return "now"
				}
			}
		}
	}
	return ""
}

// exprType is the @arg type of the Go value passed, when its type says.
func exprType(e ast.Expr, info *types.Info) string {
	if info == nil {
		return ""
	}
	tv, ok := info.Types[e]
	if !ok || tv.Type == nil {
		return ""
	}
	t := tv.Type
	if named, ok := t.(*types.Named); ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == "time" && named.Obj().Name() == "Duration" {
		return "" // a Duration goes as nanoseconds: say which unit
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsInteger != 0:
			return "int"
		case u.Info()&types.IsFloat != 0:
			return "float"
		case u.Info()&types.IsString != 0:
			return "string"
		case u.Info()&types.IsBoolean != 0:
			return "bool"
		}
	case *types.Slice:
		if b, ok := u.Elem().(*types.Basic); ok && b.Kind() == types.Byte {
			return "bytes"
		}
	}
	return ""
}

// exprString spells a receiver (r.client).
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "?"
}

// snake turns a Go name (taskKey, leaseExpiry, ID) into snake_case.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
