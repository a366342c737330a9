package scripts_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/cmd/luagen/gen"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/luart"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Generated constants, retries, errors

func TestSHA1MatchesSource(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "lua", "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no ../../lua/*.lua")
	}
	byFile := map[string]*luart.Script{}
	for _, s := range generated.Scripts {
		if byFile[s.File] != nil {
			t.Errorf("two scripts from %s", s.File)
		}
		byFile[s.File] = s
	}
	if len(files) != len(generated.Scripts) {
		t.Errorf("%d .lua files but %d generated scripts", len(files), len(generated.Scripts))
	}
	// The Source of a script is its file with its includes expanded, as
	// luagen parses it; a file without includes is its own Source.
	parsed, diags := gen.Parse(os.DirFS(filepath.Join("..", "..")), gen.Config{Src: "lua"})
	if gen.HasErrors(diags) {
		t.Fatalf("luagen parse of ../../lua: %v", diags)
	}
	expanded := map[string]string{}
	for _, p := range parsed {
		expanded[p.File] = string(p.Source)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file := "lua/" + filepath.Base(f)
		s := byFile[file]
		if s == nil {
			t.Errorf("%s: no generated script", file)
			continue
		}
		want, ok := expanded[file]
		switch {
		case !ok:
			t.Errorf("%s: luagen did not parse it", file)
		case !strings.Contains(string(src), "@include") && want != string(src):
			t.Errorf("%s: has no include, but luagen's Source differs from the file", file)
		case s.Source != want:
			t.Errorf("%s: generated Source differs from the file with its includes expanded", file)
		}
		sum := sha1.Sum([]byte(s.Source))
		if want := hex.EncodeToString(sum[:]); s.SHA1 != want {
			t.Errorf("%s: generated SHA1 %s, sha1 of its Source %s", file, s.SHA1, want)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".lua"); s.Name != want {
			t.Errorf("%s: script name %q, want %q", file, s.Name, want)
		}
	}
	if !slices.IsSortedFunc(generated.Scripts, func(a, b *luart.Script) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Scripts is not sorted by name")
	}
	for _, c := range []struct {
		s         *luart.Script
		src, sha  string
		read, idm bool
	}{
		{generated.FairAcquireScript, generated.FairAcquireSource, generated.FairAcquireSHA1, false, true},
		{generated.FairForceReleaseScript, generated.FairForceReleaseSource, generated.FairForceReleaseSHA1, false, true},
		{generated.FairLeaveScript, generated.FairLeaveSource, generated.FairLeaveSHA1, false, true},
		{generated.FairReleaseScript, generated.FairReleaseSource, generated.FairReleaseSHA1, false, true},
		{generated.LockAcquireScript, generated.LockAcquireSource, generated.LockAcquireSHA1, false, true},
		{generated.LockForceReleaseScript, generated.LockForceReleaseSource, generated.LockForceReleaseSHA1, false, true},
		{generated.LockReleaseScript, generated.LockReleaseSource, generated.LockReleaseSHA1, false, true},
		{generated.LockRenewScript, generated.LockRenewSource, generated.LockRenewSHA1, false, true},
		{generated.LockStatusScript, generated.LockStatusSource, generated.LockStatusSHA1, true, true},
	} {
		if c.s.Source != c.src || c.s.SHA1 != c.sha || c.s.ReadOnly != c.read || c.s.Idempotent != c.idm {
			t.Errorf("%s: Script fields disagree with the constants or the header flags", c.s.Name)
		}
	}
}

// withRetry binds a retry policy to c (luart.WithRetry): there is no global
// to set.
func withRetry(c redis.Scripter, attempts int, backoff, maxBackoff time.Duration) redis.Scripter {
	return luart.WithRetry(c, luart.Retry{Attempts: attempts, Backoff: backoff, MaxBackoff: maxBackoff})
}

