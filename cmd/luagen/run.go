package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lualock/lualock/cmd/luagen/gen"
	"github.com/lualock/lualock/cmd/luagen/version"
)

const usage = `usage: luagen [command] [flags]

Commands:
  generate  lint the scripts and write the Go package (the default)
  check     report generated files that are stale or orphaned; writes nothing
  lint      print every finding about the scripts
  list      print each script's name, file, SHA1, keys, args, return and flags
  load      SCRIPT LOAD every script into Redis and verify its SHA1
  import    find the Lua scripts a Go package keeps as strings (import
            [-write] ./pkg): draft lua/<name>.lua for each, print its calls
  init      write luagen.json at the module root with -src, -out, -pkg and
            -redis, so that every command (check in CI) reads the same folders
  help      print this help

Flags of every command:
  -src dir     folder of the .lua files (default "lua")
  -out dir     folder of the generated package (default "generated")
  -pkg name    package name of the generated files (default: base name of -out)
  -config file luagen.json to read (default: the nearest luagen.json at or
               above -src, or the working directory, up to the module root)

Flags of lint and check:
  -format f    text (default), json, sarif or github (workflow annotations)

Flags of list:
  -json        print a JSON array instead of a table

Flags of import:
  -write       write the drafted files into -src (never over a file);
               without it they are printed. Go code is never changed.

Flags of init:
  -redis v     the oldest Redis version the scripts must run on ("6.2")

Flags of load:
  -replace     for a Functions library: FUNCTION LOAD REPLACE
  -addr url    redis://host:port[/db] or host:port (default $REDIS_URL,
               else redis://127.0.0.1:6379)
  -cluster     -addr is a Redis Cluster seed: comma-separated host:port, or a
               redis:// URL; the scripts are loaded into every node
  -timeout d   bound on the whole load (default 10s)

Exit status: 0 success, 1 findings or errors (check: stale files), 2 usage.
`

// options are the parsed command line.
type options struct {
	cmd     string
	src     string
	out     string
	pkg     string
	pkgSet  bool
	srcSet  bool
	outSet  bool
	config  string
	format  string
	replace bool
	json    bool
	addr    string
	cluster bool
	timeout time.Duration
	redis   string
	write   bool
	pattern string // import's package
}

// cli carries the output streams of one run.
type cli struct {
	stdout, stderr io.Writer
	format         string           // of findings: text, json, sarif or github
	pending        []gen.Diagnostic // findings kept for a format other than text
}

// run runs luagen with the arguments that follow the program name and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && version.IsFlag(args[0]) {
		fmt.Fprintln(stdout, version.String("luagen"))
		return 0
	}
	c := &cli{stdout: stdout, stderr: stderr}
	o, code := c.parse(args)
	if o == nil {
		return code
	}
	if o.cmd == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	c.format = o.format
	if o.cmd == "init" {
		return c.initConfig(o)
	}
	fc, err := applyConfig(o)
	if err != nil {
		c.errorf("%v", err)
		return 1
	}
	if o.cmd == "import" {
		return c.importPackage(o.pattern, o.src, o.write)
	}
	w, err := newWorkspace(o.src, o.out)
	if err != nil {
		c.errorf("%v", err)
		return 1
	}
	if o.pkg == "" {
		o.pkg = filepath.Base(w.outDir)
	}
	w.cfg.Package = o.pkg
	w.cfg = w.cfg.FromFile(fc)
	code = c.dispatch(w, o)
	if c.format != "text" && (o.cmd == "lint" || o.cmd == "check") {
		if err := writeFindings(stdout, c.format, c.pending); err != nil {
			c.errorf("%v", err)
			return 1
		}
	}
	return code
}

// dispatch runs the command.
func (c *cli) dispatch(w *workspace, o *options) int {
	switch o.cmd {
	case "generate", "check":
		if err := gen.CheckPackageName(o.pkg); err != nil {
			if o.pkgSet {
				c.errorf("-pkg: %v", err)
				fmt.Fprint(c.stderr, usage)
				return 2
			}
			c.errorf("%v; it is the base name of -out: set -pkg", err)
			return 1
		}
		if o.cmd == "generate" {
			return c.generate(w)
		}
		return c.check(w)
	case "lint":
		return c.lint(w)
	case "list":
		return c.list(w, o.json)
	case "load":
		return c.load(w, o)
	}
	panic("unreachable: parse accepted command " + o.cmd)
}

