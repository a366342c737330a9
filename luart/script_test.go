package luart_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/luart"
)

// The scripts of these tests. Their SHA1s are those of their sources (as
// luagen computes them), so Redis loads them under that name.
var (
	idempotent = &luart.Script{Name: "get", Source: "return redis.call('get', KEYS[1])\n",
		SHA1: "1d0b3b1b3ec72ff4c8e5d8c64a0ae6c6bd4b1f2a", Keys: []string{"k"}, Return: "string?", Idempotent: true}
	notIdempotent = &luart.Script{Name: "incr", Source: "return redis.call('incr', KEYS[1])\n",
		SHA1: "2d0b3b1b3ec72ff4c8e5d8c64a0ae6c6bd4b1f2a", Keys: []string{"k"}, Return: "int"}
	library = &luart.Library{Name: "lib", Source: "#!lua name=lib\n"}
	inLib   = &luart.Script{Name: "fn", Library: library, Idempotent: true}
	inLibRO = &luart.Script{Name: "fn_ro", Library: library, ReadOnly: true}
)

// fake is a redis.Scripter and luart.FunctionCaller that records the
// commands it gets and answers "ok", or fails the next calls with an error.
// It has every script loaded unless noscript is set. Commands it does not
// implement panic (the embedded nil interface).
type fake struct {
	redis.Scripter
	mu       sync.Mutex
	calls    []string
	failErr  error
	failN    int
	noscript bool // EVALSHA answers NOSCRIPT until SCRIPT LOAD; FCALL "Function not found" until FUNCTION LOAD
}

func (f *fake) fail(err error, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failErr, f.failN = err, n
}

func (f *fake) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fake) reply(ctx context.Context, name string) *redis.Cmd {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	cmd := redis.NewCmd(ctx, name)
	switch {
	case f.failN > 0:
		f.failN--
		cmd.SetErr(f.failErr)
	case f.noscript && strings.HasPrefix(name, "fcall"):
		cmd.SetErr(redisErr("ERR Function not found"))
	case f.noscript:
		cmd.SetErr(redisErr("NOSCRIPT No matching script. Please use EVAL."))
	default:
		cmd.SetVal("ok")
	}
	return cmd
}

func (f *fake) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return f.reply(ctx, "evalsha "+sha)
}

func (f *fake) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return f.reply(ctx, "evalsha_ro "+sha)
}

func (f *fake) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return f.reply(ctx, "eval")
}

func (f *fake) ScriptLoad(ctx context.Context, src string) *redis.StringCmd {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "script load")
	f.noscript = false
	cmd := redis.NewStringCmd(ctx)
	for _, s := range []*luart.Script{idempotent, notIdempotent} {
		if s.Source == src {
			cmd.SetVal(s.SHA1)
		}
	}
	return cmd
}

func (f *fake) FCall(ctx context.Context, fn string, keys []string, args ...any) *redis.Cmd {
	return f.reply(ctx, "fcall "+fn)
}

func (f *fake) FCallRO(ctx context.Context, fn string, keys []string, args ...any) *redis.Cmd {
	return f.reply(ctx, "fcall_ro "+fn)
}

func (f *fake) FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "function load replace")
	f.noscript = false
	cmd := redis.NewStringCmd(ctx)
	cmd.SetVal(library.Name)
	return cmd
}

// scripterOnly hides every method of a client but redis.Scripter's: it
// cannot FCALL.
type scripterOnly struct{ redis.Scripter }

