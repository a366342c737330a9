package generated_test

// The directive sits in a test file of this package so that go generate
// ./... reads every other file of the package before luagen runs: a file
// luagen removes (its .lua is gone) is then no longer one go generate has
// yet to open (see luagen's documentation, docs/LUAGEN.md). luagen reads
// its folders from the module root's luagen.json.
//
//go:generate go tool luagen generate

import (
	"bytes"
	"context"
	"crypto/fips140"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/cmd/luagen/gen"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/luart"
)

// TestGeneratedStale regenerates the package from ../lua in memory and
// compares it with the files of this folder, byte for byte.
func TestGeneratedStale(t *testing.T) {
	if fipsOnly() {
		// The generator hashes the scripts with SHA-1, which fips140=only
		// refuses; the generated code itself never hashes (see
		// TestGeneratedFIPS140Only, and the other tests, which run here).
		t.Skip("GODEBUG has fips140=only: the generator's SHA-1 is refused; run without it to check staleness")
	}
	want, err := gen.Generate(os.DirFS(".."), gen.Config{Src: "lua", Package: "generated"})
	if err != nil {
		var de *gen.DiagnosticsError
		if errors.As(err, &de) {
			for _, d := range de.Diagnostics {
				t.Errorf("lint: %s", d)
			}
		}
		t.Fatalf("generate from ../lua: %v", err)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, "_lua.go") || name == gen.SharedFile) {
			continue
		}
		if _, ok := want[name]; !ok {
			t.Errorf("stale: run go generate ./...: %s is orphaned (no script generates it)", name)
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		got, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale: run go generate ./...: %s is missing", name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[name]) {
			t.Errorf("stale: run go generate ./...: %s differs from its regeneration (%s)", name, firstDiff(got, want[name]))
		}
	}
}

// TestLintRepoScripts checks that lualock's scripts lint clean, warnings
// included.
func TestLintRepoScripts(t *testing.T) {
	ds := gen.Lint(os.DirFS(".."), gen.Config{Src: "lua"})
	for _, d := range ds {
		t.Errorf("%v", d)
	}
	scripts, _ := gen.Parse(os.DirFS(".."), gen.Config{Src: "lua"})
	if len(scripts) == 0 {
		t.Fatal("no scripts in ../lua")
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.SplitAfter(string(got), "\n"), strings.SplitAfter(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: have %q, want %q", i+1, gl, wl)
		}
	}
	return "same lines"
}

// ---- converters, through the public XResult functions ----------------------

// redisErr is an error reply made up by a test ("LOST ...").
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

func cmdVal(v any) *redis.Cmd {
	cmd := redis.NewCmd(context.Background())
	cmd.SetVal(v)
	return cmd
}

func cmdErr(err error) *redis.Cmd {
	cmd := redis.NewCmd(context.Background())
	cmd.SetErr(err)
	return cmd
}

// wantScriptErr fails unless err is a *luart.Error naming script whose
// text is "lua script SCRIPT: ..." and contains want.
func wantScriptErr(t *testing.T, what string, err error, script, want string) {
	t.Helper()
	var se *luart.Error
	if !errors.As(err, &se) {
		t.Errorf("%s: error %v (%T), want a *luart.Error", what, err, err)
		return
	}
	if se.Script != script {
		t.Errorf("%s: error names %q, want %q", what, se.Script, script)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "lua script "+script+": ") || !strings.Contains(msg, want) {
		t.Errorf("%s: error %q, want \"lua script %s: ...%s...\"", what, msg, script, want)
	}
}

