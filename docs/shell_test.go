package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lualock/lualock/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Run(m)) } // stops the shared redis-server

// A ```sh block of README.md or docs/*.md runs in TestShellBlocks when the
// line before its fence marks it:
//
//	<!-- runnable: in the clone -->
//	<!-- runnable: in a new module that imports lualock -->
//	<!-- runnable: in a new module that imports lualock, with lua/hello.lua -->
//
// "in the clone" runs it in a fresh clone of this repository; "in a new
// module" in a new module (example.com/try, whose main.go is the README's
// shortest correct program) beside that clone, at ../lualock, after the
// README's Install block has pointed the module at it (the Install block
// itself runs with the clone not made yet: it makes it). "with
// lua/hello.lua" adds a script for luagen. Every line runs as written, in
// bash with -e, except these stand-ins: "<repository URL>" is this
// checkout, "host:port" and $REDIS_URL name a redis-server the test starts,
// and "make test", which CI runs in full (.ci/run), runs as "make -n test".
// The go command uses the machine's module proxy, as a user's would; a
// block skips when that proxy is out of reach.
const (
	whereClone  = "in the clone"
	whereModule = "in a new module that imports lualock"
	withScript  = ", with lua/hello.lua"
)

// shBlock is a runnable ```sh block.
type shBlock struct {
	file  string
	line  int
	where string
	src   string
}

// shellBlocks returns the marked ```sh blocks of a Markdown file, and fails
// the test on a marker that is not followed by one or names no known place.
func shellBlocks(t *testing.T, file string) []shBlock {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []shBlock
	var cur *shBlock
	where, marked := "", 0 // the pending marker and its line
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.src += line + "\n"
		case strings.HasPrefix(line, "<!-- runnable: "):
			where, marked = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- runnable: "), " -->"), n
			if w := strings.TrimSuffix(where, withScript); w != whereClone && w != whereModule {
				t.Errorf("%s:%d: unknown place %q", file, n, where)
			}
		case marked != 0 && line == "```sh":
			cur = &shBlock{file: file, line: n, where: where}
			marked = 0
		case marked != 0:
			t.Errorf("%s:%d: a runnable marker not followed by a ```sh block", file, marked)
			marked = 0
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readmeProgram is the README's first whole Go program.
func readmeProgram(t *testing.T) string {
	for _, s := range goBlocks(t, "../README.md") {
		if strings.HasPrefix(s.src, "package main") {
			return s.src
		}
	}
	t.Fatal("README.md has no ```go block with a whole program")
	return ""
}

// helloLua is a script for the luagen blocks.
const helloLua = `-- Returns the value of a key, or false when it does not exist.
--
-- @key    k       the key
-- @return string  its value
-- @flag   read-only
return redis.call('get', KEYS[1])
`

func TestShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the shell blocks build and install the commands (about a minute)")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout: nothing to clone")
	}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []shBlock
	for _, f := range append([]string{"../README.md"}, files...) {
		blocks = append(blocks, shellBlocks(t, f)...)
	}
	var install *shBlock
	for i, b := range blocks {
		if b.file == "../README.md" && strings.Contains(b.src, "git clone <repository URL>") {
			install = &blocks[i]
		}
	}
	if install == nil || len(blocks) < 5 {
		t.Fatalf("want the README's Install block and at least 5 runnable blocks, found %d", len(blocks))
	}
	program := readmeProgram(t)
	for _, b := range blocks {
		t.Run(strings.TrimPrefix(b.file, "../")+":"+strconv.Itoa(b.line), func(t *testing.T) {
			dir := t.TempDir()
			env := append(os.Environ(), "GOWORK=off", "GOBIN="+filepath.Join(dir, "bin"),
				"PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
			src := b.src
			if strings.Contains(src, "host:port") || strings.Contains(src, "lualock status") {
				addr := harness.SharedStandalone(t).Addr()
				src = strings.ReplaceAll(src, "host:port", addr)
				env = append(env, "REDIS_URL=redis://"+addr)
			}
			clone := filepath.Join(dir, "lualock")
			cwd := clone
			if strings.HasPrefix(b.where, whereModule) {
				cwd = filepath.Join(dir, "try")
				if err := os.MkdirAll(cwd, 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(cwd, "main.go"), program)
				if strings.HasSuffix(b.where, withScript) {
					write(t, filepath.Join(cwd, "lua", "hello.lua"), helloLua)
				}
				sh(t, cwd, env, "go mod init example.com/try")
				if b.line != install.line || b.file != install.file {
					sh(t, cwd, env, stand(install.src, root))
				}
			} else {
				sh(t, dir, env, "git clone -q "+root+" lualock")
			}
			sh(t, cwd, env, stand(src, root))
			if strings.HasPrefix(b.where, whereModule) {
				sh(t, cwd, env, "go build ./...") // the program, and what luagen wrote, compile
			}
		})
	}
}

// stand puts the stand-ins in a block's text (see the comment at the top).
func stand(src, root string) string {
	src = strings.ReplaceAll(src, "<repository URL>", root)
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "make" && f[1] == "test" {
			line = "make -n test" + strings.TrimPrefix(strings.TrimSpace(line), "make test") + "\n"
		}
		b.WriteString(line)
	}
	return b.String()
}

// sh runs script with bash -e in dir and fails the test on a non-zero exit.
func sh(t *testing.T, dir string, env []string, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil && (strings.Contains(string(out), "dial tcp") || strings.Contains(string(out), "no such host")) {
		// Not the docs' fault: a machine without the module proxy.
		t.Skipf("SKIP: the go command cannot reach the module proxy:\n%s", out)
	}
	if err != nil {
		t.Fatalf("in %s:\n%s\n%v:\n%s", dir, script, err, out)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