// TestRun_noscript: NOSCRIPT, SCRIPT LOAD, EVALSHA again; never EVAL. The
// same through FCALL: a function Redis does not know loads the library.
func TestRun_noscript(t *testing.T) {
	ctx := context.Background()
	f := &fake{noscript: true}
	if v, err := idempotent.Run(ctx, f, []string{"k"}); v != "ok" || err != nil {
		t.Fatalf("Run = %v, %v", v, err)
	}
	want := []string{"evalsha " + idempotent.SHA1, "script load", "evalsha " + idempotent.SHA1}
	if got := f.take(); !equal(got, want) {
		t.Errorf("Run after NOSCRIPT sent %q, want %q", got, want)
	}
	ro := *idempotent
	ro.ReadOnly = true
	if _, err := ro.Run(ctx, f, []string{"k"}); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !equal(got, []string{"evalsha_ro " + idempotent.SHA1}) {
		t.Errorf("a read-only script sent %q, want EVALSHA_RO", got)
	}

	f = &fake{noscript: true}
	if v, err := inLib.Run(ctx, luart.WithRetry(f, luart.Retry{Attempts: 1}), []string{"k"}); v != "ok" || err != nil {
		t.Fatalf("Run in a library = %v, %v", v, err)
	}
	want = []string{"fcall fn", "function load replace", "fcall fn"}
	if got := f.take(); !equal(got, want) {
		t.Errorf("Run of an unknown function sent %q, want %q", got, want)
	}
	if _, err := inLibRO.Run(ctx, f, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !equal(got, []string{"fcall_ro fn_ro"}) {
		t.Errorf("a read-only function sent %q, want FCALL_RO", got)
	}
	// A scripter that cannot FCALL: an *Error naming the script, nothing sent.
	_, err := inLib.Run(ctx, scripterOnly{f}, nil)
	var se *luart.Error
	if !errors.As(err, &se) || se.Script != "fn" || !strings.Contains(err.Error(), "cannot FCALL") {
		t.Errorf("Run through a scripter without FCALL = %v", err)
	}
	if got := f.take(); len(got) != 0 {
		t.Errorf("sent %q, want nothing", got)
	}
}

// TestPipeline: given a pipeline, bound to a policy or not, Run, Load and
// LoadAll send nothing and return ErrPipeline; Cmd queues the call.
func TestPipeline(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t, startRedis(t))
	p := rdb.Pipeline()
	for name, c := range map[string]redis.Scripter{"pipeline": p, "WithRetry(pipeline)": luart.WithRetry(p, luart.Retry{Attempts: 1})} {
		if _, err := idempotent.Run(ctx, c, []string{"k"}); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: Run = %v, want ErrPipeline", name, err)
		}
		if err := idempotent.Load(ctx, c); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: Load = %v, want ErrPipeline", name, err)
		}
		if err := luart.LoadAll(ctx, c, idempotent, inLib); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: LoadAll = %v, want ErrPipeline", name, err)
		}
		if err := library.Load(ctx, c); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: Library.Load = %v, want ErrPipeline", name, err)
		}
		if err := inLib.Load(ctx, c); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: Load of a library's script = %v, want ErrPipeline", name, err)
		}
		if n := p.Len(); n != 0 {
			t.Errorf("%s: %d commands queued, want none", name, n)
		}
		idempotent.Cmd(ctx, c, []string{"k"})
		if n := p.Len(); n != 1 {
			t.Errorf("%s: Cmd queued %d commands, want 1", name, n)
		}
		p.Discard()
	}
}

// TestLoad_real loads a script into redis-server, through a policy and
// directly, and runs it; a wrong SHA1 is an error naming the script.
func TestLoad_real(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t, startRedis(t))
	s := realScript(t, rdb)
	if err := luart.LoadAll(ctx, luart.WithRetry(rdb, luart.Retry{Attempts: 1}), s); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	if ok, _ := rdb.ScriptExists(ctx, s.SHA1).Result(); !equal(ok, []bool{true}) {
		t.Fatalf("SCRIPT EXISTS after LoadAll = %v", ok)
	}
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Run(ctx, rdb, []string{"k"}); v != "v" || err != nil {
		t.Errorf("Run = %v, %v", v, err)
	}
	bad := *s
	bad.SHA1 = strings.Repeat("0", 40)
	err := bad.Load(ctx, rdb)
	var se *luart.Error
	if !errors.As(err, &se) || se.Script != s.Name || !strings.Contains(err.Error(), "want "+bad.SHA1) {
		t.Errorf("Load with a wrong SHA1 = %v", err)
	}
	if err := luart.LoadAll(ctx, rdb, s, &bad); err == nil || !strings.Contains(err.Error(), "want "+bad.SHA1) {
		t.Errorf("LoadAll with a wrong SHA1 = %v", err)
	}
}

// TestLoad_ring: a *redis.Ring, bound to a policy, gets the script on every
// shard (EVALSHA goes to the shard of its first key).
func TestLoad_ring(t *testing.T) {
	ctx := context.Background()
	a, b := startRedis(t), startRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a, "b": b}})
	t.Cleanup(func() { _ = ring.Close() })
	s := realScript(t, newClient(t, a))
	if err := s.Load(ctx, luart.WithRetry(ring, luart.Retry{Attempts: 1})); err != nil {
		t.Fatalf("Load on a ring: %v", err)
	}
	for _, addr := range []string{a, b} {
		ok, err := newClient(t, addr).ScriptExists(ctx, s.SHA1).Result()
		if err != nil || !equal(ok, []bool{true}) {
			t.Errorf("shard %s: SCRIPT EXISTS = %v, %v; want loaded", addr, ok, err)
		}
	}
}

// realScript returns idempotent with the SHA1 Redis gives its source (the
// test computes no hash itself).
func realScript(t *testing.T, c *redis.Client) *luart.Script {
	t.Helper()
	sha, err := c.ScriptLoad(context.Background(), idempotent.Source).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	s := *idempotent
	s.SHA1 = sha
	return &s
}

// TestLoadAll_library loads a library once for all its scripts.
func TestLoadAll_library(t *testing.T) {
	f := &fake{}
	if err := luart.LoadAll(context.Background(), f, inLib, inLibRO); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !equal(got, []string{"function load replace"}) {
		t.Errorf("LoadAll of two scripts of one library sent %q, want one FUNCTION LOAD REPLACE", got)
	}
}
