package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// render lints the scripts, printing every finding, and generates the files
// in memory. It returns the files, or nil and the exit status.
func (c *cli) render(w *workspace) (map[string][]byte, int) {
	files, ds, err := gen.GenerateLint(w.fsys, w.cfg)
	c.printDiags(w, ds)
	if gen.HasErrors(ds) {
		c.errorf("%s", summary(ds))
		return nil, 1
	}
	if err != nil {
		c.errorf("%v", err)
		return nil, 1
	}
	return files, 0
}

// checkOutDir reports whether the output folder is a folder or missing,
// and prints why not otherwise.
func (c *cli) checkOutDir(w *workspace) bool {
	fi, err := os.Stat(w.outDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true
	case err != nil:
		c.errorf("cannot use output folder %s: %v", w.show(w.outDir), underlying(err))
		return false
	case !fi.IsDir():
		c.errorf("cannot use output folder %s: not a folder", w.show(w.outDir))
		return false
	}
	return true
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// generate writes the generated files that changed and removes orphans.
func (c *cli) generate(w *workspace) int {
	if !c.checkOutDir(w) {
		return 1
	}
	files, code := c.render(w)
	if files == nil {
		return code
	}
	var changed []string
	for _, name := range sortedNames(files) {
		old, err := os.ReadFile(w.outFile(name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			c.errorf("cannot read %s: %v", w.show(w.outFile(name)), underlying(err))
			return 1
		case bytes.Equal(old, files[name]):
			continue
		case !gen.IsGenerated(old):
			c.errorf("%s exists and was not written by luagen: move it away, or set -out to another folder", w.show(w.outFile(name)))
			return 1
		}
		changed = append(changed, name)
	}
	orphans, err := findOrphans(w.outDir, files)
	if err != nil {
		c.errorf("cannot read output folder %s: %v", w.show(w.outDir), underlying(err))
		return 1
	}
	if len(changed) > 0 {
		if err := os.MkdirAll(w.outDir, 0o755); err != nil {
			c.errorf("cannot create output folder %s: %v", w.show(w.outDir), underlying(err))
			return 1
		}
		if err := writeFiles(w, files, changed); err != nil {
			c.errorf("%v", err)
			return 1
		}
	}
	status := 0
	for _, name := range orphans {
		if err := os.Remove(w.outFile(name)); err != nil {
			c.errorf("cannot remove orphaned generated file %s: %v", w.show(w.outFile(name)), underlying(err))
			status = 1
			continue
		}
		c.errorf("removed orphaned generated file %s (its .lua is gone)", w.show(w.outFile(name)))
	}
	return status
}

// createTemp is os.CreateTemp; tests replace it to inject failures.
var createTemp = os.CreateTemp

// writeFiles writes files[name] for every name into the output folder in
// two steps: first every file into a temporary file in the folder, then
// every temporary file renamed over its target. When a write fails no
// target is touched; temporary files never stay behind.
func writeFiles(w *workspace, files map[string][]byte, names []string) (err error) {
	var temps []string
	defer func() {
		if err != nil {
			for _, t := range temps {
				os.Remove(t) // already renamed ones are gone: the error is moot
			}
		}
	}()
	for _, name := range names {
		f, err := createTemp(w.outDir, ".luagen-*.tmp")
		if err != nil {
			return fmt.Errorf("cannot write %s: %v", w.show(w.outFile(name)), underlying(err))
		}
		temps = append(temps, f.Name())
		_, err = f.Write(files[name])
		if err == nil {
			err = f.Chmod(0o644)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("cannot write %s: %v", w.show(w.outFile(name)), underlying(err))
		}
	}
	for i, name := range names {
		if err := os.Rename(temps[i], w.outFile(name)); err != nil {
			return fmt.Errorf("cannot write %s: %v", w.show(w.outFile(name)), underlying(err))
		}
	}
	return nil
}

// underlying drops the path from a *fs.PathError or *os.LinkError, whose
// messages name temporary or absolute paths; the caller names the file.
func underlying(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// findOrphans lists the files of dir that luagen generated (named *_lua.go
// or gen.SharedFile, starting with the generated header) and that keep does
// not hold. A missing dir has none.
func findOrphans(dir string, keep map[string][]byte) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var orphans []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, "_lua.go") || name == gen.SharedFile) {
			continue
		}
		if _, ok := keep[name]; ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if gen.IsGenerated(b) {
			orphans = append(orphans, name)
		}
	}
	return orphans, nil
}

// check reports, without writing, every generated file that generate would
// change, add or remove.
func (c *cli) check(w *workspace) int {
	if !c.checkOutDir(w) {
		return 1
	}
	files, code := c.render(w)
	if files == nil {
		return code
	}
	stale, failed := false, false
	for _, name := range sortedNames(files) {
		path := w.show(w.outFile(name))
		old, err := os.ReadFile(w.outFile(name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			c.stale(path, "missing: generate would write it", unifiedDiff("/dev/null", "b/"+path, nil, files[name]))
			stale = true
		case err != nil:
			c.errorf("cannot read %s: %v", path, underlying(err))
			failed = true
		case bytes.Equal(old, files[name]):
		case !gen.IsGenerated(old):
			c.errorf("%s exists and was not written by luagen: generate would refuse to overwrite it", path)
			failed = true
		default:
			c.stale(path, "stale: generate would change it", unifiedDiff("a/"+path, "b/"+path, old, files[name]))
			stale = true
		}
	}
	orphans, err := findOrphans(w.outDir, files)
	if err != nil {
		c.errorf("cannot read output folder %s: %v", w.show(w.outDir), underlying(err))
		failed = true
	}
	for _, name := range orphans {
		if c.format == "text" {
			c.errorf("orphaned generated file %s (its .lua is gone)", w.show(w.outFile(name)))
		} else {
			c.pending = append(c.pending, gen.Diagnostic{File: w.show(w.outFile(name)), Rule: "orphan", Message: "orphaned generated file: its .lua is gone; generate would remove it"})
		}
		stale = true
	}
	if stale {
		c.errorf("stale: run go generate ./... (or luagen generate)")
	}
	if stale || failed {
		return 1
	}
	return 0
}

// stale reports a generated file that generate would write: its diff on
// stdout in the text format, a finding of rule "stale" in the others.
func (c *cli) stale(path, msg, diff string) {
	if c.format == "text" {
		fmt.Fprint(c.stdout, diff)
		return
	}
	c.pending = append(c.pending, gen.Diagnostic{File: path, Rule: "stale", Message: msg})
}
