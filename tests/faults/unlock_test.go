package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Unlock with a context that has ended, and the
// unlock latch.

// lockKinds are the two lock kinds, made by a client.
var lockKinds = []struct {
	name    string
	new     func(c *lualock.Client, name string) *lualock.Lock
	release string // SHA1 of the kind's release script
}{
	{"reentrant", (*lualock.Client).NewLock, generated.LockReleaseSHA1},
	{"fair", (*lualock.Client).NewFairLock, generated.FairReleaseSHA1},
}

// blockOnce holds the first armed call of one script, unsent, until its
// context ends.
type blockOnce struct {
	backends.PassHook
	sha   string
	armed atomic.Bool
	hit   atomic.Bool
}

func (h *blockOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && a[1] == h.sha && h.armed.Load() && h.hit.CompareAndSwap(false, true) {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

// testEndedContext is the README's own pattern in an HTTP
// handler whose request context ends: WatchdogLease 1.5s, a ctx with a
// 300ms timeout, Lock(ctx), the ctx runs out, Unlock(ctx). The Unlock
// releases the lock (another owner gets it at once) and returns nil; the
// same with a ctx cancelled before Unlock is called, and with a ctx that
// ends while the release waits.
func testEndedContext(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	otherC := backends.NewClient(t, rdb, lualock.Options{})
	for _, kind := range lockKinds {
		for _, how := range []string{"timed out", "cancelled", "ending during the call"} {
			t.Run(kind.name+"/"+how, func(t *testing.T) {
				block := &blockOnce{sha: kind.release}
				c := backends.NewClient(t, backends.Hooked(t, rdb, block), lualock.Options{WatchdogLease: 1500 * time.Millisecond})
				var name string
				var l *lualock.Lock
				var ctx context.Context
				var cancel context.CancelFunc
				for try := 1; ; try++ {
					name = backends.UniqueName(t)
					l = kind.new(c, name)
					if how == "cancelled" {
						ctx, cancel = context.WithCancel(context.Background())
					} else {
						ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
					}
					defer cancel()
					err := l.Lock(ctx)
					if err == nil {
						break
					}
					// The Lock itself outlasted the 300ms (a new client's
					// first call on a loaded machine: slots, script load):
					// the scenario begins only once it is held, so run it
					// again on a new name.
					if !errors.Is(err, context.DeadlineExceeded) || try == 5 {
						t.Fatalf("Lock (try %d): %v", try, err)
					}
				}
				hold := l.Context()
				switch how {
				case "timed out":
					<-ctx.Done()
					time.Sleep(100 * time.Millisecond) // 400ms after the Lock, as in the issue
				case "cancelled":
					cancel()
				default:
					// The release's first send waits (unsent) until
					// ctx ends, 300ms after the Lock.
					block.armed.Store(true)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("Unlock with a ctx %s = %v, want nil", how, err)
				}
				if block.armed.Load() && !block.hit.Load() {
					t.Fatal("the release was not held up until ctx ended")
				}
				select {
				case <-hold.Done():
				default:
					t.Fatal("the hold's Context is still live after Unlock")
				}
				if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) {
					t.Errorf("cause = %v, want ErrNotHeld", cause)
				}
				other := kind.new(otherC, name)
				if err := other.TryLock(context.Background(), 0); err != nil {
					t.Fatalf("another owner's TryLock after the Unlock = %v, want the lock", err)
				}
				if err := other.Unlock(context.Background()); err != nil {
					t.Fatalf("other's Unlock: %v", err)
				}
				if err := l.Unlock(context.Background()); !errors.Is(err, lualock.ErrNotHeld) {
					t.Errorf("a second Unlock = %v, want ErrNotHeld", err)
				}
			})
		}
	}
}

// testEndedContextUnconfirmed: with a ctx that has ended, the
// release gets no answer (its every send fails as a lost connection).
// Unlock still ends the hold: it returns an error that says the lock
// expires within its lease, the hold's Context ends, the watchdog renews
// it no more, and another owner gets it within one lease (+200ms, + three
// wake-ups and two round trips as a canary measured them in the same test:
// the other owner's timer, its acquisition, the reply that told it the
// lease left).
func testEndedContextUnconfirmed(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	const lease = 600 * time.Millisecond
	canary := backends.StartCanary(t, 5*time.Millisecond, rdb)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			drop := &backends.FailScript{SHA: kind.release, Err: io.EOF}
			c := backends.NewClient(t, backends.Hooked(t, rdb, drop), lualock.Options{WatchdogLease: lease})
			name := backends.UniqueName(t)
			l := kind.new(c, name)
			ctx, cancel := context.WithCancel(context.Background())
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			hold := l.Context()
			cancel()
			drop.Armed.Store(true)
			err := l.Unlock(ctx)
			drop.Armed.Store(false)
			if err == nil || !strings.Contains(err.Error(), "expires within its lease") || !errors.Is(err, io.EOF) {
				t.Fatalf("Unlock with no answer = %v, want an error wrapping io.EOF that says the lock expires within its lease", err)
			}
			if drop.Hits.Load() == 0 {
				t.Fatal("the release was never sent")
			}
			select {
			case <-hold.Done():
			default:
				t.Fatal("the hold's Context is still live")
			}
			start := time.Now()
			other := kind.new(backends.NewClient(t, rdb, lualock.Options{}), name)
			if err := other.TryLock(context.Background(), 3*lease); err != nil {
				t.Fatalf("another owner's TryLock(%v) = %v: the watchdog still renews the lock", 3*lease, err)
			}
			if waited, load := time.Since(start), canary.Allowance(3, 2); waited > lease+200*time.Millisecond+load {
				t.Errorf("another owner waited %v, want within the lease (%v) + 200ms + %v for the load (%v)", waited, lease, load, canary)
			}
			if err := other.Unlock(context.Background()); err != nil {
				t.Fatalf("other's Unlock: %v", err)
			}
			if err := l.Unlock(context.Background()); !errors.Is(err, lualock.ErrNotHeld) {
				t.Errorf("a second Unlock = %v, want ErrNotHeld", err)
			}
		})
	}
}

