package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// writeFindings prints findings in a machine-readable format on w:
//
//   - json: an array of {file, line, col, rule, severity, message}
//   - sarif: a SARIF 2.1.0 log with one run of the tool luagen
//   - github: one GitHub Actions workflow command a finding
//     (::error file=...,line=...,col=...,title=rule::message)
func writeFindings(w io.Writer, format string, ds []gen.Diagnostic) error {
	switch format {
	case "json":
		type finding struct {
			File     string `json:"file"`
			Line     int    `json:"line,omitempty"`
			Col      int    `json:"col,omitempty"`
			Rule     string `json:"rule"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
		}
		out := make([]finding, 0, len(ds))
		for _, d := range ds {
			out = append(out, finding{d.File, d.Line, d.Col, d.Rule, d.Severity.String(), d.Message})
		}
		return encodeJSON(w, out)
	case "sarif":
		return encodeJSON(w, sarifLog(ds))
	case "github":
		for _, d := range ds {
			level := "error"
			if d.Severity == gen.Warning {
				level = "warning"
			}
			props := "file=" + ghProp(d.File)
			if d.Line > 0 {
				props += fmt.Sprintf(",line=%d", d.Line)
				if d.Col > 0 {
					props += fmt.Sprintf(",col=%d", d.Col)
				}
			}
			props += ",title=" + ghProp("luagen "+d.Rule)
			if _, err := fmt.Fprintf(w, "::%s %s::%s\n", level, props, ghData(d.Message)); err != nil {
				return err
			}
		}
	}
	return nil
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ghData and ghProp escape a workflow command's message and properties.
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghProp(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// sarifLog builds a minimal SARIF 2.1.0 log: the rules luagen knows, and a
// result per finding with its physical location.
func sarifLog(ds []gen.Diagnostic) map[string]any {
	var rules []map[string]any
	for _, r := range gen.Rules {
		level := "error"
		if r.Severity == gen.Warning {
			level = "warning"
		}
		rules = append(rules, map[string]any{
			"id":                   r.Name,
			"shortDescription":     map[string]any{"text": r.Doc},
			"defaultConfiguration": map[string]any{"level": level},
		})
	}
	results := make([]map[string]any, 0, len(ds))
	for _, d := range ds {
		level := "error"
		if d.Severity == gen.Warning {
			level = "warning"
		}
		region := map[string]any{}
		if d.Line > 0 {
			region["startLine"] = d.Line
			if d.Col > 0 {
				region["startColumn"] = d.Col
			}
		}
		loc := map[string]any{"artifactLocation": map[string]any{"uri": d.File}}
		if len(region) > 0 {
			loc["region"] = region
		}
		results = append(results, map[string]any{
			"ruleId":    d.Rule,
			"level":     level,
			"message":   map[string]any{"text": d.Message},
			"locations": []any{map[string]any{"physicalLocation": loc}},
		})
	}
	return map[string]any{
		"$schema": "https://json.schemastore.org/sarif-2.1.0.json",
		"version": "2.1.0",
		"runs": []any{map[string]any{
			"tool":    map[string]any{"driver": map[string]any{"name": "luagen", "informationUri": "https://github.com/lualock/lualock", "rules": rules}},
			"results": results,
		}},
	}
}