func TestGeneratedResultNil(t *testing.T) {
	// A nil reply comes as redis.Nil from a real connection; SetVal(nil)
	// without an error is the same reply.
	for _, nilCmd := range []func() *redis.Cmd{
		func() *redis.Cmd { return cmdErr(redis.Nil) },
		func() *redis.Cmd { return cmdVal(nil) },
	} {
		// Nullable int: a nil pointer, no error.
		if got, err := generated.LockReleaseResult(nilCmd()); got != nil || err != nil {
			t.Errorf("LockReleaseResult(nil) = %v, %v; want nil, nil", got, err)
		}
		if got, err := generated.FairReleaseResult(nilCmd()); got != nil || err != nil {
			t.Errorf("FairReleaseResult(nil) = %v, %v; want nil, nil", got, err)
		}
		// Non-nullable int: an error naming the script.
		_, err := generated.LockAcquireResult(nilCmd())
		wantScriptErr(t, "LockAcquireResult(nil)", err, "lock_acquire", "want an integer")
		if errors.Is(err, redis.Nil) {
			t.Errorf("LockAcquireResult(nil): %v still matches redis.Nil", err)
		}
		_, err = generated.FairAcquireResult(nilCmd())
		wantScriptErr(t, "FairAcquireResult(nil)", err, "fair_acquire", "want an integer")
		// bool: nil is Lua's false.
		if got, err := generated.LockForceReleaseResult(nilCmd()); got || err != nil {
			t.Errorf("LockForceReleaseResult(nil) = %v, %v; want false, nil", got, err)
		}
		if got, err := generated.FairLeaveResult(nilCmd()); got || err != nil {
			t.Errorf("FairLeaveResult(nil) = %v, %v; want false, nil", got, err)
		}
		// []int: nil is an empty array.
		if got, err := generated.LockRenewResult(nilCmd()); len(got) != 0 || err != nil {
			t.Errorf("LockRenewResult(nil) = %v, %v; want [], nil", got, err)
		}
	}
	// A nil element of an []int (whose elements are not nullable).
	_, err := generated.LockStatusResult(cmdVal([]any{int64(1), nil, int64(-2)}))
	wantScriptErr(t, "LockStatusResult([1 nil -2])", err, "lock_status", "element 2: reply <nil>, want an integer")
}

func TestGeneratedResultValues(t *testing.T) {
	if got, err := generated.LockAcquireResult(cmdVal(int64(0))); got != 0 || err != nil {
		t.Errorf("LockAcquireResult(0) = %v, %v", got, err)
	}
	if got, err := generated.FairAcquireResult(cmdVal(int64(1234))); got != 1234 || err != nil {
		t.Errorf("FairAcquireResult(1234) = %v, %v", got, err)
	}
	if got, err := generated.LockReleaseResult(cmdVal(int64(1))); got == nil || *got != 1 || err != nil {
		t.Errorf("LockReleaseResult(1) = %v, %v", got, err)
	}
	if got, err := generated.FairReleaseResult(cmdVal(int64(0))); got == nil || *got != 0 || err != nil {
		t.Errorf("FairReleaseResult(0) = %v, %v", got, err)
	}
	if got, err := generated.LockRenewResult(cmdVal([]any{int64(1), int64(0)})); !slices.Equal(got, []int64{1, 0}) || err != nil {
		t.Errorf("LockRenewResult([1 0]) = %v, %v", got, err)
	}
	if got, err := generated.LockRenewResult(cmdVal([]any{})); got == nil || len(got) != 0 || err != nil {
		t.Errorf("LockRenewResult([]) = %#v, %v; want an empty non-nil slice", got, err)
	}
	if got, err := generated.LockStatusResult(cmdVal([]any{int64(1), int64(2), int64(-1)})); !slices.Equal(got, []int64{1, 2, -1}) || err != nil {
		t.Errorf("LockStatusResult([1 2 -1]) = %v, %v", got, err)
	}
	if got, err := generated.LockForceReleaseResult(cmdVal(int64(1))); !got || err != nil {
		t.Errorf("LockForceReleaseResult(1) = %v, %v", got, err)
	}
	if got, err := generated.FairForceReleaseResult(cmdVal(int64(0))); got || err != nil {
		t.Errorf("FairForceReleaseResult(0) = %v, %v", got, err)
	}
}

