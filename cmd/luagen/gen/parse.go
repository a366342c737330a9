package gen

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rule names of the findings about files, folders and headers.
const (
	RuleFolder    = "folder"    // the source folder is missing, unreadable or empty
	RuleEncoding  = "encoding"  // a file is not UTF-8
	RuleCRLF      = "crlf"      // CRLF line endings (warning: they change the SHA1)
	RuleHeader    = "header"    // an annotation is malformed, unknown or misplaced; luagen:ignore names no rule it silences
	RuleName      = "name"      // a script or parameter name gives no Go identifier
	RuleDuplicate = "duplicate" // two scripts or parameters map to one Go name
	RuleShebang   = "shebang"   // a #! first line that Redis would reject
)

var (
	tagLine    = regexp.MustCompile(`^--+\s*@([A-Za-z_-]*)\s*(.*)$`)
	ignoreMark = regexp.MustCompile(`--.*\bluagen:ignore\b([ \t]+[A-Za-z0-9_-]+(?:[ \t]*,[ \t]*[A-Za-z0-9_-]+)*)?`)
	// ignoreText is the luagen:ignore comment at the end of a header line,
	// with the "--" that opens it unless that is the line's own.
	ignoreText = regexp.MustCompile(`(?:[ \t]*--+)?[ \t]*\bluagen:ignore\b.*$`)
	knownTags  = []string{"name", "key", "arg", "return", "flag", "prefix", "datakeys"}
	flagNames  = []string{"read-only", "idempotent"}
	returnType = regexp.MustCompile(`^(\[\])?([a-z]+)(\?)?$`)
	// Redis 7 accepts these flags in an EVAL script's shebang.
	shebangFlags = []string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}
)

// Parse reads every .lua file of cfg.Src in fsys and returns the scripts,
// sorted by file name, with the findings about folders, files and headers.
// A script with a header error is still returned, so that lint can run on it.
func Parse(fsys fs.FS, cfg Config) ([]*Script, []Diagnostic) {
	cfg = cfg.withDefaults()
	var diags []Diagnostic
	if bad := unsafePath(cfg.Src); bad != "" {
		return nil, []Diagnostic{{File: strconv.Quote(cfg.Src), Rule: RuleFolder,
			Message: fmt.Sprintf("source folder %q holds %s: the path is written into the generated Go code; rename the folder", cfg.Src, bad)}}
	}
	entries, err := fs.ReadDir(fsys, cfg.Src)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg = "source folder does not exist"
		}
		return nil, []Diagnostic{{File: cfg.Src, Rule: RuleFolder, Message: msg}}
	}
	var scripts []*Script
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".lua") {
			continue
		}
		file := path.Join(cfg.Src, e.Name())
		if bad := unsafePath(e.Name()); bad != "" {
			diags = append(diags, Diagnostic{File: cfg.Src, Rule: RuleName,
				Message: fmt.Sprintf("file name %q holds %s: the path is written into the generated Go code; rename the file", e.Name(), bad)})
			continue
		}
		src, err := fs.ReadFile(fsys, file)
		if err != nil {
			diags = append(diags, Diagnostic{File: file, Rule: RuleFolder, Message: err.Error()})
			continue
		}
		if !utf8.Valid(src) {
			s, ds := parseScript(file, src) // the encoding finding
			diags = append(diags, ds...)
			if s != nil {
				scripts = append(scripts, s)
			}
			continue
		}
		src, origins, idiags := expandIncludes(fsys, file, src)
		diags = append(diags, idiags...)
		s, ds := parseScriptAt(file, src, origins)
		if s != nil {
			for i := range ds {
				ds[i] = s.place(ds[i])
			}
		}
		diags = append(diags, ds...)
		if s != nil {
			scripts = append(scripts, s)
		}
	}
	if len(scripts) == 0 && len(diags) == 0 {
		diags = append(diags, Diagnostic{File: cfg.Src, Rule: RuleFolder, Message: "no .lua files in the source folder"})
	}
	diags = append(diags, checkNames(scripts)...)
	SortDiagnostics(diags)
	return scripts, diags
}

// unsafePath describes what makes a path unfit for the comments and string
// literals of generated Go code: invalid UTF-8, or a control or otherwise
// invisible character (a line break would end a comment). It returns ""
// for a path that is fit.
func unsafePath(p string) string {
	if !utf8.ValidString(p) {
		return "bytes that are not UTF-8"
	}
	for _, r := range p {
		if !unicode.IsGraphic(r) {
			return fmt.Sprintf("the character %U, which is a control or invisible character", r)
		}
	}
	return ""
}

