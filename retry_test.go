package lualock_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// rtyScripter is a redis.Scripter (given as Options.Scripter) that fails
// the first fail EVALSHA calls of one script with io.EOF, without sending
// them, and counts that script's calls.
type rtyScripter struct {
	redis.Scripter
	sha string

	mu    sync.Mutex
	fail  int
	calls int
}

func (s *rtyScripter) evalsha(ctx context.Context, sha string, send func() *redis.Cmd) *redis.Cmd {
	if sha != s.sha {
		return send()
	}
	s.mu.Lock()
	s.calls++
	failing := s.fail > 0
	if failing {
		s.fail--
	}
	s.mu.Unlock()
	if failing {
		cmd := redis.NewCmd(ctx, "evalsha", sha)
		cmd.SetErr(io.EOF)
		return cmd
	}
	return send()
}

func (s *rtyScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return s.evalsha(ctx, sha, func() *redis.Cmd { return s.Scripter.EvalSha(ctx, sha, keys, args...) })
}

func (s *rtyScripter) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return s.evalsha(ctx, sha, func() *redis.Cmd { return s.Scripter.EvalShaRO(ctx, sha, keys, args...) })
}

func (s *rtyScripter) counted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// rtyClient returns a client on a new miniredis whose scripts go through s,
// with the scripts loaded (so that no NOSCRIPT adds a call).
func rtyClient(t *testing.T, s *rtyScripter, o lualock.Options) *lualock.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := generated.LoadAll(t.Context(), rdb); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	s.Scripter = rdb
	o.Scripter = s
	c, err := lualock.New(rdb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The acquisition loop is the only retry loop of an acquire script: a
// transient error costs one call, and the next call waits for the loop's
// own backoff (Options.RetryMin), not for luart's hidden retries. Here the
// backoff (a minute) outlasts the wait (200 ms), so one call is all
// TryLock sends; with luart's default policy under the loop, the script
// was sent three times and took the lock on the third.
func TestLock_TryLock_transientSentOnce(t *testing.T) {
	s := &rtyScripter{sha: generated.LockAcquireSHA1, fail: 2}
	c := rtyClient(t, s, lualock.Options{RetryMin: time.Minute, RetryMax: time.Minute})
	l := c.NewLock("once")
	err := l.TryLock(t.Context(), 200*time.Millisecond)
	if !errors.Is(err, lualock.ErrUnavailable) || !errors.Is(err, io.EOF) {
		t.Errorf("TryLock after an EOF, with a minute of backoff = %v, want ErrUnavailable wrapping io.EOF", err)
	}
	if n := s.counted(); n != 1 {
		t.Errorf("acquire script sent %d times, want 1 (no retry under the acquisition loop)", n)
	}
}

// The calls that no loop of the runtime retries keep luagen's default
// policy (luart.DefaultRetry): a status read is sent three times on
// transient errors before the error is returned.
func TestLock_Status_transientRetried(t *testing.T) {
	s := &rtyScripter{sha: generated.LockStatusSHA1, fail: 5}
	c := rtyClient(t, s, lualock.Options{})
	_, err := c.NewLock("status").Status(t.Context())
	if !errors.Is(err, io.EOF) {
		t.Errorf("Status after EOFs = %v, want io.EOF", err)
	}
	if n := s.counted(); n != 3 {
		t.Errorf("status script sent %d times, want 3 (luart.DefaultRetry)", n)
	}
	s.mu.Lock()
	s.fail, s.calls = 2, 0
	s.mu.Unlock()
	if _, err := c.NewLock("status").Status(t.Context()); err != nil {
		t.Errorf("Status after 2 EOFs = %v, want the third call's reply", err)
	}
	if n := s.counted(); n != 3 {
		t.Errorf("status script sent %d times, want 3", n)
	}
}
