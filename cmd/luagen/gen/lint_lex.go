package gen

// The AST of gopher-lua carries only line numbers. To give findings a column,
// the linter scans the source a second time with this small tokenizer and
// matches the names it meets in the AST, in source order, to the identifier
// tokens of the file.

type luaTokKind uint8

const (
	tokIdent luaTokKind = iota
	tokKeyword
	tokNumber
	tokString
	tokPunct
)

type luaToken struct {
	kind luaTokKind
	text string // the bytes of the token (strings keep their quotes)
	line int    // 1-based
	col  int    // 1-based byte column
	// field marks an identifier that names no variable: the name after "."
	// or ":", a key of a table constructor ({name = v}), a goto target or a
	// label name.
	field bool
}

var luaKeywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true,
	"end": true, "false": true, "for": true, "function": true, "goto": true,
	"if": true, "in": true, "local": true, "nil": true, "not": true, "or": true,
	"repeat": true, "return": true, "then": true, "true": true, "until": true,
	"while": true,
}

// lexLua splits src into tokens, skipping white space and comments. It never
// fails: on malformed input it returns the tokens it could read.
func lexLua(src []byte) []luaToken {
	toks := make([]luaToken, 0, len(src)/3+16)
	line, lineStart := 1, 0
	i := 0
	n := len(src)
	// newlines counts the line breaks of src[from:to] and moves the line
	// counters past them.
	newlines := func(from, to int) {
		for j := from; j < to; j++ {
			if src[j] == '\n' {
				line++
				lineStart = j + 1
			}
		}
	}
	// longBracket reports the level of a long bracket "[==[" at i, or -1.
	longBracket := func(i int) int {
		if i >= n || src[i] != '[' {
			return -1
		}
		j := i + 1
		for j < n && src[j] == '=' {
			j++
		}
		if j < n && src[j] == '[' {
			return j - i - 1
		}
		return -1
	}
	// skipLong returns the index after the "]==]" closing a long bracket of
	// the given level whose opening ends before i.
	skipLong := func(i, level int) int {
		for j := i; j < n; j++ {
			if src[j] != ']' {
				continue
			}
			k := j + 1
			for k < n && src[k] == '=' {
				k++
			}
			if k < n && src[k] == ']' && k-j-1 == level {
				return k + 1
			}
		}
		return n
	}
	for i < n {
		c := src[i]
		start, col := i, i-lineStart+1
		tokLine := line
		switch {
		case c == '\n':
			line++
			lineStart = i + 1
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && i+1 < n && src[i+1] == '-':
			if lvl := longBracket(i + 2); lvl >= 0 {
				end := skipLong(i+2+lvl+2, lvl)
				newlines(i, end)
				i = end
				continue
			}
			for i < n && src[i] != '\n' {
				i++
			}
			continue
		case c == '[' && longBracket(i) >= 0:
			lvl := longBracket(i)
			end := skipLong(i+lvl+2, lvl)
			newlines(i, end)
			i = end
			toks = append(toks, luaToken{kind: tokString, text: string(src[start:end]), line: tokLine, col: col})
			continue
		case c == '"' || c == '\'':
			i++
			for i < n && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' && i+1 < n {
					i++
					if src[i] == '\n' {
						line++
						lineStart = i + 1
					}
				}
				i++
			}
			if i < n && src[i] == c {
				i++
			}
			toks = append(toks, luaToken{kind: tokString, text: string(src[start:i]), line: tokLine, col: col})
			continue
		case luaDigit(c) || (c == '.' && i+1 < n && luaDigit(src[i+1])):
			// The numeral ends where Lua 5.1's lexer ends it (read_numeral):
			// digits and dots, an exponent sign right after an E, then
			// letters, digits and underscores. luaNumeral says whether
			// the text is a number.
			for i < n && (luaDigit(src[i]) || src[i] == '.') {
				i++
			}
			if i < n && (src[i] == 'e' || src[i] == 'E') {
				i++
				if i < n && (src[i] == '+' || src[i] == '-') {
					i++
				}
			}
			for i < n && (luaDigit(src[i]) || luaLetter(src[i])) {
				i++
			}
			toks = append(toks, luaToken{kind: tokNumber, text: string(src[start:i]), line: tokLine, col: col})
			continue
		case luaLetter(c):
			for i < n && (luaLetter(src[i]) || luaDigit(src[i])) {
				i++
			}
			word := string(src[start:i])
			kind := tokIdent
			if luaKeywords[word] {
				kind = tokKeyword
			}
			toks = append(toks, luaToken{kind: kind, text: word, line: tokLine, col: col})
			continue
		}
		// Punctuation: the longest of the multi-byte operators first.
		size := 1
		for _, op := range []string{"...", "..", "::", "==", "~=", "<=", ">="} {
			if i+len(op) <= n && string(src[i:i+len(op)]) == op {
				size = len(op)
				break
			}
		}
		toks = append(toks, luaToken{kind: tokPunct, text: string(src[i : i+size]), line: tokLine, col: col})
		i += size
	}
	luaMarkFields(toks)
	return toks
}

// luaMarkFields sets luaToken.field on the identifiers that name no variable.
func luaMarkFields(toks []luaToken) {
	// stack of the open brackets and blocks: "(", "[", "{" or "block".
	var stack []string
	for i := range toks {
		t := &toks[i]
		switch t.kind {
		case tokPunct:
			switch t.text {
			case "(", "[", "{":
				stack = append(stack, t.text)
			case ")", "]", "}":
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			}
		case tokKeyword:
			switch t.text {
			case "function", "do", "if", "repeat":
				stack = append(stack, "block")
			case "end", "until":
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			}
		case tokIdent:
			if i == 0 {
				continue
			}
			prev := toks[i-1]
			switch {
			case prev.kind == tokPunct && (prev.text == "." || prev.text == ":"):
				t.field = true
			case prev.kind == tokKeyword && prev.text == "goto":
				t.field = true
			case prev.kind == tokPunct && prev.text == "::" && i+1 < len(toks) && toks[i+1].text == "::":
				t.field = true
			case prev.kind == tokPunct && (prev.text == "{" || prev.text == "," || prev.text == ";") &&
				i+1 < len(toks) && toks[i+1].kind == tokPunct && toks[i+1].text == "=" &&
				len(stack) > 0 && stack[len(stack)-1] == "{":
				t.field = true
			}
		}
	}
}

// luaNumeral reports whether the text of a numeral token is a number to
// Lua 5.1 (luaO_str2d): the whole text must be what C's strtod reads, a
// decimal with an optional exponent or, as C99 and glibc read it, a 0x
// hexadecimal with an optional fraction and p exponent. Redis's Lua rejects
// any other numeral ("1e", "1..2", "12abc", "0x") as a malformed number, at
// compile time; gopher-lua's parser takes some of them.
func luaNumeral(s string) bool {
	digit, expo := luaDigit, byte('e')
	i := 0
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		digit, expo, i = luaHexDigit, 'p', 2
	}
	mantissa := 0
	for i < len(s) && digit(s[i]) {
		i, mantissa = i+1, mantissa+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && digit(s[i]) {
			i, mantissa = i+1, mantissa+1
		}
	}
	if mantissa == 0 {
		return false
	}
	if i < len(s) && (s[i]|0x20) == expo {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && luaDigit(s[k]) {
			k++
		}
		if k > j { // strtod takes an exponent only with digits
			i = k
		}
	}
	return i == len(s)
}

func luaDigit(c byte) bool    { return c >= '0' && c <= '9' }
func luaHexDigit(c byte) bool { return luaDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
func luaLetter(c byte) bool   { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
