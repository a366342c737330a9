package gen

import (
	"strings"
)

// Config says where the scripts are and what package to generate.
type Config struct {
	// Src is the folder of .lua files inside the fs.FS given to Lint,
	// Parse and Generate. It also prefixes every path in diagnostics and in
	// generated comments, so pass it relative to the module root. Default "lua".
	Src string
	// Package is the Go package name of the generated files. Default "generated".
	Package string
	// Rules and Overrides change the severity of lint rules, for every
	// script and for the files a pattern matches (see FileConfig).
	// Findings of a rule that is "off" are dropped.
	Rules     map[string]string
	Overrides []Override
	// KeyPrefixArgs names, for every script, the args or keys that carry
	// a key prefix, by @arg or @key name or as "ARGV[n]", "KEYS[n]":
	// prefix .. suffix (or a local holding the prefix, concatenated) is
	// then a key for the non-key-argument rule. Use it for keys that a
	// script derives from a prefix with a hash tag, such as "{queue}:",
	// so that they share the slot of the declared keys. Overrides (per
	// file pattern) and @prefix (per script) declare more.
	KeyPrefixArgs []string
	// CheckKeyPrefixes makes the generated functions check, before
	// sending, that every string arg declared a key prefix holds a hash
	// tag and that every key of the call has the same one (an error
	// wrapping luart.ErrKeyPrefix otherwise). Off by default: standalone
	// Redis accepts any prefix.
	CheckKeyPrefixes bool
	// Library, when set, builds every script into one Redis Functions
	// library of that name instead of EVALSHA scripts (see Generate).
	Library string
	// Redis, when set ("6.2", "7.0.15"), is the oldest Redis version the
	// scripts must run on: commands, subcommands and options newer than
	// it are redis-version findings, and below 7.0 a read-only script
	// runs with EVALSHA (EVALSHA_RO is 7.0's). Empty: no version is
	// checked, and read-only scripts run with EVALSHA_RO.
	Redis string
}

// target returns the parsed Redis version, nil when none is set or it
// does not parse (LoadFileConfig refuses a bad one).
func (c Config) target() *RedisVersion {
	if c.Redis == "" {
		return nil
	}
	v, err := ParseRedisVersion(c.Redis)
	if err != nil {
		return nil
	}
	return &v
}

// evalshaRO reports whether read-only scripts run with EVALSHA_RO: the
// target Redis, when set, is 7.0 or later.
func (c Config) evalshaRO() bool {
	t := c.target()
	return t == nil || !t.Less(RedisVersion{7, 0, 0})
}

// FromFile returns c with the settings of a luagen.json: the rules,
// overrides, key prefixes and library. Src and Package are left to the
// caller, which resolves them against the file's folder.
func (c Config) FromFile(fc *FileConfig) Config {
	if fc == nil {
		return c
	}
	c.Rules, c.Overrides, c.KeyPrefixArgs, c.Library, c.Redis = fc.Rules, fc.Overrides, fc.KeyPrefixArgs, fc.Library, fc.Redis
	c.CheckKeyPrefixes = fc.CheckKeyPrefixes
	return c
}

func (c Config) withDefaults() Config {
	if c.Src == "" {
		c.Src = "lua"
	}
	if c.Package == "" {
		c.Package = "generated"
	}
	return c
}

// ArgTypes lists the types an @arg may declare, each with the Go type of its
// field in the generated Args struct.
var ArgTypes = map[string]string{
	"string": "string",
	"int":    "int64",
	"float":  "float64",
	"bool":   "bool",
	"bytes":  "[]byte",
}

// Param is one declared KEYS or ARGV entry.
type Param struct {
	Name     string // as declared, snake_case
	GoName   string // exported Go field name
	Type     string // one of ArgTypes; "string" for keys
	Variadic bool   // declared with "...": takes every remaining position
	Doc      string // the one-line description
	Line     int    // line of the declaration
}

// Return is the declared shape of a script's reply.
type Return struct {
	Base     string // nil, int, string, status, bool or any
	Array    bool   // an array of Base
	Nullable bool   // Base (or each element) may be nil
	Doc      string
}

// String formats the return as written in a header: "[]int?", "status".
func (r Return) String() string {
	s := r.Base
	if r.Array {
		s = "[]" + s
	}
	if r.Nullable {
		s += "?"
	}
	return s
}