// parseScript reads the header of one file. It returns nil when the file
// cannot be a script at all (not UTF-8).
func parseScript(file string, src []byte) (*Script, []Diagnostic) {
	return parseScriptAt(file, src, nil)
}

// parseScriptAt is parseScript for a text expanded from includes, whose
// lines were written where origins says (nil: all in file).
func parseScriptAt(file string, src []byte, origins []origin) (*Script, []Diagnostic) {
	var diags []Diagnostic
	add := func(line int, rule, format string, a ...any) {
		diags = append(diags, Diagnostic{File: file, Line: line, Col: 1, Rule: rule, Message: fmt.Sprintf(format, a...)})
	}
	if !utf8.Valid(src) {
		at := firstInvalidUTF8(src)
		line, col := offsetPosition(src, at)
		diags = append(diags, Diagnostic{File: file, Line: line, Col: col, Rule: RuleEncoding,
			Message: "file is not valid UTF-8: save it as UTF-8"})
		return nil, diags
	}
	if bytes.HasPrefix(src, []byte("\ufeff")) {
		add(1, RuleEncoding, "file starts with a byte order mark, which Redis's Lua does not accept: save it as UTF-8 without BOM")
		return nil, diags
	}
	sum := sha1.Sum(src)
	name, keyCount := scriptName(strings.TrimSuffix(path.Base(file), ".lua"))
	s := &Script{
		Name:    name,
		File:    file,
		Source:  src,
		SHA1:    hex.EncodeToString(sum[:]),
		ignores: map[int][]string{},
		origins: origins,
	}
	text := string(src)
	if i := strings.IndexByte(text, '\r'); i >= 0 {
		line, col := offsetPosition(src, i)
		diags = append(diags, Diagnostic{File: file, Line: line, Col: col, Rule: RuleCRLF, Severity: Warning,
			Message: "carriage returns in the file: the SHA1 depends on them; save with LF line endings"})
	}
	lines := strings.Split(string(luaLines(src)), "\n")
	if i := strings.IndexByte(text, '\n'); i >= 0 && strings.HasPrefix(text, "#!") {
		// Redis ends a shebang at the first "\n" only: a lone CR before it
		// is part of the shebang. Lua reads the rest from that "\n" on.
		rest := strings.Split(string(luaLines(src[i:])), "\n")
		lines = append([]string{strings.TrimSuffix(text[:i], "\r")}, rest[1:]...)
	}

	first := 0
	if strings.HasPrefix(lines[0], "#!") {
		s.Shebang = lines[0]
		if lib, ok := libraryName(lines[0]); ok {
			s.Library = lib
			if msg := checkLibraryShebang(lines[0]); msg != "" {
				add(1, RuleShebang, "%s", msg)
			}
		} else if msg := checkShebang(lines[0]); msg != "" {
			add(1, RuleShebang, "%s", msg)
		}
		first = 1
	}

	// A Functions library has no header: each function's annotations
	// are in the comment block above it (see functionDocs).
	inHeader := s.Library == ""
	tagSeen := false // an annotation was met: later free text is not doc
	for i := first; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		n := i + 1
		if m := ignoreMark.FindStringSubmatchIndex(lines[i]); m != nil {
			rules := ignoredRules(lines[i], m, func(col int, format string, a ...any) {
				diags = append(diags, Diagnostic{File: file, Line: n, Col: col, Rule: RuleHeader, Message: fmt.Sprintf(format, a...)})
			})
			if rules != nil {
				s.ignores[n] = rules
			}
			// The comment is no part of the header's text.
			line = strings.TrimSpace(ignoreText.ReplaceAllString(line, ""))
			if inHeader && strings.Trim(line, "-") == "" {
				s.HeaderEnd = n
				continue // a header line that holds nothing but the comment
			}
		}
		isComment := strings.HasPrefix(line, "--") && !strings.HasPrefix(line, "--[[") && !strings.HasPrefix(line, "--[=")
		if inHeader && (!(isComment || line == "") || s.included(n)) {
			inHeader = false // an included file's comments are no part of the header
		}
		m := tagLine.FindStringSubmatch(line)
		if !inHeader {
			if m != nil && slices.Contains(knownTags, m[1]) && s.Library == "" {
				add(n, RuleHeader, "@%s after the header has no effect: annotations belong in the comment block at the top of the file", m[1])
			}
			continue
		}
		s.HeaderEnd = n
		// The doc text is what comes before the first annotation: the
		// comments after them (a licence, notes kept from a migrated
		// script) are the script's own, not the Go doc's.
		if !isComment {
			if !tagSeen {
				s.Doc = append(s.Doc, "")
			}
			continue
		}
		if m == nil {
			if !tagSeen {
				s.Doc = append(s.Doc, strings.TrimSpace(strings.TrimLeft(line, "-")))
			}
			continue
		}
		tagSeen = true
		parseTag(s, n, m[1], strings.TrimSpace(m[2]), add)
	}
	s.Doc = trimDoc(s.Doc)
	if keyCount >= 0 && s.nameLine == 0 && len(s.Keys) > 0 && !s.VariadicKeys() && !s.badParams && len(s.Keys) != keyCount {
		add(s.Keys[0].Line, RuleHeader, "the file name says %d keys (-%d.lua) but the header declares %d @key", keyCount, keyCount, len(s.Keys))
	}
	if s.ReadOnly && s.Shebang != "" && !shebangFlag(s.Shebang, "no-writes") {
		add(s.roLine, RuleShebang, "@flag read-only needs flags=no-writes on the #!lua line: Redis refuses EVALSHA_RO for a script with a shebang that may write")
	}
	if !s.returnSet && s.Library == "" {
		add(1, RuleHeader, "missing @return: declare the reply, for example \"-- @return int\" or \"-- @return nil\"")
	}
	return s, diags
}

