package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// crashable is a Redis that a test may crash and restart: a private
// redis-server, or a private miniredis.
type crashable interface {
	Kill()
	Restart() error
}

// miniServer makes a miniredis an crashable: a restart comes back empty, as a
// redis-server without persistence.
type miniServer struct{ mr *miniredis.Miniredis }

func (m miniServer) Kill() { m.mr.Close() }
func (m miniServer) Restart() error {
	m.mr.Close() // does nothing when killed already
	m.mr.FlushAll()
	return m.mr.Restart()
}

// onPrivate runs f on a private miniredis and a private redis-server; both
// can be killed and restarted. (The shared cluster cannot, and a private one
// costs several seconds to start; a cluster node's crash is the standalone
// case for the slots it serves.)
func onPrivate(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, s crashable)) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		f(t, rdb, miniServer{mr})
	})
	t.Run("standalone", func(t *testing.T) {
		s := harness.StartStandalone(t)
		rdb := s.Client()
		t.Cleanup(func() { _ = rdb.Close() })
		f(t, rdb, s)
	})
}

func TestLock_Lock_redisDown(t *testing.T) {
	backends.ShortParallel(t)
	onPrivate(t, testRedisDown)
}

// Scenario 15: with Redis down, calls fail with a clear error within their
// deadline, the hold whose Unlock could not reach Redis ends about one
// lease later (ErrNotHeld: Unlock stopped its renewals), and after
// a restart without persistence the lock is gone.
func testRedisDown(t *testing.T, rdb redis.UniversalClient, s crashable) {
	ctx := t.Context()
	const lease = 600 * time.Millisecond
	c, err := lualock.New(rdb, lualock.Options{WatchdogLease: lease})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := l.Context()
	lostAt := make(chan time.Time, 1)
	go func() { // ends at the latest when Close ends the hold
		<-hold.Done()
		lostAt <- time.Now()
	}()
	s.Kill()
	killed := time.Now()

	// Unlock while the hold is not known lost yet: the release cannot reach
	// Redis. Its ctx ends meanwhile, so it stops the renewal, tries again
	// under its own 2s context, and ends the hold.
	uctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	start := time.Now()
	err = l.Unlock(uctx)
	cancel()
	took := time.Since(start)
	t.Logf("Unlock(500ms ctx) with Redis down: %v after %v", err, took)
	if err == nil {
		t.Fatal("Unlock with Redis down succeeded")
	}
	if !strings.Contains(err.Error(), "not confirmed") {
		t.Errorf("Unlock with Redis down = %v, want it to say the release was not confirmed", err)
	}
	if limit := 500*time.Millisecond + 2*time.Second + 300*time.Millisecond; took > limit {
		t.Errorf("Unlock with a 500ms context returned after %v, want within the ctx and the 2s release timeout (%v)", took, limit)
	}

	start = time.Now()
	err = c.NewLock(name).TryLock(ctx, 500*time.Millisecond)
	took = time.Since(start)
	t.Logf("TryLock(500ms) with Redis down: %v after %v", err, took)
	if err == nil {
		t.Fatal("TryLock with Redis down succeeded")
	}
	if took > 600*time.Millisecond {
		t.Errorf("TryLock(500ms) with Redis down returned after %v, want about 500ms", took)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not name the lock", err)
	}
	if !errors.Is(err, lualock.ErrUnavailable) || errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock with Redis down: %v, want ErrUnavailable (not ErrNotObtained)", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("TryLock's own wait reported as the caller's context: %v", err)
	}

	select {
	case at := <-lostAt:
		lost := at.Sub(killed)
		t.Logf("Done fired %v after the kill (lease %v)", lost, lease)
		if limit := lease + lease/3; lost > limit {
			t.Errorf("Done fired %v after the kill, want within about one lease (%v)", lost, limit)
		}
	case <-time.After(5 * lease):
		t.Fatalf("Done did not fire within %v of the kill", 5*lease)
	}
	// Unlock began while the hold was live and stopped its renewals: the
	// lease that runs out meanwhile is the release's doing, no loss.
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) || errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("cause = %v, want ErrNotHeld (the lease ran out after Unlock stopped renewing it)", cause)
	}

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if !backends.Eventually(5*time.Second, func() bool { return rdb.Ping(ctx).Err() == nil }) {
		t.Fatal("Redis did not come back")
	}
	if n, err := rdb.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS after a restart without persistence = %d, %v; want 0", n, err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock after the unconfirmed Unlock = %v, want ErrNotHeld (that Unlock ended the hold)", err)
	}
	other := c.NewLock(name)
	if err := other.TryLock(ctx, 0); err != nil {
		t.Errorf("TryLock after the restart: %v", err)
	} else if err := other.Unlock(ctx); err != nil {
		t.Errorf("Unlock after the restart: %v", err)
	}
	closed = true
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Scenario 15, hung: a Redis that stops answering (SIGSTOP: connections
// stay open, nothing comes back). go-redis then holds a call until its
// ReadTimeout (3s) unless ContextTimeoutEnabled is set, yet a held lock must
// be reported lost about one lease after the pause, either way; with
// ContextTimeoutEnabled, TryLock also keeps to its wait.
func TestLock_Context_lostWhileRedisHangs(t *testing.T) {
	s := harness.StartStandalone(t)
	for _, ctxTimeout := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeout), func(t *testing.T) {
			ctx := t.Context()
			rdb := s.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = ctxTimeout })
			t.Cleanup(func() { _ = rdb.Close() })
			const lease = 600 * time.Millisecond
			c, err := lualock.New(rdb, lualock.Options{WatchdogLease: lease})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			name := backends.UniqueName(t)
			l := c.NewLock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			hold := l.Context()
			if err := s.Pause(); err != nil {
				t.Fatalf("Pause: %v", err)
			}
			paused := time.Now()
			resumed := false
			resume := func() {
				if !resumed {
					resumed = true
					if err := s.Resume(); err != nil {
						t.Errorf("Resume: %v", err)
					}
				}
			}
			defer resume()

			if ctxTimeout {
				start := time.Now()
				err := c.NewLock(name).TryLock(ctx, 300*time.Millisecond)
				took := time.Since(start)
				t.Logf("TryLock(300ms) on a hung Redis: %v after %v", err, took)
				if !errors.Is(err, lualock.ErrUnavailable) {
					t.Errorf("TryLock on a hung Redis = %v, want ErrUnavailable", err)
				}
				if took > 450*time.Millisecond {
					t.Errorf("TryLock(300ms) on a hung Redis returned after %v", took)
				}
			}
			select {
			case <-hold.Done():
				lost := time.Since(paused)
				t.Logf("Done fired %v after the pause (lease %v)", lost, lease)
				if limit := lease + lease/3; lost > limit {
					t.Errorf("Done fired %v after the pause, want within about one lease (%v)", lost, limit)
				}
			case <-time.After(5 * lease):
				t.Fatalf("Done did not fire within %v of the pause", 5*lease)
			}
			if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
				t.Errorf("cause = %v, want ErrLockLost", cause)
			}
			if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
				t.Errorf("Unlock after the loss = %v, want ErrLockLost", err)
			}
			resume()
			// The lease ran out while Redis hung. An acquisition that TryLock
			// sent meanwhile may still run once Redis reads it and take the
			// lock; nothing renews it, so it lapses within one lease.
			if !backends.Eventually(lease+300*time.Millisecond, func() bool { return rdb.Exists(ctx, name).Val() == 0 }) {
				t.Errorf("the lock still exists %v after Redis answers again", lease+300*time.Millisecond)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestLock_Context_lostOnRestart(t *testing.T) {
	onPrivate(t, testRedisRestart)
}

// Scenario 16: a restart without persistence while holding ends the hold
// with ErrLockLost within a renewal period + slack after the restart.
func testRedisRestart(t *testing.T, rdb redis.UniversalClient, s crashable) {
	ctx := t.Context()
	const lease = 600 * time.Millisecond
	c := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := l.Context()
	start := time.Now()
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	down := time.Since(start)
	elapsed := backends.WaitDone(t, hold, 3*lease, "restart")
	t.Logf("Done fired %v after the restart (which took %v; renewal period %v)", elapsed, down, lease/3)
	if limit := lease/3 + 150*time.Millisecond; elapsed > limit {
		t.Errorf("Done fired %v after the restart, want within a renewal period + slack (%v)", elapsed, limit)
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("cause = %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock after the loss = %v, want ErrLockLost", err)
	}
}