// testResentPastLatch: a watchdog hold's release succeeds but
// its reply is lost (every try of it); the release is sent again by the
// next Unlock after its latch has expired. The lock is gone, and nothing
// tells whether the first send removed it or the hold was lost before:
// Unlock returns ErrNotHeld (as Options.UnlockLatch says), not
// ErrLockLost, and the hold's Context ends with ErrNotHeld. The same when
// a renewal finds the lock gone before the second Unlock.
//
// That renewal lands within a renewal period after the release ran, with
// two periods of the lease left (less the loss margin). With a 600ms
// lease that was under 400ms, and on a loaded machine the watchdog's
// Expired came first now and then (a loss, by the client's clock, which
// is what expiry reports during a release): the lease is 3s.
func testResentPastLatch(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	for _, kind := range lockKinds {
		for _, renewFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/renewal first %v", kind.name, renewFirst), func(t *testing.T) {
				ctx := t.Context()
				lose := &backends.LoseReplies{SHA: kind.release}
				o := lualock.Options{UnlockLatch: 100 * time.Millisecond}
				const lease = 3 * time.Second
				if renewFirst {
					o.WatchdogLease = lease // renewed every second
				}
				c := backends.NewClient(t, backends.Hooked(t, rdb, lose), o)
				name := backends.UniqueName(t)
				l := kind.new(c, name)
				if err := l.Lock(ctx); err != nil {
					t.Fatalf("Lock: %v", err)
				}
				hold := l.Context()
				lose.Left.Store(1000)
				err := l.Unlock(ctx)
				lose.Left.Store(0)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("Unlock with every reply lost = %v, want io.EOF", err)
				}
				// Past the latch: the lock and the latch are gone.
				backends.WaitFor(t, "condition", 2*time.Second, func() bool { return len(backends.KeysLeft(t, rdb, name, true)) == 0 })
				if renewFirst {
					backends.WaitDone(t, hold, 2*lease, "renewal finding the lock gone")
				}
				err = l.Unlock(ctx)
				if !errors.Is(err, lualock.ErrNotHeld) || errors.Is(err, lualock.ErrLockLost) {
					t.Errorf("Unlock resent past its latch = %v, want ErrNotHeld", err)
				}
				select {
				case <-hold.Done():
				default:
					t.Fatal("the hold's Context is still live")
				}
				if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) || errors.Is(cause, lualock.ErrLockLost) {
					t.Errorf("cause = %v, want ErrNotHeld", cause)
				}
				if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
					t.Errorf("a third Unlock = %v, want ErrNotHeld", err)
				}
				if err := l.TryLock(ctx, 0); err != nil {
					t.Fatalf("TryLock afterwards: %v", err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			})
		}
	}
}

// testLatchesDeleted: a release that got its reply has its
// unlock latch deleted (it only serves a resend of a release whose reply
// was lost), so latches do not pile up: after 50 lock+unlock pairs and
// Close, which sends the deletions still pending, no latch is left, for
// either kind, on every backend.
func testLatchesDeleted(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	ctx := t.Context()
	for _, kind := range lockKinds {
		c, err := lualock.New(rdb, lualock.Options{})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		name := backends.UniqueName(t) + kind.name
		l := kind.new(c, name)
		for range 50 {
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		}
		if _, err := l.ForceUnlock(ctx); err != nil {
			t.Fatalf("ForceUnlock: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if left := backends.KeysLeft(t, rdb, name, true); len(left) > 0 {
			t.Errorf("%s: %d keys left after 50 lock+unlock pairs and Close: %q", kind.name, len(left), left[:min(len(left), 3)])
		}
	}
}