// ignoredRules reads the rules a luagen:ignore comment names, m being the
// submatch index of ignoreMark in line: an empty list for a comment that
// names none (it silences every rule), nil when it names only rules it
// cannot silence. It reports, at their column, the names that are no rule
// luagen:ignore can silence.
func ignoredRules(line string, m []int, report func(col int, format string, a ...any)) []string {
	if m[2] < 0 {
		return []string{}
	}
	var rules []string
	at := m[2]
	for _, r := range strings.Split(line[m[2]:m[3]], ",") {
		col := at + len(r) - len(strings.TrimLeft(r, " \t")) + 1
		at += len(r) + 1
		r = strings.TrimSpace(r)
		switch {
		case slices.Contains(silenceable(), r):
			rules = append(rules, r)
		case slices.Contains(unsilenceable, r):
			report(col, "luagen:ignore %s: %s findings cannot be silenced (rules that can: %s)", r, r, strings.Join(silenceable(), ", "))
		default:
			report(col, "luagen:ignore names unknown rule %q (rules that can be silenced: %s)", r, strings.Join(silenceable(), ", "))
		}
	}
	return rules
}

// unsilenceable are the rules whose findings luagen:ignore cannot drop.
var unsilenceable = []string{RuleSyntax, RuleFolder, RuleEncoding, RuleCRLF, RuleHeader, RuleName, RuleDuplicate, RuleShebang, RuleInclude}

// silenceable lists, in the order of Rules, the rules luagen:ignore drops.
func silenceable() []string {
	var names []string
	for _, r := range Rules {
		if !slices.Contains(unsilenceable, r.Name) {
			names = append(names, r.Name)
		}
	}
	return names
}

