package family

// The fenced and spin locks through the Go API (lualock.Client's
// NewFencedLock, NewSpinLock) on every backend, and the scenarios that
// every primitive of the family shares.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestLockFamily: the fenced lock's tokens, the spin lock, and for every
// primitive's handle the common scenarios and the lost signal.
func TestLockFamily(t *testing.T) {
	backends.Table(t, []backends.Scenario{
		{Name: "fencedTokens", Run: fencedTokens},
		{Name: "spinLock", Run: spinLock},
		{Name: "commonScenarios", Run: commonScenarios},
		{Name: "lostOnDelete", Run: lostOnDelete},
	})
}

// fencedTokens: every acquisition takes a larger token, re-entry included,
// across owners and clients; Token is the current hold's, 0 without one; the
// counter never goes.
func fencedTokens(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	c := backends.NewClient(t, rdb, lualock.Options{})
	ctx := context.Background()
	name := backends.UniqueName(t)
	f := c.NewFencedLock(name)
	if f.Token() != 0 {
		t.Fatalf("Token before any hold = %d", f.Token())
	}
	t1, err := f.LockToken(ctx)
	ok(t, "LockToken", err)
	if t1 != 1 || f.Token() != 1 {
		t.Fatalf("first token %d, Token %d; want 1", t1, f.Token())
	}
	t2, err := f.TryLockToken(ctx, 0)
	ok(t, "re-entry", err)
	if t2 != 2 || f.Token() != 2 {
		t.Fatalf("re-entry token %d, Token %d; want 2", t2, f.Token())
	}
	other := backends.NewClient(t, rdb, lualock.Options{}).NewFencedLock(name)
	if tk, err := other.TryLockToken(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) || tk != 0 {
		t.Fatalf("other owner = %d, %v; want ErrNotObtained", tk, err)
	}
	ok(t, "unlock", f.Unlock(ctx))
	ok(t, "unlock", f.Unlock(ctx))
	if f.Token() != 0 {
		t.Fatalf("Token after the last unlock = %d, want 0", f.Token())
	}
	t3, err := other.LockToken(ctx)
	ok(t, "other", err)
	if t3 != 3 {
		t.Fatalf("other client's token %d, want 3", t3)
	}
	ok(t, "other unlock", other.Unlock(ctx))
	ok(t, "plain Lock", f.Lock(ctx))
	if f.Token() != 4 {
		t.Fatalf("Token after a plain Lock = %d, want 4", f.Token())
	}
	ok(t, "unlock", f.Unlock(ctx))
	wantString(t, rdb, "redisson_lock_token:{"+name+"}", "4")

	// Many owners at once: tokens in the order of the holds increase.
	var mu sync.Mutex
	var seen []int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := c.NewFencedLock(name)
			for range 25 {
				tk, err := l.LockToken(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen = append(seen, tk)
				mu.Unlock()
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
		t.Fatal(err)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("hold %d got token %d after %d", i, seen[i], seen[i-1])
		}
	}
	del(t, rdb, "redisson_lock_token:{"+name+"}")
}

// spinLock: the reentrant lock without pub/sub: nothing subscribes, nothing
// is published, and a waiter polls its way to the lock within the back-off's
// cap of a release.
func spinLock(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	c := backends.NewClient(t, rdb, lualock.Options{})
	ctx := context.Background()
	n := newNames(backends.UniqueName(t), false)
	ch := listen(t, b, rdb, n.channel)
	a, w := c.NewSpinLock(n.name), c.NewSpinLock(n.name)
	ok(t, "a", a.Lock(ctx))
	ok(t, "a again", a.TryLock(ctx, 0))
	is(t, "w beside a", w.TryLock(ctx, 0), lualock.ErrNotObtained)
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := w.Lock(ctx)
		got <- time.Now()
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond) // the waiter polls; its back-off is at its cap
	ok(t, "a unlock", a.Unlock(ctx))
	ok(t, "a unlock", a.Unlock(ctx))
	released := time.Now()
	at := <-got
	ok(t, "w", <-errc)
	if d := at.Sub(released); d > 500*time.Millisecond {
		t.Fatalf("spin waiter got the lock %v after the release, want within its back-off cap (128ms) and slack", d)
	}
	if subs := backends.NumSub(t, rdb, []string{n.channel})[n.channel]; subs != int64(len(ch.subs)) {
		t.Fatalf("subscribers of %s = %d; want only the test's %d", n.channel, subs, len(ch.subs))
	}
	backends.WantHash(t, rdb, n.name, map[string]string{w.Field(): "1"})
	ok(t, "w unlock", w.Unlock(ctx))
	ch.want()
	ok(t, "a", a.Lock(ctx))
	if deleted, err := w.ForceUnlock(ctx); err != nil || !deleted {
		t.Fatalf("ForceUnlock = %v, %v", deleted, err)
	}
	ch.want()
	is(t, "unlock after force", a.Unlock(ctx), lualock.ErrLockLost)
}

