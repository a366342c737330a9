package lualockrueidis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/extra/lualockrueidis"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/harness"
)

// lease is the lease of the tests' holds: a fixed lease keeps the
// watchdog, whose renewals go through the go-redis client, out of them.
const lease = 30 * time.Second

// newClient returns a lualock client on d whose scripts go through the
// Scripter on rc (counted), closed at the test's end.
func newClient(t *testing.T, d deployment) (*lualock.Client, *counting) {
	t.Helper()
	rc := &counting{Client: d.rc}
	c, err := lualock.New(d.rdb, lualock.Options{Scripter: lualockrueidis.Scripter(rc)})
	if err != nil {
		t.Fatalf("lualock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, rc
}

// TestLualock_kinds takes and releases a reentrant lock, a fair lock, both
// sides of a read-write lock and semaphore permits with the scripts sent
// by rueidis: each excludes what it must, and go-redis sends no script.
func TestLualock_kinds(t *testing.T) {
	onEach(t, func(t *testing.T, d deployment) {
		ctx := t.Context()
		c, rc := newClient(t, d)
		for _, kind := range []struct {
			name string
			make func(string) *lualock.Lock
		}{{"reentrant", c.NewLock}, {"fair", c.NewFairLock}} {
			name := uniqueName(t) + "_" + kind.name
			l, other := kind.make(name), kind.make(name)
			must(t, l.LockLease(ctx, lease))
			must(t, l.LockLease(ctx, lease)) // re-entry
			if n, err := l.HoldCount(ctx); err != nil || n != 2 {
				t.Errorf("%s: HoldCount = %d, %v; want 2", kind.name, n, err)
			}
			if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
				t.Errorf("%s: TryLock of another handle while held = %v, want ErrNotObtained", kind.name, err)
			}
			must(t, l.Unlock(ctx))
			must(t, l.Unlock(ctx))
			if locked, err := l.IsLocked(ctx); err != nil || locked {
				t.Errorf("%s: IsLocked after the last Unlock = %t, %v", kind.name, locked, err)
			}
			must(t, other.TryLockLease(ctx, 0, lease))
			must(t, other.Unlock(ctx))
		}

		rwName := uniqueName(t) + "_rw"
		r1, r2 := c.NewReadWriteLock(rwName).ReadLock(), c.NewReadWriteLock(rwName).ReadLock()
		w := c.NewReadWriteLock(rwName).WriteLock()
		must(t, r1.LockLease(ctx, lease))
		must(t, r2.LockLease(ctx, lease)) // readers share
		if err := w.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Errorf("write TryLock under two readers = %v, want ErrNotObtained", err)
		}
		must(t, r1.Unlock(ctx))
		must(t, r2.Unlock(ctx))
		must(t, w.TryLockLease(ctx, 0, lease))
		if err := r1.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Errorf("read TryLock under the writer = %v, want ErrNotObtained", err)
		}
		must(t, w.Unlock(ctx))

		sem := c.NewSemaphore(uniqueName(t) + "_sem")
		if ok, err := sem.TrySetPermits(ctx, 2); err != nil || !ok {
			t.Fatalf("TrySetPermits = %t, %v", ok, err)
		}
		must(t, sem.Acquire(ctx, 2))
		if err := sem.TryAcquire(ctx, 1, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Errorf("TryAcquire with no permit left = %v, want ErrNotObtained", err)
		}
		must(t, sem.Release(ctx, 2))
		if n, err := sem.AvailablePermits(ctx); err != nil || n != 2 {
			t.Errorf("AvailablePermits after the release = %d, %v; want 2", n, err)
		}
		if _, err := sem.DrainPermits(ctx); err != nil {
			t.Errorf("DrainPermits: %v", err)
		}

		if n := d.scripts.Load(); n != 0 {
			t.Errorf("the go-redis client sent %d script calls, want 0: every script goes through the Scripter", n)
		}
		if rc.count("evalsha") == 0 {
			t.Error("no EVALSHA went through rueidis")
		}
	})
}

// TestLualock_noScript: after SCRIPT FLUSH (a restarted or new node) a
// lock still works: the NOSCRIPT reply reaches lualock as it does from
// go-redis, which loads the script (on every master of a cluster) and
// calls again.
func TestLualock_noScript(t *testing.T) {
	onEach(t, func(t *testing.T, d deployment) {
		ctx := t.Context()
		c, rc := newClient(t, d)
		l := c.NewLock(uniqueName(t))
		must(t, l.LockLease(ctx, lease))
		must(t, l.Unlock(ctx))
		must(t, d.rdb.ScriptFlush(ctx).Err()) // every master of a cluster
		if ok, err := d.rdb.ScriptExists(ctx, generated.LockAcquireSHA1).Result(); err != nil || ok[0] {
			t.Fatalf("ScriptExists after SCRIPT FLUSH = %v, %v", ok, err)
		}
		before := rc.count("evalsha")
		must(t, l.LockLease(ctx, lease))
		must(t, l.Unlock(ctx))
		if n := rc.count("evalsha") - before; n < 3 {
			t.Errorf("%d EVALSHA after the flush, want at least 3 (the acquire twice, around its load)", n)
		}
		if ok, err := d.rdb.ScriptExists(ctx, generated.LockAcquireSHA1).Result(); err != nil || !ok[0] {
			t.Errorf("the acquire script after the lock: loaded on every master = %v, %v; want true", ok, err)
		}
		if n := d.scripts.Load(); n != 0 {
			t.Errorf("the go-redis client sent %d script calls, want 0", n)
		}
	})
}