func TestRetry(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		fast := func(c redis.Scripter) redis.Scripter { return withRetry(c, 3, time.Millisecond, 4*time.Millisecond) }
		if err := generated.LoadAll(ctx, rdb); err != nil {
			t.Fatalf("LoadAll: %v", err)
		}
		l := newLockKeys(backends.UniqueName(t))

		// Idempotent: two transient failures, then success on the third call.
		rec := &backends.Recorder{Scripter: rdb, Fail: 2, FailErr: io.EOF}
		wantZero(t, "acquire after 2 EOFs")(acquire(fast(rec), l, "c1:1", 1, leaseMS))
		wantCalls(t, rec, map[string]int{"evalsha": 3})
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})

		loading := backends.RedisErr("LOADING Redis is loading the dataset in memory")
		rec = &backends.Recorder{Scripter: rdb, Fail: 2, FailErr: loading}
		got, err := generated.LockStatus(ctx, fast(rec), generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"})
		if err != nil || len(got) != 3 || got[1] != 1 {
			t.Fatalf("status after 2 LOADING = %v, %v", got, err)
		}
		wantCalls(t, rec, map[string]int{"evalsha_ro": 3})

		// Attempts is the number of calls in all: three failures are final.
		rec = &backends.Recorder{Scripter: rdb, Fail: 3, FailErr: io.EOF}
		_, err = release(fast(rec), l, "c1:1", "req-1", leaseMS, "publish")
		wantScriptErr(t, "release after 3 EOFs", err, "lock_release", "EOF")
		if !errors.Is(err, io.EOF) {
			t.Fatalf("release after 3 EOFs: %v is not io.EOF", err)
		}
		wantCalls(t, rec, map[string]int{"evalsha": 3})
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})

		// A reply error that is not transient is not retried.
		rec = &backends.Recorder{Scripter: rdb, Fail: 1, FailErr: backends.RedisErr("ERR something else")}
		_, err = release(fast(rec), l, "c1:1", "req-1", leaseMS, "publish")
		wantScriptErr(t, "release after ERR", err, "lock_release", "ERR something else")
		wantCalls(t, rec, map[string]int{"evalsha": 1})

		// Nor is a script's own error reply: the LOST error comes back after
		// one call.
		rec = &backends.Recorder{Scripter: rdb}
		_, err = acquire(fast(rec), l, "c2:1", 2, leaseMS)
		if !redis.HasErrorPrefix(err, "LOST") {
			t.Fatalf("LOST: %v", err)
		}
		wantCalls(t, rec, map[string]int{"evalsha": 1})

		// Not idempotent: never retried, whatever the error. The synthetic
		// script counts its runs.
		counter := newLockKeys(backends.UniqueName(t) + "-counter").name
		src := "return redis.call('incr', KEYS[1])\n"
		sum := sha1.Sum([]byte(src))
		once := &luart.Script{Name: "x", Source: src, SHA1: hex.EncodeToString(sum[:]), Keys: []string{"counter"}, Return: "int", Idempotent: false}
		if err := once.Load(ctx, rdb); err != nil {
			t.Fatalf("load x: %v", err)
		}
		for _, ferr := range []error{io.EOF, loading} {
			rec = &backends.Recorder{Scripter: rdb, Fail: 1, FailErr: ferr}
			_, err = once.Run(ctx, fast(rec), []string{counter})
			if !errors.Is(err, ferr) {
				t.Fatalf("non-idempotent run after %v: %v", ferr, err)
			}
			wantCalls(t, rec, map[string]int{"evalsha": 1})
		}
		backends.WantGone(t, rdb, counter)
		// The same script marked idempotent is retried, and runs once.
		again := *once
		again.Idempotent = true
		rec = &backends.Recorder{Scripter: rdb, Fail: 2, FailErr: io.EOF}
		v, err := again.Run(ctx, fast(rec), []string{counter})
		if err != nil || v != int64(1) {
			t.Fatalf("idempotent run = %v, %v; want 1", v, err)
		}
		wantCalls(t, rec, map[string]int{"evalsha": 3})
		if v, _ := get(t, rdb, counter); v != "1" {
			t.Fatalf("counter = %q, want 1", v)
		}

		// A context cancelled while a retry waits ends the call at once.
		slow := func(c redis.Scripter) redis.Scripter { return withRetry(c, 5, 10*time.Second, 10*time.Second) }
		cctx, cancel := context.WithCancel(ctx)
		rec = &backends.Recorder{Scripter: rdb, Fail: 5, FailErr: io.EOF, OnFail: cancel}
		start := time.Now()
		_, err = generated.LockAcquire(cctx, slow(rec), l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", Holds: 1})
		if err == nil || time.Since(start) > 2*time.Second {
			t.Fatalf("cancelled retry: %v after %v", err, time.Since(start))
		}
		wantCalls(t, rec, map[string]int{"evalsha": 1})
		// ... and a deadline during the backoff as well.
		dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		rec = &backends.Recorder{Scripter: rdb, Fail: 5, FailErr: io.EOF}
		start = time.Now()
		_, err = generated.LockAcquire(dctx, slow(rec), l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", Holds: 1})
		dcancel()
		if err == nil || time.Since(start) > 2*time.Second {
			t.Fatalf("retry past the deadline: %v after %v", err, time.Since(start))
		}
		wantCalls(t, rec, map[string]int{"evalsha": 1})

		// A cancelled context: a *luart.Error naming the script, and
		// errors.Is sees context.Canceled through it.
		cancel()
		_, err = generated.LockAcquire(cctx, rdb, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", Holds: 1})
		wantScriptErr(t, "cancelled context", err, "lock_acquire", "context canceled")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled context: errors.Is(%v, context.Canceled) = false", err)
		}
		for _, k := range []string{l.name, counter} { // two slots: one DEL each
			if err := rdb.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