func parseTag(s *Script, n int, tag, rest string, add func(int, string, string, ...any)) {
	fields := strings.Fields(rest)
	switch tag {
	case "name":
		if len(fields) != 1 {
			add(n, RuleHeader, "@name takes one word: -- @name my_script")
			return
		}
		if s.nameLine != 0 {
			add(n, RuleHeader, "@name is declared twice (first at line %d)", s.nameLine)
			return
		}
		s.Name, s.nameLine = fields[0], n
	case "key", "arg":
		want := 2
		usage := "-- @key name description"
		if tag == "arg" {
			want, usage = 3, "-- @arg name type description"
		}
		if len(fields) < want {
			s.badParams = true
			add(n, RuleHeader, "@%s needs a name%s and a description: %s", tag, map[bool]string{true: ", a type"}[tag == "arg"], usage)
			return
		}
		p := Param{Name: fields[0], Type: "string", Line: n}
		if strings.HasSuffix(p.Name, "...") {
			p.Name, p.Variadic = strings.TrimSuffix(p.Name, "..."), true
		}
		doc := strings.TrimSpace(strings.TrimPrefix(rest, fields[0]))
		if tag == "arg" {
			p.Type = fields[1]
			if _, ok := ArgTypes[p.Type]; !ok {
				s.badParams = true
				add(n, RuleHeader, "@arg %s: unknown type %q (use string, int, float, bool or bytes)", p.Name, p.Type)
				return
			}
			doc = strings.TrimSpace(strings.TrimPrefix(doc, fields[1]))
		}
		p.Doc = doc
		list := &s.Keys
		if tag == "arg" {
			list = &s.Args
		}
		if len(*list) > 0 && (*list)[len(*list)-1].Variadic {
			s.badParams = true
			add(n, RuleHeader, "@%s %s follows a variadic %s: only the last one may take \"...\"", tag, p.Name, tag)
			return
		}
		if !validName(p.Name) {
			s.badParams = true
			add(n, RuleName, "@%s name %q gives no Go identifier: use letters, digits and underscores, starting with a letter", tag, p.Name)
			return
		}
		p.GoName = GoName(p.Name)
		for _, q := range *list {
			if q.GoName == p.GoName {
				s.badParams = true
				add(n, RuleDuplicate, "@%s %s: Go field %s is already declared at line %d", tag, p.Name, p.GoName, q.Line)
				return
			}
		}
		*list = append(*list, p)
	case "return":
		if s.returnSet {
			add(n, RuleHeader, "@return is declared twice")
			return
		}
		s.returnSet = true
		if len(fields) == 0 {
			add(n, RuleHeader, "@return needs a type: nil, int, string, status, bool or any, as []T for an array and T? when nil may come back")
			return
		}
		r, msg := parseReturn(fields[0])
		if msg != "" {
			add(n, RuleHeader, "@return %s: %s", fields[0], msg)
			return
		}
		r.Doc = strings.TrimSpace(strings.TrimPrefix(rest, fields[0]))
		s.Return, s.returnSet = r, true
	case "flag":
		if len(fields) == 0 {
			add(n, RuleHeader, "@flag needs a flag: read-only or idempotent")
			return
		}
		list, _, _ := strings.Cut(rest, "--") // a trailing comment is not a flag
		for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			switch f {
			case "read-only":
				s.ReadOnly, s.roLine = true, n
			case "idempotent":
				s.Idempotent = true
			case "":
			default:
				add(n, RuleHeader, "unknown flag %q (known: %s)", f, strings.Join(flagNames, ", "))
			}
		}
	case "prefix", "datakeys":
		if len(fields) == 0 {
			if tag == "prefix" {
				add(n, RuleHeader, "@prefix names the @key or @arg that carries a key prefix: -- @prefix queue_prefix")
			} else {
				add(n, RuleHeader, "@datakeys names the @key whose slot the keys read from data share: -- @datakeys queue [description]")
			}
			return
		}
		a := Annotation{Name: fields[0], Doc: strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), fields[0])), Line: n}
		if tag == "prefix" {
			s.Prefixes = append(s.Prefixes, a)
		} else {
			s.DataKeys = append(s.DataKeys, a)
		}
	case "include":
		// A directive expandIncludes did not take: it reported it.
	default:
		add(n, RuleHeader, "unknown annotation @%s (known: @%s)", tag, strings.Join(knownTags, " @"))
	}
}

func parseReturn(t string) (Return, string) {
	m := returnType.FindStringSubmatch(t)
	if m == nil {
		return Return{}, "not a type; write nil, int, string, status, bool or any, as []T for an array and T? when nil may come back"
	}
	r := Return{Array: m[1] != "", Base: m[2], Nullable: m[3] != ""}
	switch r.Base {
	case "int", "string", "status":
	case "nil":
		if r.Array || r.Nullable {
			return r, "nil stands alone"
		}
	case "bool", "any":
		if r.Nullable {
			return r, r.Base + " is never nullable: a nil reply is false for bool and nil for any"
		}
	default:
		return r, fmt.Sprintf("unknown type %q (use nil, int, string, status, bool or any)", r.Base)
	}
	return r, ""
}

// libraryName returns the name of a Redis Functions library's shebang,
// "#!lua name=mylib".
func libraryName(line string) (string, bool) {
	for _, f := range strings.Fields(strings.TrimPrefix(line, "#!")) {
		if v, ok := strings.CutPrefix(f, "name="); ok {
			return v, true
		}
	}
	return "", false
}