// TestLualock_errorReplies: a key of another type gives the same errors
// through rueidis as through go-redis: ErrWrongType from a force unlock,
// Redis's WRONGTYPE error from an acquisition.
func TestLualock_errorReplies(t *testing.T) {
	onEach(t, func(t *testing.T, d deployment) {
		ctx := t.Context()
		viaRueidis, _ := newClient(t, d)
		viaGoRedis, err := lualock.New(d.rdb, lualock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = viaGoRedis.Close() })
		name := uniqueName(t)
		must(t, d.rdb.Set(ctx, name, "not a lock", time.Minute).Err())

		_, got := viaRueidis.NewLock(name).ForceUnlock(ctx)
		_, want := viaGoRedis.NewLock(name).ForceUnlock(ctx)
		if !errors.Is(got, lualock.ErrWrongType) || !errors.Is(want, lualock.ErrWrongType) {
			t.Errorf("ForceUnlock of a string key = %v (go-redis: %v), want ErrWrongType from both", got, want)
		}
		sameError(t, got, want)

		got = viaRueidis.NewLock(name).TryLockLease(ctx, 0, lease)
		want = viaGoRedis.NewLock(name).TryLockLease(ctx, 0, lease)
		if !redis.HasErrorPrefix(got, "WRONGTYPE") {
			t.Errorf("TryLock of a string key = %v, want Redis's WRONGTYPE", got)
		}
		sameError(t, got, want)
		var rerr redis.Error
		if errors.As(got, &rerr) != errors.As(want, &rerr) {
			t.Errorf("TryLock of a string key: a redis.Error through rueidis %t, through go-redis %t", errors.As(got, &rerr), errors.As(want, &rerr))
		}
		if v, err := d.rdb.Get(ctx, name).Result(); err != nil || v != "not a lock" {
			t.Errorf("the key after the failed calls = %q, %v; want it unchanged", v, err)
		}
		must(t, d.rdb.Del(ctx, name).Err())
	})
}

// sameError fails unless both errors are there, with the same text.
func sameError(t *testing.T, got, want error) {
	t.Helper()
	if got == nil || want == nil || got.Error() != want.Error() {
		t.Errorf("error through rueidis %v, through go-redis %v: want the same", got, want)
	}
}

// TestLualock_exclusion: a few goroutines, each with its own handle, take
// one lock in turn through the Scripter: never two inside at once, no
// update lost.
func TestLualock_exclusion(t *testing.T) {
	onEach(t, func(t *testing.T, d deployment) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		c, _ := newClient(t, d)
		const workers, rounds = 6, 25
		for _, kind := range []struct {
			name string
			make func(string) *lualock.Lock
		}{{"reentrant", c.NewLock}, {"fair", c.NewFairLock}} {
			name := uniqueName(t) + "_" + kind.name
			var inside atomic.Bool
			counter := 0 // guarded by the distributed lock only
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := kind.make(name)
					for range rounds {
						if err := l.LockLease(ctx, lease); err != nil {
							errs <- err
							return
						}
						if !inside.CompareAndSwap(false, true) {
							errs <- errors.New("two holders at once")
							_ = l.Unlock(ctx)
							return
						}
						counter++
						inside.Store(false)
						if err := l.Unlock(ctx); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("%s: %v", kind.name, err)
			}
			if counter != workers*rounds {
				t.Errorf("%s: counter %d, want %d (a lost update means two holders)", kind.name, counter, workers*rounds)
			}
		}
	})
}

// TestLualock_context: a call that Redis does not answer (writes paused)
// ends with its context, through the Scripter and through a lock.
func TestLualock_context(t *testing.T) {
	ctx := t.Context()
	srv := harness.StartStandalone(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaintNotificationsConfig: harness.NoMaintNotifications()})
	t.Cleanup(func() { _ = rdb.Close() })
	d := deployment{name: "standalone", rdb: rdb, rc: newRueidis(t, srv.Addr()), scripts: new(atomic.Int64)}
	c, _ := newClient(t, d)
	s := lualockrueidis.Scripter(d.rc)
	sha, err := s.ScriptLoad(ctx, "return redis.call('INCR', KEYS[1])").Result()
	must(t, err)
	key := uniqueName(t)

	// Scripts are writes: CLIENT PAUSE WRITE holds them in Redis until
	// CLIENT UNPAUSE (or 60 s), while the test's own commands still run.
	must(t, rdb.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err())
	paused := true
	unpause := func() {
		if paused {
			paused = false
			must(t, rdb.Do(ctx, "CLIENT", "UNPAUSE").Err())
		}
	}
	defer unpause()

	callCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.EvalSha(callCtx, sha, []string{key}).Err() }()
	// Cancel once Redis holds the call.
	for blocked(t, rdb) == 0 {
		select {
		case err := <-done:
			t.Fatalf("EvalSha returned %v while writes are paused", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("EvalSha cancelled while Redis holds it = %v, want context.Canceled", err)
	}

	lockCtx, cancelLock := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelLock()
	if err := c.NewLock(key+"_lock").LockLease(lockCtx, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock while Redis holds its script = %v, want its context's deadline", err)
	}
	// Both returned while writes were still paused: unpause, and the
	// transport works again.
	unpause()
	l := c.NewLock(key + "_after")
	must(t, l.LockLease(ctx, lease))
	must(t, l.Unlock(ctx))
}

// blocked is the number of clients Redis holds (INFO clients).
func blocked(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(t.Context(), "clients").Result()
	must(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "blocked_clients:"); ok {
			var n int
			_, _ = fmt.Sscan(v, &n)
			return n
		}
	}
	t.Fatal("INFO clients has no blocked_clients")
	return 0
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