// countCmds counts the commands a client sends.
type countCmds struct {
	backends.PassHook
	n atomic.Int64
}

// ProcessHook counts the command.
func (h *countCmds) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts the pipeline's commands.
func (h *countCmds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// commonScenarios: for each primitive's handle (the read lock, the write
// lock, the fenced lock, the spin lock): a fixed lease runs out and a waiter
// takes over, a cancelled wait returns the context's error holding nothing,
// bad input is ErrInvalid with nothing sent to Redis.
func commonScenarios(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	kinds := []struct {
		name string
		mk   func(c *lualock.Client, name string) *lualock.Lock
	}{
		{"read", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).ReadLock() }},
		{"write", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).WriteLock() }},
		{"fenced", func(c *lualock.Client, n string) *lualock.Lock { return c.NewFencedLock(n).Handle() }},
		{"spin", func(c *lualock.Client, n string) *lualock.Lock { return c.NewSpinLock(n) }},
	}
	c := backends.NewClient(t, rdb, lualock.Options{})
	ctx := context.Background()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			name := backends.UniqueName(t)
			holder := k.mk(c, name)
			// A writer waits for a reader's lease; the others for their own kind.
			waiter := k.mk(c, name)
			if k.name == "read" {
				waiter = c.NewReadWriteLock(name).WriteLock()
			}
			ok(t, "lease", holder.LockLease(ctx, 300*time.Millisecond))
			start := time.Now()
			ok(t, "waiter", waiter.TryLock(ctx, 5*time.Second))
			if d := time.Since(start); d < 200*time.Millisecond {
				t.Fatalf("the waiter got the lock %v after a 300ms lease began", d)
			}
			select {
			case <-holder.Done():
				is(t, "holder's cause", context.Cause(holder.Context()), lualock.ErrNotHeld)
			case <-time.After(time.Second):
				t.Fatal("the holder's Context did not end with its lease")
			}
			is(t, "holder's unlock after its lease", holder.Unlock(ctx), lualock.ErrNotHeld)

			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			is(t, "cancelled wait", holder.Lock(cctx), context.DeadlineExceeded)
			if n, err := holder.HoldCount(ctx); err != nil || n != 0 {
				t.Fatalf("holder holds %d, %v after a cancelled wait", n, err)
			}
			ok(t, "waiter unlock", waiter.Unlock(ctx))
		})
	}
	// Bad input: nothing sent.
	h := &countCmds{}
	c2 := backends.NewClient(t, backends.Hooked(t, rdb, h), lualock.Options{}) // a client of its own, to count what it sends
	before := h.n.Load()
	for _, k := range kinds {
		for _, bad := range []string{"", "a{b", "x}"} {
			is(t, k.name+" bad name "+bad, k.mk(c2, bad).Lock(ctx), lualock.ErrInvalid)
		}
		l := k.mk(c2, backends.UniqueName(t))
		is(t, k.name+" lease 0", l.LockLease(ctx, 0), lualock.ErrInvalid)
		is(t, k.name+" negative wait", l.TryLock(ctx, -time.Second), lualock.ErrInvalid)
		is(t, k.name+" nil ctx", l.Lock(nil), lualock.ErrInvalid) //lint:ignore SA1012 a nil context is the bad input under test
	}
	if n := h.n.Load() - before; n != 0 {
		t.Fatalf("%d commands sent for bad input, want none", n)
	}
}

// lostOnDelete: a hold of each kind under the watchdog whose lock is deleted
// behind its back ends with ErrLockLost at the next renewal, and its Unlock
// says so.
func lostOnDelete(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	const lease = 900 * time.Millisecond
	c := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	ctx := context.Background()
	locks := map[string]*lualock.Lock{
		"read":   c.NewReadWriteLock(backends.UniqueName(t) + "-r").ReadLock(),
		"write":  c.NewReadWriteLock(backends.UniqueName(t) + "-w").WriteLock(),
		"fenced": c.NewFencedLock(backends.UniqueName(t) + "-f").Handle(),
		"spin":   c.NewSpinLock(backends.UniqueName(t) + "-s"),
	}
	for k, l := range locks {
		ok(t, k, l.Lock(ctx))
		del(t, rdb, l.Name())
	}
	for k, l := range locks {
		select {
		case <-l.Done():
			is(t, k+" cause", context.Cause(l.Context()), lualock.ErrLockLost)
		case <-time.After(2 * lease):
			t.Fatalf("%s: no lost signal within %v of the DEL", k, 2*lease)
		}
		is(t, k+" unlock", l.Unlock(ctx), lualock.ErrLockLost)
	}
}
