package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// applyConfig finds and reads luagen.json (-config, else the nearest one at
// or above -src, or the working directory when -src is not set, up to the
// module root) and fills -src, -out and -pkg from it where the command line
// did not set them, relative to the file's folder. It returns nil when
// there is no file.
func applyConfig(o *options) (*gen.FileConfig, error) {
	file := o.config
	if file == "" {
		start, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		if o.srcSet {
			start = absPath(start, o.src)
		}
		file = findConfig(start)
		if file == "" {
			return nil, nil
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("-config %s: no such file", file)
		}
		return nil, fmt.Errorf("-config: %w", err)
	}
	fc, err := gen.LoadFileConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dir := filepath.Dir(file)
	if !o.srcSet && fc.Src != "" {
		o.src = filepath.Join(dir, filepath.FromSlash(fc.Src))
	}
	if !o.outSet && fc.Out != "" {
		o.out = filepath.Join(dir, filepath.FromSlash(fc.Out))
	}
	if !o.pkgSet && fc.Package != "" {
		o.pkg = fc.Package
	}
	return fc, nil
}

// findConfig returns the nearest luagen.json at or above dir, stopping at
// the module root (a folder holding go.mod); "" when there is none.
func findConfig(dir string) string {
	for {
		p := filepath.Join(dir, gen.ConfigFileName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && fi.Mode().IsRegular() {
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
