package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// ConfigFileName is the name of luagen's configuration file, looked for at
// the module root (see cmd/luagen).
const ConfigFileName = "luagen.json"

// FileConfig is the content of luagen.json. Every field is optional; an
// unknown field is an error, so that a misspelt key is not silently
// ignored. Its JSON schema is docs/luagen.schema.json.
//
//	{
//	  "src": "lua",
//	  "out": "generated",
//	  "package": "generated",
//	  "rules": {"unused-key": "warning", "shadowed-local": "off"},
//	  "overrides": [
//	    {"files": "lua/queue/*.lua", "rules": {"non-key-argument": "warning"}}
//	  ],
//	  "keyPrefixArgs": ["prefix"],
//	  "library": "mylib",
//	  "redis": "6.2"
//	}
type FileConfig struct {
	// Src, Out and Package are the defaults of -src, -out and -pkg for
	// every subcommand, relative to the folder of the file.
	Src     string `json:"src,omitempty"`
	Out     string `json:"out,omitempty"`
	Package string `json:"package,omitempty"`
	// Rules sets the severity of rules for every script: "off",
	// "warning" or "error".
	Rules map[string]string `json:"rules,omitempty"`
	// Overrides set severities for the files a pattern matches, later
	// ones winning; see Override.
	Overrides []Override `json:"overrides,omitempty"`
	// KeyPrefixArgs names the @arg or @key (by name, or as ARGV[n],
	// KEYS[n]) that carry a key prefix in every script: prefix .. suffix
	// is then a key (see Config). Overrides scope them to files.
	KeyPrefixArgs []string `json:"keyPrefixArgs,omitempty"`
	// CheckKeyPrefixes adds the run-time hash-tag check of key-prefix
	// args to the generated functions (see Config.CheckKeyPrefixes).
	CheckKeyPrefixes bool `json:"checkKeyPrefixes,omitempty"`
	// Library, when set, builds every script of Src into one Redis
	// Functions library of that name (see Config.Library).
	Library string `json:"library,omitempty"`
	// Redis is the oldest Redis version the scripts must run on ("6.2"),
	// see Config.Redis.
	Redis string `json:"redis,omitempty"`
}

// Override sets rule severities and key prefixes for some files.
type Override struct {
	// Files is a path.Match pattern on the path relative to the module
	// root ("lua/queue/*.lua"), or a folder ("lua/queue/"), which
	// matches every file under it.
	Files string            `json:"files"`
	Rules map[string]string `json:"rules,omitempty"`
	// KeyPrefixArgs are key prefixes (as FileConfig.KeyPrefixArgs) of
	// these files only.
	KeyPrefixArgs []string `json:"keyPrefixArgs,omitempty"`
}

// ParseFileConfig reads luagen.json strictly: unknown fields, unknown
// rules, unknown severities, rules whose severity cannot change and bad
// patterns are errors, which do not name the file.
func ParseFileConfig(r io.Reader) (*FileConfig, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var fc FileConfig
	if err := dec.Decode(&fc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	if err := checkRules(fc.Rules, "rules"); err != nil {
		return nil, err
	}
	if fc.Redis != "" {
		if _, err := ParseRedisVersion(fc.Redis); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	for i, o := range fc.Overrides {
		where := fmt.Sprintf("overrides[%d]", i)
		if o.Files == "" {
			return nil, fmt.Errorf("%s: files is missing", where)
		}
		if _, err := path.Match(o.Files, ""); err != nil {
			return nil, fmt.Errorf("%s: files %q: %w", where, o.Files, err)
		}
		if err := checkRules(o.Rules, where+".rules"); err != nil {
			return nil, err
		}
	}
	return &fc, nil
}

// LoadFileConfig is ParseFileConfig of a file's bytes.
func LoadFileConfig(b []byte) (*FileConfig, error) { return ParseFileConfig(bytes.NewReader(b)) }

func checkRules(rules map[string]string, where string) error {
	for name, sev := range rules {
		switch {
		case slices.Contains(unsilenceable, name):
			return fmt.Errorf("%s: the severity of rule %s cannot change", where, name)
		case !slices.Contains(silenceable(), name):
			return fmt.Errorf("%s: unknown rule %q (rules: %s)", where, name, strings.Join(silenceable(), ", "))
		case sev != "off" && sev != "warning" && sev != "error":
			return fmt.Errorf("%s: rule %s: severity %q is not off, warning or error", where, name, sev)
		}
	}
	return nil
}

// severity applies the configured severities to a finding: it returns the
// finding with its severity, and false when the rule is off for its file.
func (c Config) severity(d Diagnostic) (Diagnostic, bool) {
	if slices.Contains(unsilenceable, d.Rule) {
		return d, true
	}
	sev, ok := c.Rules[d.Rule]
	for _, o := range c.Overrides {
		if s, set := o.Rules[d.Rule]; set && o.matches(d.File) {
			sev, ok = s, true
		}
	}
	if !ok {
		return d, true
	}
	switch sev {
	case "off":
		return d, false
	case "warning":
		d.Severity = Warning
	case "error":
		d.Severity = Error
	}
	return d, true
}

func (o Override) matches(file string) bool {
	if strings.HasSuffix(o.Files, "/") {
		return strings.HasPrefix(file, o.Files)
	}
	ok, _ := path.Match(o.Files, file)
	return ok
}
