package family

// The Go API of the lock family (lualock.Client's NewReadWriteLock,
// NewFencedLock, NewSpinLock) on every backend: the scenarios of the
// reentrant lock's suite that apply, and each primitive's own.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// wakeBound bounds a wake-up after a release: a waiter that missed the
// message would sleep until its fallback timer (the holder's 30 s lease,
// capped by MaxWaitTimer, 10 s).
const wakeBound = time.Second

// apiEach runs f on every backend with a lualock client of options o.
func apiEach(t *testing.T, o lualock.Options, f func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.new(t)
			f(t, b, rdb, newClient(t, rdb, o))
		})
	}
}

func newClient(t *testing.T, rdb redis.UniversalClient, o lualock.Options) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v, want %v", what, err, want)
	}
}

// TestReadWriteLock_shareAndExclude: readers share, a writer is alone,
// both re-enter, the owner downgrades, an upgrade is refused.
func TestReadWriteLock_shareAndExclude(t *testing.T) {
	apiEach(t, lualock.Options{}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		ctx := context.Background()
		name := uniqueName(t)
		a, bb, w := c.NewReadWriteLock(name), c.NewReadWriteLock(name), c.NewReadWriteLock(name)

		ok(t, "a read", a.ReadLock().Lock(ctx))
		ok(t, "a read again", a.ReadLock().TryLock(ctx, 0))
		ok(t, "b read", bb.ReadLock().TryLock(ctx, 0))
		is(t, "w write beside readers", w.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		is(t, "a write (upgrade)", a.WriteLock().TryLock(ctx, 0), lualock.ErrUpgrade)
		if n, err := a.ReadLock().HoldCount(ctx); err != nil || n != 2 {
			t.Fatalf("a read HoldCount = %d, %v; want 2", n, err)
		}
		if l, err := w.ReadLock().IsLocked(ctx); err != nil || !l {
			t.Fatalf("read IsLocked = %v, %v; want true", l, err)
		}
		if l, err := w.WriteLock().IsLocked(ctx); err != nil || l {
			t.Fatalf("write IsLocked = %v, %v; want false", l, err)
		}
		for range 2 {
			ok(t, "a read unlock", a.ReadLock().Unlock(ctx))
		}
		is(t, "a read unlock, none left", a.ReadLock().Unlock(ctx), lualock.ErrNotHeld)
		ok(t, "b read unlock", bb.ReadLock().Unlock(ctx))

		ok(t, "w write", w.WriteLock().TryLock(ctx, 0))
		ok(t, "w write again", w.WriteLock().TryLock(ctx, 0))
		is(t, "a read beside a writer", a.ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		is(t, "a write beside a writer", a.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		// Downgrade: the writer reads, then leaves the write lock.
		ok(t, "w read under its write", w.ReadLock().TryLock(ctx, 0))
		ok(t, "w write unlock 1", w.WriteLock().Unlock(ctx))
		is(t, "a read while w still writes", a.ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		ok(t, "w write unlock 2", w.WriteLock().Unlock(ctx))
		if m := rdb.HGet(ctx, name, "mode").Val(); m != "read" {
			t.Fatalf("mode after the downgrade = %q, want read", m)
		}
		ok(t, "a read after the downgrade", a.ReadLock().TryLock(ctx, 0))
		is(t, "b write beside readers", bb.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		ok(t, "w read unlock", w.ReadLock().Unlock(ctx))
		ok(t, "a read unlock", a.ReadLock().Unlock(ctx))
		ok(t, "b write now", bb.WriteLock().TryLock(ctx, 0))
		ok(t, "b write unlock", bb.WriteLock().Unlock(ctx))
		wantGone(t, rdb, name)
	})
}

// TestReadWriteLock_wakeup: a writer waiting behind a reader, and readers
// waiting behind a writer, are woken by the release message within
// wakeBound (the fallback timer would be 10 s).
func TestReadWriteLock_wakeup(t *testing.T) {
	apiEach(t, lualock.Options{}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		ctx := context.Background()
		for _, holderWrites := range []bool{false, true} {
			name := uniqueName(t)
			h, wt := c.NewReadWriteLock(name), c.NewReadWriteLock(name)
			hold, wait := h.ReadLock(), wt.WriteLock()
			if holderWrites {
				hold, wait = h.WriteLock(), wt.ReadLock()
			}
			ok(t, "hold", hold.Lock(ctx))
			got := make(chan time.Time, 1)
			errc := make(chan error, 1)
			go func() {
				err := wait.Lock(ctx)
				got <- time.Now()
				errc <- err
			}()
			waitSubscribed(t, b, rdb, "redisson_rwlock:{"+name+"}")
			time.Sleep(20 * time.Millisecond) // let the waiter's attempt after subscribing pass
			ok(t, "release", hold.Unlock(ctx))
			released := time.Now()
			at := <-got
			ok(t, "waiter", <-errc)
			if d := at.Sub(released); d > wakeBound {
				t.Fatalf("holder writes %v: the waiter woke %v after the release, want within %v", holderWrites, d, wakeBound)
			} else {
				t.Logf("holder writes %v: woken %v after the release returned", holderWrites, max(d, 0))
			}
			ok(t, "waiter unlock", wait.Unlock(ctx))
		}
	})
}

// numSub counts the subscribers of ch, plain and sharded (miniredis has
// no sharded pub/sub: plain only).
func numSub(rdb redis.UniversalClient, b backend, ch string) (int64, error) {
	ctx := context.Background()
	if b.name == "miniredis" {
		m, err := rdb.PubSubNumSub(ctx, ch).Result()
		return m[ch], err
	}
	p, s, err := harness.NumSub(ctx, rdb, ch)
	return p + s, err
}

// waitSubscribed waits until ch has a subscriber of either kind.
func waitSubscribed(t *testing.T, b backend, rdb redis.UniversalClient, ch string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := numSub(rdb, b, ch)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no subscriber on %s within 10s (%v)", ch, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestReadWriteLock_watchdog: read and write holds under a 1.5 s watchdog
// outlive three leases (the read holds' timeout keys renewed with the
// lock), and a hold whose key is deleted is reported lost.
func TestReadWriteLock_watchdog(t *testing.T) {
	const lease = 1500 * time.Millisecond
	apiEach(t, lualock.Options{WatchdogLease: lease}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		if testing.Short() {
			t.Skip("-short: waits three leases")
		}
		ctx := context.Background()
		rname, wname := uniqueName(t)+"-r", uniqueName(t)+"-w"
		r, w := c.NewReadWriteLock(rname), c.NewReadWriteLock(wname)
		ok(t, "read", r.ReadLock().Lock(ctx))
		ok(t, "read again", r.ReadLock().Lock(ctx))
		ok(t, "write", w.WriteLock().Lock(ctx))
		ok(t, "write's read", w.ReadLock().Lock(ctx))
		wo := c.NewReadWriteLock(wname + "-only") // a write hold without read holds
		ok(t, "write alone", wo.WriteLock().Lock(ctx))
		time.Sleep(3*lease + lease/3)
		other := c.NewReadWriteLock(rname)
		is(t, "write beside the renewed reader", other.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		is(t, "read beside the renewed writer", c.NewReadWriteLock(wname).ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		for _, l := range []*lualock.Lock{r.ReadLock(), w.WriteLock(), w.ReadLock(), wo.WriteLock()} {
			select {
			case <-l.Done():
				t.Fatalf("a hold of %s ended: %v", l.Name(), context.Cause(l.Context()))
			default:
			}
		}
		is(t, "read beside the renewed lone writer", c.NewReadWriteLock(wname+"-only").ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
		ok(t, "lone writer's unlock", wo.WriteLock().Unlock(ctx))
		f := r.ReadLock().Field()
		for i := 1; i <= 2; i++ {
			k := "{" + rname + "}:" + f + ":rwlock_timeout:" + fmt.Sprint(i)
			if d := rdb.PTTL(ctx, k).Val(); d <= 0 {
				t.Fatalf("PTTL %s = %v after three leases, want a renewed key", k, d)
			}
		}
		// Lost: the lock deleted under the reader and the writer.
		del(t, rdb, rname, wname)
		for _, l := range []*lualock.Lock{r.ReadLock(), w.WriteLock(), w.ReadLock()} {
			select {
			case <-l.Done():
				is(t, "cause", context.Cause(l.Context()), lualock.ErrLockLost)
			case <-time.After(2 * lease):
				t.Fatalf("no lost signal on %s within %v", l.Name(), 2*lease)
			}
		}
		is(t, "unlock of a lost read hold", r.ReadLock().Unlock(ctx), lualock.ErrLockLost)
		is(t, "unlock of a lost write hold", w.WriteLock().Unlock(ctx), lualock.ErrLockLost)
	})
}

// TestReadWriteLock_leaseHandover: a reader's fixed lease runs out and a
// waiting writer gets the lock (by its fallback timer: no release was
// published); a cancelled wait returns the context's error and holds
// nothing; a bad name is ErrInvalid.
func TestReadWriteLock_leaseHandover(t *testing.T) {
	apiEach(t, lualock.Options{}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		ctx := context.Background()
		name := uniqueName(t)
		r, w := c.NewReadWriteLock(name), c.NewReadWriteLock(name)
		ok(t, "read with a lease", r.ReadLock().LockLease(ctx, 300*time.Millisecond))
		start := time.Now()
		ok(t, "writer", w.WriteLock().TryLock(ctx, 5*time.Second))
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("writer got the lock %v after the reader's 300ms lease began", d)
		}
		is(t, "reader's unlock after its lease ran out", r.ReadLock().Unlock(ctx), lualock.ErrNotHeld)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		is(t, "cancelled read wait", r.ReadLock().Lock(cctx), context.DeadlineExceeded)
		if n, err := r.ReadLock().HoldCount(ctx); err != nil || n != 0 {
			t.Fatalf("reader holds %d, %v after a cancelled wait", n, err)
		}
		ok(t, "writer unlock", w.WriteLock().Unlock(ctx))
		is(t, "bad name", c.NewReadWriteLock("").ReadLock().Lock(ctx), lualock.ErrInvalid)
		is(t, "bad name", c.NewReadWriteLock("a{b").WriteLock().Lock(ctx), lualock.ErrInvalid)
		if ok, err := w.ReadLock().ForceUnlock(ctx); err != nil || ok {
			t.Fatalf("force unlock of a free lock = %v, %v", ok, err)
		}
	})
}

// TestReadWriteLock_overlap: readers together and writers alone under
// load, through the API: 12 goroutines with a ReadWriteLock each, 1200
// acquisitions (240 on miniredis), an in-process detector. Bounded: 2 min.
func TestReadWriteLock_overlap(t *testing.T) {
	const readers, writers = 8, 4
	apiEach(t, lualock.Options{}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		per := 100
		if b.name == "miniredis" {
			per = 20
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		name := uniqueName(t)
		var inR, inW, maxR, overlaps atomic.Int64
		errs := make(chan error, readers+writers)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range readers + writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rw := c.NewReadWriteLock(name)
				writer := i >= readers
				l := rw.ReadLock()
				if writer {
					l = rw.WriteLock()
				}
				for range per {
					if err := l.Lock(ctx); err != nil {
						errs <- err
						return
					}
					if writer {
						if inW.Add(1) != 1 || inR.Load() != 0 {
							overlaps.Add(1)
						}
					} else {
						r := inR.Add(1)
						for m := maxR.Load(); r > m && !maxR.CompareAndSwap(m, r); m = maxR.Load() {
						}
						if inW.Load() != 0 {
							overlaps.Add(1)
						}
					}
					time.Sleep(100 * time.Microsecond)
					if writer {
						inW.Add(-1)
					} else {
						inR.Add(-1)
					}
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
					if !writer {
						time.Sleep(500 * time.Microsecond) // let writers in
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if o := overlaps.Load(); o != 0 {
			t.Fatalf("%d overlaps", o)
		}
		if maxR.Load() < 2 {
			t.Errorf("readers never shared the lock")
		}
		wantGone(t, rdb, name)
		t.Logf("%d acquisitions in %v, up to %d readers at once, no overlap", (readers+writers)*per, time.Since(start).Round(time.Millisecond), maxR.Load())
	})
}

// TestFencedLock_tokens: every acquisition takes a larger token, re-entry
// included, across owners and clients; Token is the current hold's, 0
// without one; the counter never goes.
func TestFencedLock_tokens(t *testing.T) {
	apiEach(t, lualock.Options{}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		ctx := context.Background()
		name := uniqueName(t)
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
		other := newClient(t, rdb, lualock.Options{}).NewFencedLock(name)
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
	})
}

// TestSpinLock: the reentrant lock without pub/sub: nothing subscribes,
// nothing is published, and a waiter polls its way to the lock within the
// back-off's cap of a release.
func TestSpinLock(t *testing.T) {
	apiEach(t, lualock.Options{}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		ctx := context.Background()
		n := newNames(uniqueName(t), false)
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
		if subs, err := numSub(rdb, b, n.channel); err != nil || subs != int64(len(ch.subs)) {
			t.Fatalf("subscribers of %s = %d, %v; want only the test's %d", n.channel, subs, err, len(ch.subs))
		}
		wantHash(t, rdb, n.name, map[string]string{w.Field(): "1"})
		ok(t, "w unlock", w.Unlock(ctx))
		ch.want()
		ok(t, "a", a.Lock(ctx))
		if deleted, err := w.ForceUnlock(ctx); err != nil || !deleted {
			t.Fatalf("ForceUnlock = %v, %v", deleted, err)
		}
		ch.want()
		is(t, "unlock after force", a.Unlock(ctx), lualock.ErrLockLost)
	})
}

// countCmds counts the commands a client sends.
type countCmds struct{ n atomic.Int64 }

func (h *countCmds) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countCmds) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countCmds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestFamily_commonScenarios: for each primitive's handle (the read lock,
// the write lock, the fenced lock, the spin lock): a fixed lease runs out
// and a waiter takes over, a cancelled wait returns the context's error
// holding nothing, bad input is ErrInvalid with nothing sent to Redis.
func TestFamily_commonScenarios(t *testing.T) {
	kinds := []struct {
		name string
		mk   func(c *lualock.Client, name string) *lualock.Lock
	}{
		{"read", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).ReadLock() }},
		{"write", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).WriteLock() }},
		{"fenced", func(c *lualock.Client, n string) *lualock.Lock { return c.NewFencedLock(n).Handle() }},
		{"spin", func(c *lualock.Client, n string) *lualock.Lock { return c.NewSpinLock(n) }},
	}
	apiEach(t, lualock.Options{}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		ctx := context.Background()
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				name := uniqueName(t)
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
		rdb2 := b.new(t) // a client of its own, to count what it sends
		if b.name == "miniredis" {
			rdb2 = rdb
		}
		rdb2.AddHook(h)
		c2 := newClient(t, rdb2, lualock.Options{})
		before := h.n.Load()
		for _, k := range kinds {
			for _, bad := range []string{"", "a{b", "x}"} {
				is(t, k.name+" bad name "+bad, k.mk(c2, bad).Lock(ctx), lualock.ErrInvalid)
			}
			l := k.mk(c2, uniqueName(t))
			is(t, k.name+" lease 0", l.LockLease(ctx, 0), lualock.ErrInvalid)
			is(t, k.name+" negative wait", l.TryLock(ctx, -time.Second), lualock.ErrInvalid)
			is(t, k.name+" nil ctx", l.Lock(nil), lualock.ErrInvalid) //lint:ignore SA1012 a nil context is the bad input under test
		}
		if n := h.n.Load() - before; n != 0 {
			t.Fatalf("%d commands sent for bad input, want none", n)
		}
	})
}

// TestFamily_lostOnDelete: a hold of each kind under the watchdog whose
// lock is deleted behind its back ends with ErrLockLost at the next
// renewal, and its Unlock says so.
func TestFamily_lostOnDelete(t *testing.T) {
	const lease = 900 * time.Millisecond
	apiEach(t, lualock.Options{WatchdogLease: lease}, func(t *testing.T, b backend, rdb redis.UniversalClient, c *lualock.Client) {
		ctx := context.Background()
		locks := map[string]*lualock.Lock{
			"read":   c.NewReadWriteLock(uniqueName(t) + "-r").ReadLock(),
			"write":  c.NewReadWriteLock(uniqueName(t) + "-w").WriteLock(),
			"fenced": c.NewFencedLock(uniqueName(t) + "-f").Handle(),
			"spin":   c.NewSpinLock(uniqueName(t) + "-s"),
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
	})
}
