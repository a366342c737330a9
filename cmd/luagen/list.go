package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// parseScripts parses the scripts, printing every finding, and returns them
// sorted by name, or nil when a finding is an error.
func (c *cli) parseScripts(w *workspace) []*gen.Script {
	scripts, ds := gen.Parse(w.fsys, w.cfg)
	c.printDiags(w, ds)
	if gen.HasErrors(ds) {
		c.errorf("%s", summary(ds))
		return nil
	}
	slices.SortFunc(scripts, func(a, b *gen.Script) int { return strings.Compare(a.Name, b.Name) })
	return scripts
}

// lintedScripts is parseScripts for a command that acts on Redis: it also
// runs the lint rules and refuses on any error (a script that writes a
// global or reaches a key outside KEYS must not be deployed).
func (c *cli) lintedScripts(w *workspace) []*gen.Script {
	ds := gen.Lint(w.fsys, w.cfg)
	c.printDiags(w, ds)
	if gen.HasErrors(ds) {
		c.errorf("%s", summary(ds))
		return nil
	}
	scripts, _ := gen.Parse(w.fsys, w.cfg)
	slices.SortFunc(scripts, func(a, b *gen.Script) int { return strings.Compare(a.Name, b.Name) })
	return scripts
}

// jsonScript is one element of list -json. Its fields are a stable format.
type jsonScript struct {
	Name       string      `json:"name"`
	GoName     string      `json:"go_name"`
	File       string      `json:"file"`
	SHA1       string      `json:"sha1"`
	Keys       []jsonParam `json:"keys"`
	Args       []jsonParam `json:"args"`
	Return     string      `json:"return"`
	ReadOnly   bool        `json:"read_only"`
	Idempotent bool        `json:"idempotent"`
	Library    string      `json:"library,omitempty"` // a Functions library's name
	// KeyPrefixes are the keys and args that carry a key prefix
	// (luagen.json and @prefix); DataKeys the @datakeys annotations.
	KeyPrefixes []string       `json:"key_prefixes,omitempty"`
	DataKeys    []jsonDataKeys `json:"data_keys,omitempty"`
}

// jsonDataKeys is an @datakeys annotation: the script reaches keys read
// from data, in the slot of the key Key.
type jsonDataKeys struct {
	Key string `json:"key"`
	Doc string `json:"doc"`
}

type jsonParam struct {
	Name     string `json:"name"`
	Type     string `json:"type,omitempty"` // args only
	Variadic bool   `json:"variadic"`
	Doc      string `json:"doc"`
}

// list prints the scripts as a table or, with asJSON, a JSON array. File is
// the path recorded in the generated code (relative to the module root).
func (c *cli) list(w *workspace, asJSON bool) int {
	scripts := c.parseScripts(w)
	if scripts == nil {
		return 1
	}
	if asJSON {
		out := make([]jsonScript, 0, len(scripts))
		for _, s := range scripts {
			j := jsonScript{
				Name: s.Name, GoName: s.GoName, File: s.File, SHA1: s.SHA1,
				Keys: []jsonParam{}, Args: []jsonParam{},
				Return: s.Return.String(), ReadOnly: s.ReadOnly, Idempotent: s.Idempotent,
				Library: s.Library, KeyPrefixes: gen.KeyPrefixes(s, w.cfg),
			}
			for _, d := range s.DataKeys {
				j.DataKeys = append(j.DataKeys, jsonDataKeys{Key: d.Name, Doc: d.Doc})
			}
			for _, k := range s.Keys {
				j.Keys = append(j.Keys, jsonParam{Name: k.Name, Variadic: k.Variadic, Doc: k.Doc})
			}
			for _, a := range s.Args {
				j.Args = append(j.Args, jsonParam{Name: a.Name, Type: a.Type, Variadic: a.Variadic, Doc: a.Doc})
			}
			out = append(out, j)
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			c.errorf("%v", err)
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFILE\tSHA1\tKEYS\tARGS\tRETURN\tFLAGS")
	for _, s := range scripts {
		var keys, args, flags []string
		for _, k := range s.Keys {
			keys = append(keys, k.Name+variadic(k.Variadic, "..."))
		}
		for _, a := range s.Args {
			args = append(args, a.Name+" "+variadic(a.Variadic, "...")+a.Type)
		}
		if s.Library != "" {
			flags = append(flags, "library="+s.Library)
		}
		if s.ReadOnly {
			flags = append(flags, "read-only")
		}
		if s.Idempotent {
			flags = append(flags, "idempotent")
		}
		for _, p := range gen.KeyPrefixes(s, w.cfg) {
			flags = append(flags, "prefix="+p)
		}
		for _, d := range s.DataKeys {
			flags = append(flags, "datakeys="+d.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.File, s.SHA1,
			orDash(strings.Join(keys, ", ")), orDash(strings.Join(args, ", ")),
			s.Return.String(), orDash(strings.Join(flags, ",")))
	}
	if err := tw.Flush(); err != nil {
		c.errorf("%v", err)
		return 1
	}
	return 0
}

func variadic(v bool, s string) string {
	if v {
		return s
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
