package lualock_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// Tests of Options.Scripter on miniredis; the same with go-redis's
// auto-pipeliner on real servers is in ../tests.

// scCounter is a redis.Scripter that counts the script calls it runs, by
// script name.
type scCounter struct {
	redis.Scripter
	mu    sync.Mutex
	calls map[string]int
}

func (s *scCounter) count(sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[scName(sha)]++
}

func (s *scCounter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	s.count(sha)
	return s.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (s *scCounter) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	s.count(sha)
	return s.Scripter.EvalShaRO(ctx, sha, keys, args...)
}

func (s *scCounter) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// scName names the script whose SHA1 is sha.
func scName(sha string) string {
	for _, s := range generated.Scripts {
		if s.SHA1 == sha {
			return s.Name
		}
	}
	return "unknown " + sha
}

func TestOptions_New_scripterInvalid(t *testing.T) {
	mr, rdb := lkMini(t)
	before := lkSnapshot(mr)
	var nilClient *redis.Client
	for name, s := range map[string]redis.Scripter{
		"nil *redis.Client": nilClient,
		"a pipeline":        rdb.Pipeline(),
		"a transaction":     rdb.TxPipeline(),
	} {
		c, err := lualock.New(rdb, lualock.Options{Scripter: s})
		if !errors.Is(err, lualock.ErrInvalid) || c != nil {
			t.Errorf("New with %s as Scripter = %v, %v; want nil, ErrInvalid", name, c, err)
		}
		if c != nil {
			_ = c.Close()
		}
	}
	if after := lkSnapshot(mr); after != before {
		t.Errorf("New with a bad Scripter sent %d commands, want none", after.commands-before.commands)
	}
}

func TestOptions_New_scripterAutoPipeline(t *testing.T) {
	mr, rdb := lkMini(t)
	ap, err := rdb.AutoPipeline()
	if err != nil {
		t.Fatalf("AutoPipeline: %v", err)
	}
	// Counted on their way into the auto-pipeliner, which sends them.
	sc := &scCounter{Scripter: ap, calls: map[string]int{}}
	before := lkSnapshot(mr)
	c := lkClient(t, rdb, lualock.Options{Scripter: sc})
	if after := lkSnapshot(mr); after != before {
		t.Errorf("New sent %d commands, want none", after.commands-before.commands)
	}
	l := c.NewLock("scripter-ap")
	if err := l.LockLease(t.Context(), time.Second); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	if held, err := l.IsHeld(t.Context()); err != nil || !held {
		t.Errorf("IsHeld = %v, %v; want true", held, err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	calls := sc.snapshot()
	for _, s := range []string{"lock_acquire", "lock_status", "lock_release"} {
		if calls[s] == 0 {
			t.Errorf("%s never ran through the auto-pipeliner (calls %v)", s, calls)
		}
	}
}

// TestClient_Scripter_runsEveryLockScript checks that with Options.Scripter
// every lock script of both kinds of lock runs through it, none through
// the redis client given to New, and that the locks still work: reentry,
// a waiter woken by the release, a fair waiter that gives up.
func TestClient_Scripter_runsEveryLockScript(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	hook := &rtFaults{}
	rdb.AddHook(hook)
	other := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = other.Close() })
	sc := &scCounter{Scripter: other, calls: map[string]int{}}
	c := lkClient(t, rdb, lualock.Options{Scripter: sc, FairWait: time.Second})

	for _, kind := range []struct {
		name string
		make func(string) *lualock.Lock
	}{
		{"reentrant", c.NewLock},
		{"fair", c.NewFairLock},
	} {
		t.Run(kind.name, func(t *testing.T) {
			name := "scripter-" + kind.name
			a, b := kind.make(name), kind.make(name)
			if err := a.LockLease(ctx, 10*time.Second); err != nil {
				t.Fatalf("LockLease: %v", err)
			}
			if err := a.LockLease(ctx, 10*time.Second); err != nil {
				t.Fatalf("re-entry: %v", err)
			}
			if n, err := a.HoldCount(ctx); err != nil || n != 2 {
				t.Fatalf("HoldCount = %d, %v; want 2", n, err)
			}
			// b waits; a's last Unlock wakes it.
			got := make(chan error, 1)
			go func() { got <- b.TryLockLease(ctx, 5*time.Second, 10*time.Second) }()
			waitUntil(t, func() bool { return c.Stats().Waiters > 0 }) // the second handle waits
			for range 2 {
				if err := a.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiter: %v", err)
			}
			// a gives up waiting (the fair lock's leave script).
			if err := a.TryLock(ctx, 20*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
				t.Fatalf("TryLock behind b = %v, want ErrNotObtained", err)
			}
			if ok, err := a.ForceUnlock(ctx); err != nil || !ok {
				t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
			}
			for _, k := range mr.Keys() {
				if !strings.HasPrefix(k, "redisson_unlock_latch") { // latches expire
					t.Errorf("key %q left behind", k)
				}
			}
		})
	}

	calls := sc.snapshot()
	for _, s := range []string{
		"lock_acquire", "lock_release", "lock_status", "lock_force_release",
		"fair_acquire", "fair_release", "fair_leave", "fair_force_release",
	} {
		if calls[s] == 0 {
			t.Errorf("%s never ran through Options.Scripter (calls %v)", s, calls)
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	for sha, n := range hook.calls {
		if sha != "" { // not a script
			t.Errorf("%s ran %d times through the redis client given to New, want 0 with a Scripter", scName(sha), n)
		}
	}
	for _, p := range hook.pipelines {
		for _, sha := range p {
			if sha != "" {
				t.Errorf("%s ran in a pipeline of the redis client given to New, want 0 with a Scripter", scName(sha))
			}
		}
	}
}
