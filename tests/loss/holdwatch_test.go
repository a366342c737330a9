package loss_test

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

// A hold learns of a force release from the hold tracker, well before its
// next renewal (10s with a 30s watchdog lease): within 100ms, on the real
// backends, for both kinds of lock, + the force release's round trip and
// two wake-ups (the tracker's reader, this test) as a canary measured them
// in the same test, so that a loaded machine does not pass for a missed
// change (the renewal would be 10s late). With Options.NoHoldTracking it
// does not (the renewal is the fallback).
func TestTracker_forceUnlockNoticed(t *testing.T) {
	backends.ShortParallel(t)
	realBackends(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		for _, kind := range []string{"reentrant", "fair"} {
			t.Run(kind, func(t *testing.T) {
				ctx := context.Background()
				holder := newWatchClient(t, rdb, true)
				other := newWatchClient(t, rdb, false)
				deaf := newWatchClient(t, rdb, false)
				newLock := func(c *lualock.Client, name string) *lualock.Lock {
					if kind == "fair" {
						return c.NewFairLock(name)
					}
					return c.NewLock(name)
				}
				name := backends.UniqueName(t)
				canary := backends.StartCanary(t, 5*time.Millisecond, rdb)
				l := newLock(holder, name)
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if deleted, err := newLock(other, name).ForceUnlock(ctx); err != nil || !deleted {
					t.Fatalf("ForceUnlock: %v, %v", deleted, err)
				}
				select {
				case <-l.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("the hold did not end within 2s of the force unlock")
				}
				took := time.Since(start)
				load := canary.Allowance(2, 1)
				t.Logf("force unlock noticed after %v (%v)", took, canary)
				if took > 100*time.Millisecond+load {
					t.Errorf("force unlock noticed after %v, want within 100ms + %v for the load (%v)", took, load, canary)
				}
				if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrLockLost) {
					t.Errorf("cause %v, want ErrLockLost", cause)
				}
				if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
					t.Errorf("Unlock after the loss: %v, want ErrLockLost", err)
				}

				// Without the option: still held as far as the handle knows.
				name2 := backends.UniqueName(t) + "-deaf"
				l2 := newLock(deaf, name2)
				if err := l2.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := newLock(other, name2).ForceUnlock(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case <-l2.Done():
					t.Errorf("a hold with NoHoldTracking ended at once: %v", context.Cause(l2.Context()))
				case <-time.After(300 * time.Millisecond):
				}
				_ = l2.Unlock(ctx)
			})
		}
	})
}

// A tracked hold is not reported lost by its own releases, nor by the
// releases and hand-overs of other owners' holds on the same name; and it
// subscribes nothing.
func TestTracker_noFalseLoss(t *testing.T) {
	realBackends(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		c1 := newWatchClient(t, rdb, true)
		c2 := newWatchClient(t, rdb, true)
		name := backends.UniqueName(t)
		for i := range 20 {
			for _, c := range []*lualock.Client{c1, c2} {
				l := c.NewLock(name)
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				if i%2 == 0 { // a re-entry, released: no message
					if err := l.Lock(ctx); err != nil {
						t.Fatal(err)
					}
					if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				}
				hold := l.Context()
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("round %d: Unlock: %v", i, err)
				}
				if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) || errors.Is(cause, lualock.ErrLockLost) {
					t.Fatalf("round %d: cause %v, want ErrNotHeld", i, cause)
				}
			}
		}
		backends.WaitFor(t, "no subscription left", 5*time.Second, func() bool {
			return c1.Stats().Subscriptions == 0 && c2.Stats().Subscriptions == 0
		})
	})
}

func newWatchClient(t *testing.T, rdb redis.UniversalClient, watch bool) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, lualock.Options{NoHoldTracking: !watch, SubscriptionLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// slowReply runs the matching script, then waits and, with drop, loses
// its reply (io.EOF): the script ran, the caller does not know it.
type slowReply struct {
	backends.PassHook
	sha   string
	delay time.Duration
	drop  bool
	armed atomic.Bool
}

func (h *slowReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if !h.armed.Load() || len(a) < 2 || !strings.EqualFold(fmt.Sprint(a[0]), "evalsha") || a[1] != h.sha {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		time.Sleep(h.delay)
		if h.drop {
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return nil
	}
}

// The handle's own releases delete the key its hold is tracked by: neither
// its last Unlock whose reply is lost nor its own ForceUnlock may be taken
// for another client's force unlock (ErrLockLost): the hold stops being
// tracked before either is sent.
func TestTracker_ownReleaseIsNoLoss(t *testing.T) {
	realBackends(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		t.Run("unlockReplyLost", func(t *testing.T) {
			h := &slowReply{sha: generated.LockReleaseSHA1, delay: 300 * time.Millisecond, drop: true}
			rdb.AddHook(h)
			c := newWatchClient(t, rdb, true)
			name := backends.UniqueName(t)
			l := c.NewLock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			hold := l.Context()
			h.armed.Store(true)
			err := l.Unlock(ctx)
			h.armed.Store(false)
			if err == nil {
				t.Fatal("Unlock with its reply lost returned nil")
			}
			err2 := l.Unlock(ctx) // settles the first: the lock is gone either way
			if errors.Is(err2, lualock.ErrLockLost) || errors.Is(context.Cause(hold), lualock.ErrLockLost) {
				t.Errorf("own release with a lost reply reported as a loss: second Unlock %v, hold's cause %v", err2, context.Cause(hold))
			}
		})
		t.Run("ownForceUnlock", func(t *testing.T) {
			h := &slowReply{sha: generated.LockForceReleaseSHA1, delay: 50 * time.Millisecond}
			rdb.AddHook(h)
			c := newWatchClient(t, rdb, true)
			name := backends.UniqueName(t)
			l := c.NewLock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			hold := l.Context()
			h.armed.Store(true)
			_, err := l.ForceUnlock(ctx)
			h.armed.Store(false)
			if err != nil {
				t.Fatal(err)
			}
			if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) {
				t.Errorf("own ForceUnlock ended the hold with %v, want ErrNotHeld", cause)
			}
		})
	})
}