func TestGeneratedResultWrongType(t *testing.T) {
	for _, c := range []struct {
		what, script, want string
		err                error
	}{
		{"LockAcquireResult(\"0\")", "lock_acquire", "want an integer", second(generated.LockAcquireResult(cmdVal("0")))},
		{"FairAcquireResult(true)", "fair_acquire", "want an integer", second(generated.FairAcquireResult(cmdVal(true)))},
		{"LockReleaseResult(\"1\")", "lock_release", "want an integer", second(generated.LockReleaseResult(cmdVal("1")))},
		{"FairReleaseResult([])", "fair_release", "want an integer", second(generated.FairReleaseResult(cmdVal([]any{})))},
		{"LockRenewResult(1)", "lock_renew", "want an array", second(generated.LockRenewResult(cmdVal(int64(1))))},
		{"LockStatusResult([\"1\"])", "lock_status", "element 1", second(generated.LockStatusResult(cmdVal([]any{"1"})))},
		{"LockForceReleaseResult(\"OK\")", "lock_force_release", "want a boolean", second(generated.LockForceReleaseResult(cmdVal("OK")))},
		{"FairForceReleaseResult(3.5)", "fair_force_release", "want a boolean", second(generated.FairForceReleaseResult(cmdVal(3.5)))},
		{"FairLeaveResult([1])", "fair_leave", "want a boolean", second(generated.FairLeaveResult(cmdVal([]any{int64(1)})))},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.what)
			continue
		}
		wantScriptErr(t, c.what, c.err, c.script, c.want)
	}
}

func second[T any](_ T, err error) error { return err }

func TestGeneratedResultErrors(t *testing.T) {
	_, err := generated.LockAcquireResult(cmdErr(context.Canceled))
	wantScriptErr(t, "cancelled", err, "lock_acquire", "context canceled")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false", err)
	}
	_, err = generated.LockRenewResult(cmdErr(fmt.Errorf("dial: %w", io.EOF)))
	wantScriptErr(t, "EOF", err, "lock_renew", "EOF")
	if !errors.Is(err, io.EOF) {
		t.Errorf("errors.Is(%v, io.EOF) = false", err)
	}
	_, err = generated.FairAcquireResult(cmdErr(redisErr("LOST lualock: the earlier holds of c:1 are gone")))
	wantScriptErr(t, "LOST", err, "fair_acquire", "LOST lualock")
	if !redis.HasErrorPrefix(err, "LOST") {
		t.Errorf("HasErrorPrefix(%v, LOST) = false", err)
	}
	_, err = generated.LockStatusResult(cmdErr(redis.ErrNoScript))
	wantScriptErr(t, "NOSCRIPT", err, "lock_status", "NOSCRIPT")
	if !errors.Is(err, redis.ErrNoScript) || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Errorf("%v does not match redis.ErrNoScript", err)
	}
	e := &luart.Error{Script: "x", Err: io.EOF}
	if e.Error() != "lua script x: EOF" || e.Unwrap() != io.EOF {
		t.Errorf("Error() = %q, Unwrap() = %v", e.Error(), e.Unwrap())
	}
}

// ---- no crypto at run time (GODEBUG=fips140=only) -----------------------------

// goTool finds the go command, or skips.
func goTool(t *testing.T) string {
	t.Helper()
	// go test puts the go command's own GOROOT/bin first on the test's PATH.
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	t.Skip("go command not found")
	return ""
}

// TestGeneratedNoCryptoImport: the SHA1s are computed by luagen, so the
// generated package imports nothing of crypto. (go-redis, which it uses,
// imports crypto/sha1 for its own redis.NewScript; an import alone does not
// trip fips140=only, only a call does, which the next test checks.)
func TestGeneratedNoCryptoImport(t *testing.T) {
	out, err := exec.Command(goTool(t), "list", "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}",
		"github.com/lualock/lualock/generated").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var sha1Importers []string
	seen := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		imps := strings.Fields(imports)
		if pkg == "github.com/lualock/lualock/generated" {
			seen = true
			for _, imp := range imps {
				if strings.HasPrefix(imp, "crypto/") || imp == "crypto" {
					t.Errorf("generated imports %s", imp)
				}
			}
		}
		if slices.Contains(imps, "crypto/sha1") {
			sha1Importers = append(sha1Importers, pkg)
			if strings.HasPrefix(pkg, "github.com/lualock/lualock") {
				t.Errorf("%s (a dependency of generated in this module) imports crypto/sha1", pkg)
			}
		}
	}
	if !seen {
		t.Fatalf("go list did not list the generated package:\n%s", out)
	}
	t.Logf("packages importing crypto/sha1 in generated's dependencies: %v", sha1Importers)
}

const fipsChildEnv = "LUALOCK_TEST_FIPS140_CHILD"