// checkLibraryShebang checks the first line of a Functions library: #!lua
// and name=, which FUNCTION LOAD requires; it takes no flags.
func checkLibraryShebang(line string) string {
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 || fields[0] != "lua" {
		return "a library's shebang must start with #!lua"
	}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		if k != "name" {
			return fmt.Sprintf("shebang option %q: a Functions library takes only name=...; set flags per function in redis.register_function", f)
		}
		if !validName(v) {
			return fmt.Sprintf("library name %q: use letters, digits and underscores, starting with a letter", v)
		}
	}
	return ""
}

func checkShebang(line string) string {
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 || fields[0] != "lua" {
		return "a shebang must start with #!lua"
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != "flags" {
			return fmt.Sprintf("shebang option %q: an EVAL script takes only flags=...", f)
		}
		for _, fl := range strings.Split(v, ",") {
			if fl != "" && !slices.Contains(shebangFlags, fl) {
				return fmt.Sprintf("unknown shebang flag %q (Redis knows %s)", fl, strings.Join(shebangFlags, ", "))
			}
		}
	}
	return ""
}

// shebangFlag reports whether a valid #!lua line sets flag.
func shebangFlag(line, flag string) bool {
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	for _, f := range fields[min(1, len(fields)):] {
		if v, ok := strings.CutPrefix(f, "flags="); ok && slices.Contains(strings.Split(v, ","), flag) {
			return true
		}
	}
	return false
}

// fileNameCount is a trailing "-N" of a file's base name: the number of
// keys the script takes, as some projects write it (moveToFinished-14.lua).
var fileNameCount = regexp.MustCompile(`-([0-9]+)$`)

// scriptName derives a script's name from its file's base name: a trailing
// "-N" key count is dropped (and returned; -1 when there is none), and each
// run of "-" or "." becomes "_", so add-job.lua and moveToFinished-14.lua
// give add_job and moveToFinished, Go names AddJob and MoveToFinished.
func scriptName(base string) (string, int) {
	count := -1
	if m := fileNameCount.FindStringSubmatchIndex(base); m != nil && m[0] > 0 {
		count, _ = strconv.Atoi(base[m[2]:m[3]])
		base = base[:m[0]]
	}
	var b strings.Builder
	sep := false
	for _, r := range base {
		if r == '-' || r == '.' {
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('_')
		}
		sep = false
		b.WriteRune(r)
	}
	return b.String(), count
}

// reserved are the names the shared generated file declares (Scripts,
// LoadAll, and for a library LibraryName, LibrarySource): a script whose
// Go names would take one of them takes the suffix Lua (scripts.lua gives
// ScriptsLua). The runtime's names (Retry, Error, Script) live in package
// luart, so retry.lua gives Retry.
var reserved = map[string]bool{
	"Scripts": true, "LoadAll": true, "LibraryName": true, "LibrarySource": true,
}

// checkNames validates script names and finds Go identifiers declared twice.
func checkNames(scripts []*Script) []Diagnostic {
	var diags []Diagnostic
	owner := map[string]*Script{}
	for _, s := range scripts {
		line := max(s.nameLine, 1)
		if !validName(s.Name) {
			how := "rename the file"
			if s.nameLine != 0 {
				how = "change @name"
			}
			diags = append(diags, Diagnostic{File: s.File, Line: line, Col: 1, Rule: RuleName,
				Message: fmt.Sprintf("script name %q gives no Go identifier: %s (letters, digits and underscores, starting with a letter)", s.Name, how)})
			continue
		}
		s.GoName = GoName(s.Name)
		if slices.ContainsFunc(s.identifiers(), func(id string) bool { return reserved[id] }) {
			// scripts.lua would declare Scripts, which the shared file
			// declares: its names take the suffix Lua (ScriptsLua).
			s.GoName += "Lua"
		}
		ids := s.identifiers()
		if d, ok := clash(s, ids, owner, line); ok {
			diags = append(diags, d) // one finding per script, not one per name
			continue
		}
		for _, id := range ids {
			owner[id] = s
		}
	}
	return diags
}

