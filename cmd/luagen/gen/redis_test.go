package gen

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/cmd/luagen/internal/redistest"
)

// The tests of this file check gen against Redis itself: a redis-server
// started by internal/redistest (skipped when the binary is missing, a failure
// with LUALOCK_REQUIRE_REDIS=1) and, for the generated code, miniredis too.

// TestEndToEnd generates the package of testdata/e2e/lua, builds it with
// the test of testdata/e2e/e2e_test.go and runs that test against miniredis
// and against a real redis-server: every @arg type reaches Lua encoded as
// the README says, every kind of reply converts, pipelines are refused by
// the run functions and work through Cmd and Result, and a failed load
// names the script once.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs a generated package")
	}
	bin, dir := buildGenerated(t, "e2e", Config{Src: "lua", Package: "e2e"})
	run := func(t *testing.T, addr string) {
		cmd := exec.Command(bin, "-test.v", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LUAGEN_E2E_ADDR="+addr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the generated package's test failed: %v\n%s", err, out)
		}
		for _, name := range []string{"TestArgEncoding", "TestReturnTypes", "TestPipeline", "TestLoadErrorNamesScriptOnce"} {
			if !strings.Contains(string(out), "--- PASS: "+name+" ") {
				t.Errorf("%s did not pass:\n%s", name, out)
			}
		}
	}
	t.Run("miniredis", func(t *testing.T) { run(t, "") })
	t.Run("redis", func(t *testing.T) { run(t, redistest.Start(t)) })
}

// redisClient starts a redis-server for one test and connects to it.
func redisClient(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Client(t)
}

// TestGlobalsMatchRedis compares Globals with the globals a script sees in
// Redis 7.0: the same names, plus load and loadstring (forbidden-call) and
// Redis's internal __redis__err__handler.
func TestGlobalsMatchRedis(t *testing.T) {
	c := redisClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	version := redisVersion(t, c)
	names, err := c.Eval(ctx, "local t = {} for k in pairs(_G) do t[#t + 1] = k end table.sort(t) return t", nil).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(Globals), "load", "loadstring", "__redis__err__handler")
	slices.Sort(want)
	if !strings.HasPrefix(version, "7.0.") {
		t.Skipf("Globals follows Redis 7.0; this is Redis %s, whose globals are %q", version, names)
	}
	if !slices.Equal(names, want) {
		t.Errorf("Redis %s globals\n got %q\nwant %q (Globals, load, loadstring, __redis__err__handler)", version, names, want)
	}
	for name := range forbidden {
		present := slices.Contains(names, name)
		if present != (name == "load" || name == "loadstring") {
			t.Errorf("forbidden %s: present in Redis %s = %v", name, version, present)
		}
	}
}

