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
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// releaseKinds are the lock kinds under the watchdog, with the SHA1 of
// their release script.
var releaseKinds = []struct {
	name    string
	new     func(c *lualock.Client, name string) *lualock.Lock
	release string
}{
	{"reentrant", (*lualock.Client).NewLock, generated.LockReleaseSHA1},
	{"fair", (*lualock.Client).NewFairLock, generated.FairReleaseSHA1},
	{"fenced", func(c *lualock.Client, n string) *lualock.Lock { return c.NewFencedLock(n).Handle() }, generated.LockReleaseSHA1},
	{"spin", (*lualock.Client).NewSpinLock, generated.LockReleaseSHA1},
	{"write", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).WriteLock() }, generated.RwlockWriteReleaseSHA1},
	{"read", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).ReadLock() }, generated.RwlockReadReleaseSHA1},
}

// A watchdog hold's last release succeeds but every reply of it is lost;
// the next Unlock sends it again after its unlock latch has expired. The
// lock is gone and nothing tells whether the first send removed it or
// the hold was lost before: Unlock returns ErrNotHeld, as
// Options.UnlockLatch says, not ErrLockLost, and the hold's Context ends
// with ErrNotHeld, for every kind of lock, with and without the tracker
// (which must not take the release's own delete for a loss), and whether
// a renewal found the lock gone first.
func TestUnlock_resentPastLatch(t *testing.T) {
	for _, b := range backends.All() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.New(t)
			for _, kind := range releaseKinds {
				for _, renewFirst := range []bool{false, true} {
					for _, untracked := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/renewalFirst=%v/untracked=%v", kind.name, renewFirst, untracked), func(t *testing.T) {
							resentPastLatch(t, rdb, kind.new, kind.release, renewFirst, untracked)
						})
					}
				}
			}
		})
	}
}

func resentPastLatch(t *testing.T, rdb redis.UniversalClient, newLock func(*lualock.Client, string) *lualock.Lock, release string, renewFirst, untracked bool) {
	ctx := t.Context()
	lose := &backends.LoseReplies{SHA: release}
	o := lualock.Options{UnlockLatch: 100 * time.Millisecond, NoHoldTracking: untracked}
	if renewFirst {
		o.WatchdogLease = 600 * time.Millisecond // renewed every 200ms
	}
	c := backends.NewClient(t, backends.Hooked(t, rdb, lose), o)
	name := backends.UniqueName(t)
	l := newLock(c, name)
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
	backends.WaitFor(t, "lock and latch gone", 5*time.Second, func() bool { return len(backends.KeysLeft(t, rdb, name, true)) == 0 })
	if renewFirst {
		backends.WaitDone(t, hold, 5*time.Second, "renewal finding the lock gone")
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
}

// A hold still live when Unlock starts, whose release the network holds
// up past the lease: Unlock stops the renewals, the lease runs out, and
// the release lands (or is resent) when the link comes back. Nothing took
// the lock away: neither Unlock nor the hold's Context says ErrLockLost,
// whatever the timing, and the lock is free afterwards. The link is a
// harness proxy, blacked out from just before Unlock until a lease and a
// half later; with a read timeout of 300ms every try of the release
// fails within the blackout (Unlock returns the transport error), with
// 2s the release is resent after it and finds the lock expired (Unlock
// returns ErrNotHeld).
func TestUnlock_heldUpPastLease(t *testing.T) {
	s, err := harness.Start(harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	direct := s.Client()
	defer direct.Close()
	const lease = time.Second
	for _, kind := range releaseKinds {
		for _, readTimeout := range []time.Duration{300 * time.Millisecond, 2 * time.Second} {
			t.Run(fmt.Sprintf("%s/readTimeout=%v", kind.name, readTimeout), func(t *testing.T) {
				heldUp(t, s, direct, kind.new, lease, readTimeout)
			})
		}
	}
}

func heldUp(t *testing.T, s *harness.Server, direct *redis.Client, newLock func(*lualock.Client, string) *lualock.Lock, lease, readTimeout time.Duration) {
	px, err := harness.StartProxy(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: readTimeout, WriteTimeout: readTimeout})
	defer rdb.Close()
	c := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	name := backends.UniqueName(t)
	l := newLock(c, name)
	ctx := t.Context()
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	hold := l.Context()
	px.Blackhole()
	if hold.Err() != nil {
		t.Fatalf("the hold ended before Unlock: %v", context.Cause(hold))
	}
	restored := make(chan struct{})
	go func() {
		defer close(restored)
		time.Sleep(lease + lease/2)
		px.Restore()
	}()
	err = l.Unlock(ctx)
	<-restored
	t.Logf("Unlock held up past the lease: %v", err)
	if errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock = %v, want no ErrLockLost: nothing took the lock away", err)
	}
	if readTimeout > lease && !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock resent after the blackout = %v, want ErrNotHeld (the lease ran out while the release was held up)", err)
	}
	backends.WaitDone(t, hold, 5*time.Second, "the hold")
	if cause := context.Cause(hold); errors.Is(cause, lualock.ErrLockLost) || !errors.Is(cause, lualock.ErrNotHeld) {
		t.Errorf("cause = %v, want ErrNotHeld", cause)
	}
	// Free: another client takes it within a lease (at once when
	// the release landed, at the lease's end otherwise).
	other := backends.NewClient(t, direct, lualock.Options{})
	o := newLock(other, name)
	if err := o.TryLock(ctx, 3*lease); err != nil {
		t.Fatalf("another owner's TryLock: %v", err)
	}
	_ = o.Unlock(ctx)
}

// lateLoss lets the next Left calls of one script run, waits Delay and
// then loses their reply (io.EOF): the caller's retry comes after Delay.
type lateLoss struct {
	backends.PassHook
	sha   string
	delay time.Duration
	left  atomic.Int32
}

func (h *lateLoss) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); len(a) > 1 && strings.EqualFold(fmt.Sprint(a[0]), "evalsha") && a[1] == h.sha && err == nil && h.left.Add(-1) >= 0 {
			time.Sleep(h.delay)
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return err
	}
}

// A watchdog hold's last release succeeds, its reply is lost, and the
// retry inside the same Unlock (the script runner's) comes after the
// unlock latch expired: it finds the lock gone, and cannot tell whether
// its first send removed it. Unlock returns ErrNotHeld, as
// Options.UnlockLatch says, not ErrLockLost, and so does the Context.
func TestUnlock_retriedPastLatch(t *testing.T) {
	realBackends(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		for _, kind := range releaseKinds {
			t.Run(kind.name, func(t *testing.T) {
				ctx := t.Context()
				late := &lateLoss{sha: kind.release, delay: 300 * time.Millisecond}
				c := backends.NewClient(t, backends.Hooked(t, rdb, late), lualock.Options{UnlockLatch: 100 * time.Millisecond})
				l := kind.new(c, backends.UniqueName(t))
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				hold := l.Context()
				late.left.Store(1)
				err := l.Unlock(ctx)
				if !errors.Is(err, lualock.ErrNotHeld) || errors.Is(err, lualock.ErrLockLost) {
					t.Errorf("Unlock retried past its latch = %v, want ErrNotHeld", err)
				}
				if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) || errors.Is(cause, lualock.ErrLockLost) {
					t.Errorf("cause = %v, want ErrNotHeld", cause)
				}
			})
		}
	})
}