// clash finds the first of ids that an earlier script declares.
func clash(s *Script, ids []string, owner map[string]*Script, line int) (Diagnostic, bool) {
	for _, id := range ids {
		d := Diagnostic{File: s.File, Line: line, Col: 1, Rule: RuleDuplicate}
		if o, ok := owner[id]; ok {
			d.Message = fmt.Sprintf("script %s and %s (%s) both declare the Go name %s: rename one", s.Name, o.Name, o.File, id)
			return d, true
		}
	}
	return Diagnostic{}, false
}

// identifiers lists the package-level Go names generated for s.
func (s *Script) identifiers() []string {
	n := s.GoName
	if s.Library != "" {
		// Its functions' names are known after lint: <n><Function>.
		return []string{n + "LibraryName", n + "LibrarySource", "Load" + n + "Library"}
	}
	return []string{n, n + "Source", n + "SHA1", n + "Keys", n + "Args", n + "Script", n + "Cmd", n + "Result"}
}

func trimDoc(doc []string) []string {
	for len(doc) > 0 && doc[0] == "" {
		doc = doc[1:]
	}
	for len(doc) > 0 && doc[len(doc)-1] == "" {
		doc = doc[:len(doc)-1]
	}
	var out []string
	for _, d := range doc {
		if d == "" && len(out) > 0 && out[len(out)-1] == "" {
			continue
		}
		out = append(out, d)
	}
	return out
}

// offsetPosition returns the 1-based line, with line breaks counted as Lua
// counts them (see luaLines), and byte column of offset at in src.
func offsetPosition(src []byte, at int) (line, col int) {
	line, start := 1, 0
	for i := 0; i < at; i++ {
		c := src[i]
		if c != '\n' && c != '\r' {
			continue
		}
		if i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r') && src[i+1] != c {
			if i+1 == at {
				return line, at - start + 1 // the second byte of this line's break
			}
			i++ // \r\n or \n\r: one line break
		}
		line++
		start = i + 1
	}
	return line, at - start + 1
}

// luaLines returns src with each line break as Lua 5.1 (and gopher-lua)
// counts them, "\r\n", "\n\r", "\r" or "\n", written as one "\n". Lua reads
// every one of them as "\n", in long strings too, so the script means the
// same; the findings' line numbers then agree with the parser's and with
// the lines Redis reports. The SHA1 is always of the source as written.
func luaLines(src []byte) []byte {
	if bytes.IndexByte(src, '\r') < 0 {
		return src
	}
	out := make([]byte, 0, len(src))
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '\n' && c != '\r' {
			out = append(out, c)
			continue
		}
		if i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r') && src[i+1] != c {
			i++
		}
		out = append(out, '\n')
	}
	return out
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// functionDocs reads the annotations of a library's registered function:
// the comment block right above line (its local function, or its
// redis.register_function call). A block with @return makes the
// generated wrapper typed, with its @key and @arg structs.
func functionDocs(s *Script, fn *Function, line int) []Diagnostic {
	var diags []Diagnostic
	add := func(n int, rule, format string, a ...any) {
		diags = append(diags, Diagnostic{File: s.File, Line: n, Col: 1, Rule: rule, Message: fmt.Sprintf(format, a...)})
	}
	lines := strings.Split(string(luaLines(s.Source)), "\n")
	start := line - 1 // 1-based line of the first comment of the block
	for start > 1 {
		t := strings.TrimSpace(lines[start-2])
		if !strings.HasPrefix(t, "--") || strings.HasPrefix(t, "--[") {
			break
		}
		start--
	}
	f := &Script{Name: fn.Name, File: s.File, ignores: map[int][]string{}}
	for n := start; n < line; n++ {
		t := strings.TrimSpace(lines[n-1])
		if m := tagLine.FindStringSubmatch(t); m != nil && slices.Contains(knownTags, m[1]) {
			if m[1] == "name" {
				add(n, RuleHeader, "@name in a library: a function is named by redis.register_function")
				continue
			}
			parseTag(f, n, m[1], strings.TrimSpace(m[2]), add)
			continue
		}
		f.Doc = append(f.Doc, strings.TrimSpace(strings.TrimLeft(t, "-")))
	}
	if f.returnSet && !f.badParams {
		fn.Typed = true
		fn.Keys, fn.Args, fn.Return, fn.Doc = f.Keys, f.Args, f.Return, trimDoc(f.Doc)
		if f.ReadOnly && !fn.NoWrites {
			add(f.roLine, RuleHeader, "@flag read-only: register function %s with flags = {'no-writes'}, which FCALL_RO needs", fn.Name)
		}
	}
	return diags
}