// GoType is the Go type the generated wrapper returns, "" for nil.
func (r Return) GoType() string {
	var t string
	switch r.Base {
	case "nil":
		return ""
	case "int":
		t = "int64"
	case "string", "status":
		t = "string"
	case "bool":
		t = "bool"
	case "any":
		t = "any"
	}
	if r.Nullable {
		t = "*" + t
	}
	if r.Array {
		t = "[]" + t
	}
	return t
}

// Script is one parsed .lua file.
type Script struct {
	Name       string   // snake_case script name: @name, or the file's base name
	GoName     string   // exported Go name derived from Name
	File       string   // path of the file, Config.Src joined with its name
	Source     []byte   // the file, byte for byte, with its includes expanded
	SHA1       string   // hex SHA1 of Source, what EVALSHA takes
	Doc        []string // free text of the header, one entry per line ("" separates paragraphs)
	Keys       []Param
	Args       []Param
	Return     Return
	ReadOnly   bool // @flag read-only: run with EVALSHA_RO
	Idempotent bool // @flag idempotent: safe to retry on a transient error
	Shebang    string
	// Library is the name of a Redis Functions library ("#!lua
	// name=mylib"): the file is loaded with FUNCTION LOAD and its
	// functions, registered with redis.register_function, run with FCALL.
	Library string
	// Functions are the functions a library registers, found by lint.
	Functions []Function
	HeaderEnd int // last line of the header comment block
	// Prefixes are the @prefix annotations: @key or @arg names (or
	// KEYS[n], ARGV[n]) whose value, concatenated, gives a key of the
	// same slot (a hash-tagged "{queue}:" prefix).
	Prefixes []Annotation
	// DataKeys are the @datakeys annotations: the script reaches keys it
	// reads from stored data (ids in a zset, a key in a hash field), in
	// the slot of the named @key.
	DataKeys []Annotation

	ignores   map[int][]string // line -> silenced rules; an empty slice silences all
	origins   []origin         // where each line of Source was written; nil without includes
	nameLine  int
	roLine    int  // line of @flag read-only
	returnSet bool // @return was declared (even if it was rejected)
	badParams bool // an @key or @arg was rejected: positions are unknown
}

// Annotation is a header annotation that names a key or an arg.
type Annotation struct {
	Name string // the @key or @arg name, or KEYS[n] / ARGV[n]
	Doc  string // the rest of the line
	Line int
}

// Function is one function a Functions library registers.
type Function struct {
	Name     string // as registered
	GoName   string
	NoWrites bool // registered with the no-writes flag: run with FCALL_RO
	// Typed: the comment block above the function declares @return (and
	// its @key and @arg), so the generated wrapper is typed.
	Typed  bool
	Keys   []Param
	Args   []Param
	Return Return
	Doc    []string
}

// VariadicKeys reports whether the last key takes every remaining KEYS entry.
func (s *Script) VariadicKeys() bool { return len(s.Keys) > 0 && s.Keys[len(s.Keys)-1].Variadic }

// VariadicArgs reports whether the last arg takes every remaining ARGV entry.
func (s *Script) VariadicArgs() bool { return len(s.Args) > 0 && s.Args[len(s.Args)-1].Variadic }

// silenced reports whether a luagen:ignore comment on line covers rule.
func (s *Script) silenced(line int, rule string) bool {
	rules, ok := s.ignores[line]
	if !ok {
		return false
	}
	if len(rules) == 0 {
		return true
	}
	for _, r := range rules {
		if r == rule {
			return true
		}
	}
	return false
}

// initialisms are the words that GoName spells in capitals.
var initialisms = map[string]string{
	"acl": "ACL", "api": "API", "cpu": "CPU", "db": "DB", "eof": "EOF",
	"http": "HTTP", "id": "ID", "ids": "IDs", "ip": "IP", "json": "JSON",
	"lru": "LRU", "ms": "MS", "ok": "OK", "ro": "RO", "sha1": "SHA1",
	"sql": "SQL", "ttl": "TTL", "ttls": "TTLs", "uid": "UID", "url": "URL",
	"utf8": "UTF8", "uuid": "UUID",
}

// GoName turns a snake_case name into an exported Go identifier, spelling the
// words of the initialism table in capitals: lease_ms -> LeaseMS.
func GoName(name string) string {
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		if w == "" {
			continue
		}
		if up, ok := initialisms[strings.ToLower(w)]; ok {
			b.WriteString(up)
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// validName reports whether name can become a Go identifier through GoName:
// ASCII letters, digits and underscores, starting with a letter.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r == '_' || (r >= '0' && r <= '9'):
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return strings.Trim(name, "_") != ""
}