// TestSyntaxMatchesRedis: a script that Redis refuses to compile has a
// syntax finding, and one it compiles has none, for the numerals gopher-lua
// and Lua 5.1 read differently.
func TestSyntaxMatchesRedis(t *testing.T) {
	c := redisClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, body := range []string{
		"return 1e", "return 1e+", "return 1E-", "local x = 1e y = 2\nreturn x", "return 1..2", "return 1.2.3",
		"return 12abc", "return 0x", "return 0xfg", "return 1e5x", "return 1 .. 2",
		"return 1", "return 1.5", "return .5", "return 5.", "return 1e3", "return 1E-3", "return 2.5e+2",
		"return 1.e2", "return 0xff", "return 0XA", "return 0x1F", "return 0x1e+5", "return 3e2 + 1",
		"return '1e' .. [[1..2]] -- 0x",
		// Empty statements, escapes, and what Lua 5.1 checks when compiling.
		"local x = 1;; return x", "; return 1", "do ; end return 1", "if true then ; end return 1",
		"local function f() ; end return 1", "local t = {;} return 1", "local t = {1,;2} return 1",
		"local x = 1; return x;", "local t = {1; 2;} return t[2]", "f = nil; (function() end)(); return 1",
		"repeat local y = 1; until true return 1", "local function f(a) return a end; return f(1);",
		"return '\\300'", "return '\\256'", "return '\\255\\0'", "return \"\\1234\"", "return '\\\\300'",
		"break", "do break end return 1", "while true do break end return 1",
		"if true then break end return 1", "for i = 1, 2 do if i then break end end return 1",
		"return ...", "local function f() return ... end return 1", "local function f(...) return ... end return f(1)",
		// Lua 5.1's compile limits, the ambiguous call, arg and hex floats.
		upvalues(60), upvalues(61), locals(200), locals(201),
		"return " + strings.Repeat("ARGV[1]..", 197) + "ARGV[1]", "return " + strings.Repeat("ARGV[1]..", 198) + "ARGV[1]",
		strings.Repeat("do ", 198) + "return 1 " + strings.Repeat("end ", 198), strings.Repeat("do ", 199) + "return 1 " + strings.Repeat("end ", 199),
		"local x = 1\nlocal y = x\n(tostring)(1)\nreturn y", "local x = 1\nlocal y = x;\n(tostring)(1)\nreturn y",
		"local function f(...) return arg.n end return f(1, 2)", "return 0x1p4", "return 0x1p-2",
		"return select('#', " + strings.Repeat("1, ", 246) + "1)", "return select('#', " + strings.Repeat("1, ", 247) + "1)",
		"local a, b = 1, 2 return select('#', " + strings.Repeat("1, ", 244) + "1)", "local a, b = 1, 2 return select('#', " + strings.Repeat("1, ", 245) + "1)",
		"return tostring(select('#', " + strings.Repeat("1, ", 245) + "1))", "return tostring(select('#', " + strings.Repeat("1, ", 246) + "1))",
		"redis.call('echo', " + strings.Repeat("'x', ", 246) + "'x') return 1", "redis.call('echo', " + strings.Repeat("'x', ", 247) + "'x') return 1",
		"local s = 'x' return s:rep(" + strings.Repeat("1, ", 245) + "1)", "local s = 'x' return s:rep(" + strings.Repeat("1, ", 246) + "1)",
		"local t = {" + strings.Repeat("1, ", 400) + "1} return #t",
	} {
		src := "-- @return any\n" + body + "\n"
		_, loadErr := c.ScriptLoad(ctx, src).Result()
		if loadErr != nil && !strings.Contains(loadErr.Error(), "Error compiling script") {
			t.Fatalf("SCRIPT LOAD %q: %v", body, loadErr)
		}
		s, _ := parseScript("lua/t.lua", []byte(src))
		var syntax []Diagnostic
		for _, d := range lintAST(s, Config{}) {
			if d.Rule == RuleSyntax {
				syntax = append(syntax, d)
			}
		}
		if (loadErr != nil) != (len(syntax) > 0) {
			t.Errorf("%q: Redis says %v, lint says %v", body, loadErr, syntax)
		}
	}
}

func redisVersion(t *testing.T, c *redis.Client) string {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	t.Fatalf("no redis_version in INFO server:\n%s", info)
	return ""
}

// upvalues is a script whose function reads n upvalues.
func upvalues(n int) string {
	var b strings.Builder
	var sum []string
	for i := range n {
		fmt.Fprintf(&b, "local u%d = %d\n", i, i)
		sum = append(sum, fmt.Sprintf("u%d", i))
	}
	return b.String() + "local function f() return " + strings.Join(sum, " + ") + " end\nreturn f()"
}

// locals is a script with n locals in its main function.
func locals(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "local v%d = %d\n", i, i)
	}
	return b.String() + "return v0"
}

