package gen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RuleInclude: an include directive that luagen cannot expand: a file that
// is missing or unreadable, an include cycle, or a directive it does not
// understand. Its findings cannot be silenced.
const RuleInclude = "include"

var (
	// includeLine is the include directive: a line that holds nothing but
	// "--", "@include" and a quoted path (.lua may be left out).
	includeLine = regexp.MustCompile(`^[ \t]*--+[ \t]*@include[ \t]+"([^"]+)"[ \t]*\r?$`)
	// includeLike is any comment line that starts with "@include".
	includeLike = regexp.MustCompile(`^[ \t]*--+[ \t]*@include\b`)
)

// origin is where a line of an expanded script was written.
type origin struct {
	file string
	line int
}

// expandIncludes replaces each include directive of a script's file by the
// text of the file it names (expanded in turn), relative to the folder of
// the file that holds the directive. A file is included once per script: a
// second directive for it is dropped, as a Lua "require" would load it
// once. It returns the expanded text, where each of its lines was written
// (nil when the file includes nothing), and the findings about the
// directives. The text is what Redis runs: the SHA1 and the generated
// source are of it.
func expandIncludes(fsys fs.FS, file string, src []byte) ([]byte, []origin, []Diagnostic) {
	if !bytes.Contains(src, []byte("@include")) {
		return src, nil, nil
	}
	x := &expander{fsys: fsys, done: map[string]bool{file: true}}
	x.expand(file, src, []string{file})
	if !x.included {
		return src, nil, x.diags
	}
	return x.out.Bytes(), x.origins, x.diags
}

type expander struct {
	fsys     fs.FS
	out      bytes.Buffer
	origins  []origin
	diags    []Diagnostic
	done     map[string]bool
	included bool
}

func (x *expander) expand(file string, src []byte, stack []string) {
	lines := strings.SplitAfter(string(src), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, line := range lines {
		n := i + 1
		m := includeLine.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m == nil {
			if includeLike.MatchString(line) {
				x.add(file, n, "include directive not understood: write it alone on its line as -- @include \"path/to/file.lua\" (relative to this file's folder)")
			}
			x.emit(file, n, line)
			continue
		}
		target := m[1]
		if !strings.HasSuffix(target, ".lua") {
			target += ".lua"
		}
		name := path.Join(path.Dir(file), target)
		if !fs.ValidPath(name) || strings.HasPrefix(target, "/") {
			x.add(file, n, "@include %s: the path leaves the module (or is absolute): include files of the module by a relative path", strconv.Quote(m[1]))
			continue
		}
		if i := slices.Index(stack, name); i >= 0 {
			x.add(file, n, "@include %s: include cycle %s", strconv.Quote(m[1]), strings.Join(append(slices.Clone(stack[i:]), name), " -> "))
			continue
		}
		if x.done[name] {
			continue // included once per script
		}
		body, err := fs.ReadFile(x.fsys, name)
		if err != nil {
			msg := err.Error()
			if errors.Is(err, fs.ErrNotExist) {
				msg = name + " does not exist"
			}
			x.add(file, n, "@include %s: %s", strconv.Quote(m[1]), msg)
			continue
		}
		if bytes.HasPrefix(body, []byte("#!")) {
			x.add(file, n, "@include %s: %s starts with #!, which only the first line of a script may hold", strconv.Quote(m[1]), name)
			continue
		}
		x.done[name] = true
		x.included = true
		x.expand(name, body, append(stack, name))
		if len(body) > 0 && body[len(body)-1] != '\n' {
			x.out.WriteByte('\n') // the included file's last line ends here
		}
	}
}

func (x *expander) emit(file string, n int, line string) {
	x.out.WriteString(line)
	x.origins = append(x.origins, origin{file, n})
}

func (x *expander) add(file string, n int, format string, a ...any) {
	x.diags = append(x.diags, Diagnostic{File: file, Line: n, Col: 1, Rule: RuleInclude, Message: fmt.Sprintf(format, a...)})
}

// place moves a finding on a line of s's expanded text to the file and line
// where that line was written.
func (s *Script) place(d Diagnostic) Diagnostic {
	if s.origins == nil || d.File != s.File || d.Line < 1 {
		return d
	}
	if d.Line <= len(s.origins) {
		o := s.origins[d.Line-1]
		d.File, d.Line = o.file, o.line
	}
	return d
}

// included reports whether line n of s's expanded text comes from an
// included file.
func (s *Script) included(n int) bool {
	return s.origins != nil && n >= 1 && n <= len(s.origins) && s.origins[n-1].file != s.File
}

// Included reports whether s's text holds included files.
func (s *Script) Included() bool { return s.origins != nil }