// TestGeneratedFIPS140Only runs exerciseGenerated in a child process with
// GODEBUG=fips140=only, where any SHA-1 computation panics: the wrappers,
// NOSCRIPT recovery, LoadAll, retries and the XCmd/XResult pair must work
// without one.
func TestGeneratedFIPS140Only(t *testing.T) {
	if os.Getenv(fipsChildEnv) == "1" {
		if !fips140.Enabled() {
			t.Fatal("child: FIPS 140 mode is not on")
		}
		// The mode bites: SHA-1 is refused.
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("child: sha1.Sum did not panic under fips140=only")
				} else {
					t.Logf("child: sha1.Sum panics as expected: %v", r)
				}
			}()
			_ = sha1.Sum([]byte("x"))
		}()
		exerciseGenerated(t)
		t.Log("fips140-child-ok")
		return
	}
	if testing.Short() {
		t.Skip("re-runs the test binary")
	}
	godebug := "fips140=only"
	if v := os.Getenv("GODEBUG"); v != "" {
		godebug = v + "," + godebug
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGeneratedFIPS140Only$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG="+godebug, fipsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fips140-child-ok") {
		t.Fatalf("child with GODEBUG=%s: %v\n%s", godebug, err, out)
	}
}

// TestGeneratedFakeRedis runs exerciseGenerated in this process, so a
// failure of the FIPS test above is known to be about SHA-1.
func TestGeneratedFakeRedis(t *testing.T) { exerciseGenerated(t) }

// fakeRedis is a redis.Scripter with a script cache and canned replies. It
// never hashes: SCRIPT LOAD recognises the source among generated.Scripts
// and answers its precomputed SHA1, as Redis would.
type fakeRedis struct {
	mu       sync.Mutex
	cache    map[string]bool
	calls    []string
	failNext int // EVALSHA calls to fail with io.EOF
}

var cannedReplies = map[string]any{
	generated.LockAcquireSHA1:      int64(0),
	generated.LockReleaseSHA1:      int64(1),
	generated.LockRenewSHA1:        []any{int64(1), int64(0)},
	generated.LockStatusSHA1:       []any{int64(1), int64(1), int64(30000)},
	generated.LockForceReleaseSHA1: nil, // false
	generated.FairAcquireSHA1:      int64(250),
	generated.FairReleaseSHA1:      nil,
	generated.FairLeaveSHA1:        int64(1),
	generated.FairForceReleaseSHA1: int64(1),
}

func (f *fakeRedis) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeRedis) evalsha(ctx context.Context, name, sha string) *redis.Cmd {
	cmd := redis.NewCmd(ctx, name, sha)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	switch {
	case f.failNext > 0:
		f.failNext--
		cmd.SetErr(io.EOF)
	case !f.cache[sha]:
		cmd.SetErr(redis.ErrNoScript)
	default:
		v, ok := cannedReplies[sha]
		switch {
		case !ok:
			cmd.SetErr(redisErr("ERR unknown sha " + sha))
		case v == nil:
			cmd.SetErr(redis.Nil)
		default:
			cmd.SetVal(v)
		}
	}
	return cmd
}

func (f *fakeRedis) EvalSha(ctx context.Context, sha string, _ []string, _ ...any) *redis.Cmd {
	return f.evalsha(ctx, "evalsha", sha)
}

func (f *fakeRedis) EvalShaRO(ctx context.Context, sha string, _ []string, _ ...any) *redis.Cmd {
	return f.evalsha(ctx, "evalsha_ro", sha)
}

func (f *fakeRedis) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	f.record("eval")
	return cmdErr(redisErr("ERR the wrappers must not send EVAL"))
}

func (f *fakeRedis) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	f.record("eval_ro")
	return cmdErr(redisErr("ERR the wrappers must not send EVAL_RO"))
}

func (f *fakeRedis) ScriptLoad(ctx context.Context, src string) *redis.StringCmd {
	f.record("script load")
	cmd := redis.NewStringCmd(ctx, "script", "load")
	for _, s := range generated.Scripts {
		if s.Source == src {
			f.mu.Lock()
			if f.cache == nil {
				f.cache = map[string]bool{}
			}
			f.cache[s.SHA1] = true
			f.mu.Unlock()
			cmd.SetVal(s.SHA1)
			return cmd
		}
	}
	cmd.SetErr(redisErr("ERR unknown source"))
	return cmd
}