// TestFunctionsRedis loads into redis-server 7 a Functions library that
// BuildLibrary makes of two scripts, and a hand-written one that lint
// passes, and calls their functions with FCALL and FCALL_RO: the built
// functions keep the scripts' meaning, and the read-only one runs where
// Redis allows only no-writes functions.
func TestFunctionsRedis(t *testing.T) {
	c := redisClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fsys := fstest.MapFS{
		"lua/incr.lua":        {Data: []byte("-- @key c the counter\n-- @arg by int step\n-- @return int\nreturn redis.call('incrby', KEYS[1], ARGV[1])\n")},
		"lua/peek.lua":        {Data: []byte("#!lua flags=no-writes\n-- @key c the counter\n-- @return int?\n-- @flag read-only\nlocal v = redis.call('get', KEYS[1])\nreturn v and tonumber(v)\n")},
		"lua/lib/counter.lua": {Data: []byte("#!lua name=counter\nlocal function add(keys, args)\n  return redis.call('incrby', keys[1], args[1])\nend\nredis.register_function('add', add)\nredis.register_function{function_name = 'read', callback = function(keys) return redis.call('get', keys[1]) end, flags = {'no-writes'}}\n")},
	}
	cfg := Config{Src: "lua", Package: "generated", Library: "app"}
	scripts, diags := Parse(fsys, cfg)
	for _, s := range scripts {
		diags = append(diags, lintScript(s, cfg)...)
	}
	if HasErrors(diags) {
		t.Fatalf("lint: %v", diags)
	}
	lib := BuildLibrary("app", scripts)
	if name, err := c.FunctionLoadReplace(ctx, string(lib)).Result(); err != nil || name != "app" {
		t.Fatalf("FUNCTION LOAD REPLACE of the built library: %q, %v\n%s", name, err, lib)
	}
	if n, err := c.FCall(ctx, "incr", []string{"fn:c"}, 5).Int64(); err != nil || n != 5 {
		t.Fatalf("FCALL incr: %d, %v", n, err)
	}
	if n, err := c.FCallRO(ctx, "peek", []string{"fn:c"}).Int64(); err != nil || n != 5 {
		t.Fatalf("FCALL_RO peek: %d, %v", n, err)
	}
	if _, err := c.FCallRO(ctx, "incr", []string{"fn:c"}, 1).Result(); err == nil {
		t.Errorf("FCALL_RO of a function without no-writes passed; Redis should refuse it")
	}
	hand, err := fs.ReadFile(fsys, "lua/lib/counter.lua")
	if err != nil {
		t.Fatal(err)
	}
	s, ds := parseScript("lua/lib/counter.lua", hand)
	if ds = append(ds, lintScript(s, Config{})...); HasErrors(ds) || s.Library != "counter" || len(s.Functions) != 2 {
		t.Fatalf("hand-written library: library %q, functions %v, findings %v", s.Library, s.Functions, ds)
	}
	if _, err := c.FunctionLoadReplace(ctx, string(hand)).Result(); err != nil {
		t.Fatalf("FUNCTION LOAD of the hand-written library: %v", err)
	}
	if n, err := c.FCall(ctx, "add", []string{"fn:c"}, 2).Int64(); err != nil || n != 7 {
		t.Fatalf("FCALL add: %d, %v", n, err)
	}
	if v, err := c.FCallRO(ctx, "read", []string{"fn:c"}).Text(); err != nil || v != "7" {
		t.Fatalf("FCALL_RO read: %q, %v", v, err)
	}
}

// TestFunctionsEndToEnd generates the package of testdata/e2e_functions/lua
// built into one Functions library, builds it with the test of
// testdata/e2e_functions/e2e_test.go and runs that test against a real
// redis-server: the typed wrappers run FCALL and FCALL_RO, and load the
// library when Redis does not know the function; an arg declared a key
// prefix is checked for the keys' hash tag before anything is sent.
func TestFunctionsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs a generated package")
	}
	bin, dir := buildGenerated(t, "e2e_functions", Config{Src: "lua", Package: "e2e", Library: "e2e", KeyPrefixArgs: []string{"prefix"}, CheckKeyPrefixes: true})
	cmd := exec.Command(bin, "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LUAGEN_E2E_ADDR="+redistest.Start(t))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestLibrary ") || !strings.Contains(string(out), "--- PASS: TestKeyPrefix ") {
		t.Fatalf("the generated package's test failed: %v\n%s", err, out)
	}
}

// buildGenerated generates the package of testdata/<fixture>/lua with cfg,
// adds the fixture's e2e_test.go, and builds its test binary. The package
// is written inside the module (so that go-redis and miniredis resolve
// through its go.mod) in a folder whose leading underscore keeps ./...
// patterns away from it, removed at the test's end. It returns the binary
// and that folder, where the binary must run. Without a go command the
// test is skipped.
func buildGenerated(t *testing.T, fixture string, cfg Config) (bin, dir string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the generated code: %v", err)
	}
	files, err := Generate(os.DirFS(filepath.Join("testdata", fixture)), cfg)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	test, err := os.ReadFile(filepath.Join("testdata", fixture, "e2e_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	files["e2e_test.go"] = test
	dir, err = os.MkdirTemp("testdata", "_"+fixture)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin = filepath.Join(t.TempDir(), "e2e.test")
	if out, err := exec.Command(goTool, "test", "-c", "-o", bin, "./"+filepath.ToSlash(dir)).CombinedOutput(); err != nil {
		t.Fatalf("go test -c of the generated package: %v\n%s", err, out)
	}
	return bin, dir
}