// parse reads the command and its flags. It returns nil and the exit status
// when the run is over: after -h, or on a usage error.
func (c *cli) parse(args []string) (*options, int) {
	o := &options{cmd: "generate"}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.cmd, args = args[0], args[1:]
	}
	switch o.cmd {
	case "help":
		return o, 0
	case "generate", "check", "lint", "list", "load", "init", "import":
	default:
		c.errorf("unknown command %q", o.cmd)
		fmt.Fprint(c.stderr, usage)
		return nil, 2
	}
	fset := flag.NewFlagSet("luagen "+o.cmd, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.Usage = func() {}
	fset.StringVar(&o.src, "src", "lua", "")
	fset.StringVar(&o.out, "out", "generated", "")
	fset.StringVar(&o.pkg, "pkg", "", "")
	fset.StringVar(&o.config, "config", "", "")
	o.format = "text"
	switch o.cmd {
	case "lint", "check":
		fset.StringVar(&o.format, "format", "text", "")
	case "list":
		fset.BoolVar(&o.json, "json", false, "")
	case "init":
		fset.StringVar(&o.redis, "redis", "", "")
	case "import":
		fset.BoolVar(&o.write, "write", false, "")
	case "load":
		fset.BoolVar(&o.replace, "replace", false, "")
		def := os.Getenv("REDIS_URL")
		if def == "" {
			def = "redis://127.0.0.1:6379"
		}
		fset.StringVar(&o.addr, "addr", def, "")
		fset.BoolVar(&o.cluster, "cluster", false, "")
		fset.DurationVar(&o.timeout, "timeout", 10*time.Second, "")
	}
	err := fset.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(c.stdout, usage)
		return nil, 0
	case err != nil:
		c.errorf("%s: %v", o.cmd, err)
		fmt.Fprint(c.stderr, usage)
		return nil, 2
	case o.cmd == "import" && fset.NArg() != 1:
		c.errorf("import: name one Go package: luagen import [-write] ./internal/rdb")
		fmt.Fprint(c.stderr, usage)
		return nil, 2
	case o.cmd == "import":
		o.pattern = fset.Arg(0)
	case fset.NArg() > 0:
		c.errorf("%s: unexpected argument %q", o.cmd, fset.Arg(0))
		fmt.Fprint(c.stderr, usage)
		return nil, 2
	}
	fset.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "pkg":
			o.pkgSet = true
		case "src":
			o.srcSet = true
		case "out":
			o.outSet = true
		}
	})
	switch o.format {
	case "text", "json", "sarif", "github":
	default:
		c.errorf("%s: -format %q: use text, json, sarif or github", o.cmd, o.format)
		fmt.Fprint(c.stderr, usage)
		return nil, 2
	}
	for _, f := range []struct{ name, val string }{{"src", o.src}, {"out", o.out}} {
		if f.val == "" {
			c.errorf("%s: -%s must not be empty", o.cmd, f.name)
			fmt.Fprint(c.stderr, usage)
			return nil, 2
		}
	}
	if o.cmd == "load" && o.timeout <= 0 {
		c.errorf("load: -timeout must be positive")
		fmt.Fprint(c.stderr, usage)
		return nil, 2
	}
	return o, 0
}

// errorf prints a message prefixed "luagen: " on stderr.
func (c *cli) errorf(format string, a ...any) {
	fmt.Fprintf(c.stderr, "luagen: "+format+"\n", a...)
}

// workspace ties the command line's folders to gen's view of them.
type workspace struct {
	cwd    string // absolute working directory
	root   string // absolute folder fsys is rooted at
	fsys   fs.FS
	cfg    gen.Config // Src is relative to root, with slashes
	outDir string     // absolute output folder
}

// newWorkspace resolves -src and -out. The file system is rooted at the
// module root (the nearest folder at or above src holding a go.mod), so that
// Config.Src, and every path recorded in the generated code, is relative to
// the module root wherever luagen runs. Without a go.mod it is the working
// directory when src is inside it, and the parent of src otherwise.
func newWorkspace(src, out string) (*workspace, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	srcAbs := absPath(cwd, src)
	root, ok := moduleRoot(srcAbs)
	if !ok {
		if within(cwd, srcAbs) {
			root = cwd
		} else {
			root = filepath.Dir(srcAbs)
		}
	}
	rel, err := filepath.Rel(root, srcAbs)
	if err != nil {
		return nil, fmt.Errorf("-src %s: %w", src, err)
	}
	return &workspace{
		cwd:    cwd,
		root:   root,
		fsys:   os.DirFS(root),
		cfg:    gen.Config{Src: filepath.ToSlash(rel)},
		outDir: absPath(cwd, out),
	}, nil
}

func absPath(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

// within reports whether path is dir or inside it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// moduleRoot returns the nearest folder at or above dir that holds a go.mod.
func moduleRoot(dir string) (string, bool) {
	for {
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && fi.Mode().IsRegular() {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// show turns an absolute path into the path printed in messages: relative
// to the working directory, with slashes.
func (w *workspace) show(abs string) string {
	rel, err := filepath.Rel(w.cwd, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(rel)
}

// showFS turns a path of fsys (as in Diagnostic.File) into a printed path.
func (w *workspace) showFS(name string) string {
	return w.show(filepath.Join(w.root, filepath.FromSlash(name)))
}

// outFile is the absolute path of a generated file.
func (w *workspace) outFile(name string) string { return filepath.Join(w.outDir, name) }

// printDiags prints diagnostics on stderr, one a line, with their paths
// relative to the working directory.
func (c *cli) printDiags(w *workspace, ds []gen.Diagnostic) {
	for _, d := range ds {
		d.File = w.showFS(d.File)
		if c.format != "text" {
			c.pending = append(c.pending, d)
			continue
		}
		fmt.Fprintln(c.stderr, d.String())
	}
}

// summary counts the errors and warnings: "2 errors, 1 warning".
func summary(ds []gen.Diagnostic) string {
	var errs, warns int
	for _, d := range ds {
		if d.Severity == gen.Warning {
			warns++
		} else {
			errs++
		}
	}
	s := plural(errs, "error")
	if warns > 0 {
		s += ", " + plural(warns, "warning")
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// lint prints every finding; only errors fail.
func (c *cli) lint(w *workspace) int {
	ds := gen.Lint(w.fsys, w.cfg)
	c.printDiags(w, ds)
	if gen.HasErrors(ds) {
		c.errorf("%s", summary(ds))
		return 1
	}
	return 0
}