func (f *fakeRedis) ScriptExists(ctx context.Context, shas ...string) *redis.BoolSliceCmd {
	f.record("script exists")
	cmd := redis.NewBoolSliceCmd(ctx, "script", "exists")
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]bool, len(shas))
	for i, s := range shas {
		out[i] = f.cache[s]
	}
	cmd.SetVal(out)
	return cmd
}

func (f *fakeRedis) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// exerciseGenerated calls every wrapper, NOSCRIPT recovery, LoadAll, a
// retried call and the XCmd/XResult pair against fakeRedis.
func exerciseGenerated(t *testing.T) {
	ctx := context.Background()
	f := &fakeRedis{}

	// NOSCRIPT, SCRIPT LOAD, EVALSHA again; no EVAL.
	if got, err := generated.LockAcquire(ctx, f, generated.LockAcquireKeys{Lock: "n"},
		generated.LockAcquireArgs{LeaseMS: 30000, Field: "c:1", Holds: 1}); got != 0 || err != nil {
		t.Fatalf("LockAcquire = %v, %v", got, err)
	}
	if c := f.take(); !slices.Equal(c, []string{"evalsha", "script load", "evalsha"}) {
		t.Fatalf("LockAcquire sent %v", c)
	}
	if got, err := generated.LockStatus(ctx, f, generated.LockStatusKeys{Lock: "n"},
		generated.LockStatusArgs{Field: "c:1"}); !slices.Equal(got, []int64{1, 1, 30000}) || err != nil {
		t.Fatalf("LockStatus = %v, %v", got, err)
	}
	if c := f.take(); !slices.Equal(c, []string{"evalsha_ro", "script load", "evalsha_ro"}) {
		t.Fatalf("LockStatus sent %v", c)
	}

	if err := generated.LoadAll(ctx, f); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	if c := f.take(); len(c) != len(generated.Scripts) {
		t.Fatalf("LoadAll sent %v", c)
	}

	if got, err := generated.LockRelease(ctx, f, generated.LockReleaseKeys{Lock: "n", Channel: "ch", Latch: "l"},
		generated.LockReleaseArgs{LeaseMS: 30000, Field: "c:1", LatchMS: 5000, Publish: "publish"}); got == nil || *got != 1 || err != nil {
		t.Fatalf("LockRelease = %v, %v", got, err)
	}
	if got, err := generated.LockRenew(ctx, f, generated.LockRenewKeys{Locks: []string{"a", "b"}},
		generated.LockRenewArgs{LeaseMS: 30000, Fields: []string{"c:1", "c:1"}}); !slices.Equal(got, []int64{1, 0}) || err != nil {
		t.Fatalf("LockRenew = %v, %v", got, err)
	}
	if got, err := generated.LockForceRelease(ctx, f, generated.LockForceReleaseKeys{Lock: "n", Channel: "ch", Latch: "l"},
		generated.LockForceReleaseArgs{LatchMS: 5000, Publish: "publish"}); got || err != nil {
		t.Fatalf("LockForceRelease = %v, %v", got, err)
	}
	fk := generated.FairAcquireKeys{Lock: "n", Queue: "q", Timeouts: "z", Channel: "ch"}
	if got, err := generated.FairAcquire(ctx, f, fk,
		generated.FairAcquireArgs{LeaseMS: 30000, Field: "c:1", WaitMS: 60000, Holds: 1, Publish: "publish"}); got != 250 || err != nil {
		t.Fatalf("FairAcquire = %v, %v", got, err)
	}
	if got, err := generated.FairRelease(ctx, f, generated.FairReleaseKeys{Lock: "n", Queue: "q", Timeouts: "z", Channel: "ch", Latch: "l"},
		generated.FairReleaseArgs{LeaseMS: 30000, Field: "c:1", LatchMS: 5000, WaitMS: 60000, Publish: "publish"}); got != nil || err != nil {
		t.Fatalf("FairRelease = %v, %v", got, err)
	}
	if got, err := generated.FairLeave(ctx, f, generated.FairLeaveKeys(fk),
		generated.FairLeaveArgs{Field: "c:1", WaitMS: 60000, Publish: "publish"}); !got || err != nil {
		t.Fatalf("FairLeave = %v, %v", got, err)
	}
	if got, err := generated.FairForceRelease(ctx, f, generated.FairForceReleaseKeys{Lock: fk.Lock, Queue: fk.Queue, Timeouts: fk.Timeouts, Channel: fk.Channel, Latch: "l"},
		generated.FairForceReleaseArgs{LatchMS: 5000, WaitMS: 60000, Publish: "publish"}); !got || err != nil {
		t.Fatalf("FairForceRelease = %v, %v", got, err)
	}
	if c := f.take(); len(c) != 7 || slices.Contains(c, "script load") {
		t.Fatalf("loaded scripts sent %v, want 7 single EVALSHAs", c)
	}

	// A transient error is retried (all the scripts are idempotent).
	f.mu.Lock()
	f.failNext = 1
	f.mu.Unlock()
	if got, err := generated.LockAcquire(ctx, f, generated.LockAcquireKeys{Lock: "n"},
		generated.LockAcquireArgs{LeaseMS: 30000, Field: "c:1", Holds: 1}); got != 0 || err != nil {
		t.Fatalf("LockAcquire after EOF = %v, %v", got, err)
	}
	if c := f.take(); !slices.Equal(c, []string{"evalsha", "evalsha"}) {
		t.Fatalf("retried LockAcquire sent %v", c)
	}

	// luagen's default policy (luart.DefaultRetry): 3 calls in all, then
	// the error.
	f.mu.Lock()
	f.failNext = 5
	f.mu.Unlock()
	acquireKeys, acquireArgs := generated.LockAcquireKeys{Lock: "n"}, generated.LockAcquireArgs{LeaseMS: 30000, Field: "c:1", Holds: 1}
	if _, err := generated.LockAcquire(ctx, f, acquireKeys, acquireArgs); !errors.Is(err, io.EOF) {
		t.Fatalf("LockAcquire after 5 EOFs = %v, want io.EOF", err)
	}
	if c := f.take(); !slices.Equal(c, []string{"evalsha", "evalsha", "evalsha"}) {
		t.Fatalf("LockAcquire with the default policy sent %v, want 3 EVALSHAs", c)
	}
	// A policy bound to the client instead (as lualock's runtime binds to
	// its acquisitions): one call, no hidden retry.
	once := luart.WithRetry(f, luart.Retry{Attempts: 1})
	if _, err := generated.LockAcquire(ctx, once, acquireKeys, acquireArgs); !errors.Is(err, io.EOF) {
		t.Fatalf("LockAcquire with Attempts 1 after an EOF = %v, want io.EOF", err)
	}
	if c := f.take(); !slices.Equal(c, []string{"evalsha"}) {
		t.Fatalf("LockAcquire with Attempts 1 sent %v, want 1 EVALSHA", c)
	}
	f.mu.Lock()
	f.failNext = 0
	f.mu.Unlock()

	// XCmd sends one EVALSHA; XResult converts it.
	cmd := generated.LockAcquireCmd(ctx, f, generated.LockAcquireKeys{Lock: "n"},
		generated.LockAcquireArgs{LeaseMS: 30000, Field: "c:1", Holds: 1})
	if got, err := generated.LockAcquireResult(cmd); got != 0 || err != nil {
		t.Fatalf("LockAcquireResult = %v, %v", got, err)
	}
	if c := f.take(); !slices.Equal(c, []string{"evalsha"}) {
		t.Fatalf("LockAcquireCmd sent %v", c)
	}
	// Without the script in the cache XCmd does not recover.
	f.mu.Lock()
	f.cache = nil
	f.mu.Unlock()
	_, err := generated.LockAcquireResult(generated.LockAcquireCmd(ctx, f, generated.LockAcquireKeys{Lock: "n"},
		generated.LockAcquireArgs{LeaseMS: 30000, Field: "c:1", Holds: 1}))
	if !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatalf("LockAcquireCmd without the script: %v, want NOSCRIPT", err)
	}
}

// fipsOnly reports whether GODEBUG puts the binary in FIPS 140 only mode,
// where SHA-1 panics.
func fipsOnly() bool {
	for _, kv := range strings.Split(os.Getenv("GODEBUG"), ",") {
		if strings.TrimSpace(kv) == "fips140=only" {
			return true
		}
	}
	return false
}
