package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// initConfig writes luagen.json at the module root (the nearest folder at
// or above the working directory with a go.mod) from -src, -out, -pkg and
// -redis, paths relative to that root. It refuses to overwrite one.
func (c *cli) initConfig(o *options) int {
	wd, err := os.Getwd()
	if err != nil {
		c.errorf("init: working directory: %v", err)
		return 1
	}
	root := wd
	for {
		if fi, err := os.Stat(filepath.Join(root, "go.mod")); err == nil && fi.Mode().IsRegular() {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			c.errorf("init: no go.mod at or above %s: run it in a Go module", wd)
			return 1
		}
		root = parent
	}
	fc := gen.FileConfig{Package: o.pkg, Redis: o.redis}
	for _, p := range []struct {
		dst  *string
		path string
	}{{&fc.Src, o.src}, {&fc.Out, o.out}} {
		rel, err := filepath.Rel(root, absPath(wd, p.path))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			c.errorf("init: %s is outside the module root %s", p.path, root)
			return 1
		}
		*p.dst = filepath.ToSlash(rel)
	}
	b, err := json.MarshalIndent(fc, "", "  ")
	if err != nil {
		c.errorf("init: %v", err)
		return 1
	}
	b = append(b, '\n')
	if _, err := gen.LoadFileConfig(b); err != nil {
		c.errorf("init: %v", err)
		return 2
	}
	file := filepath.Join(root, gen.ConfigFileName)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		c.errorf("init: %s exists: edit it instead", file)
		return 1
	}
	if err != nil {
		c.errorf("init: %v", err)
		return 1
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		c.errorf("init: %v", err)
		return 1
	}
	if err := f.Close(); err != nil {
		c.errorf("init: %v", err)
		return 1
	}
	fmt.Fprintf(c.stdout, "wrote %s\n", file)
	return 0
}
