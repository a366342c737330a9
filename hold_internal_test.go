package lualock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// fakeHoldEnv records what a hold asks of its handle.
type fakeHoldEnv struct {
	renewed, unrenewed, stopped int
	ends                        []error
	closed                      bool
}

func (e *fakeHoldEnv) renew(uint64, time.Time) (watchdogEntry, bool) {
	if e.closed {
		return nil, false
	}
	e.renewed++
	return fakeEntry{e}, true
}

// fakeEntry is a watchdog entry that counts what the hold asks of it.
type fakeEntry struct{ e *fakeHoldEnv }

func (f fakeEntry) Pause(context.Context) error  { return nil }
func (f fakeEntry) Resume()                      {}
func (f fakeEntry) Stop()                        { f.e.stopped++ }
func (f fakeEntry) Remove() bool                 { f.e.unrenewed++; return true }
func (f fakeEntry) Renewed() time.Time           { return time.Now() }
func (e *fakeHoldEnv) watch(uint64) *holdWatcher { return nil }
func (e *fakeHoldEnv) ended(cause error, _ time.Time) {
	e.ends = append(e.ends, cause)
}

func newTestHold() (*hold, *fakeHoldEnv) {
	env := &fakeHoldEnv{}
	return &hold{env: env, watchdogLease: 30 * time.Second, unlockLatch: 10 * time.Second}, env
}

func latchFunc() string { return "latch:1" }

func wantState(t *testing.T, h *hold, s holdState, holds int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != s || h.holds != holds {
		t.Fatalf("hold is %v with %d holds, want %v with %d", h.state, h.holds, s, holds)
	}
}

// Lock, re-enter, unlock twice.
func TestHold_lockReenterUnlock(t *testing.T) {
	h, env := newTestHold()
	if ctx := h.context(); !errors.Is(context.Cause(ctx), ErrNotHeld) {
		t.Fatalf("free hold's context cause = %v", context.Cause(ctx))
	}
	h.acquired(1, 0, time.Now())
	wantState(t, h, held, 1)
	ctx := h.context()
	h.acquired(2, 0, time.Now())
	wantState(t, h, held, 2)
	r, err := h.beginRelease(latchFunc, false)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, h, releasing, 2)
	if err := h.released(r, releasePartial); err != nil {
		t.Fatal(err)
	}
	wantState(t, h, held, 1)
	r, _ = h.beginRelease(latchFunc, false)
	if err := h.released(r, releaseFreed); err != nil {
		t.Fatal(err)
	}
	wantState(t, h, free, 0)
	if context.Cause(ctx) != ErrNotHeld || env.renewed != 1 || env.unrenewed != 1 || len(env.ends) != 1 {
		t.Fatalf("cause %v, renewed %d, unrenewed %d, ends %v", context.Cause(ctx), env.renewed, env.unrenewed, env.ends)
	}
	if _, err := h.beginRelease(latchFunc, false); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release of a free hold: %v", err)
	}
}

// A loss during the release waits for its reply.
func TestHold_lose_duringReleaseWaitsForReply(t *testing.T) {
	h, _ := newTestHold()
	h.acquired(1, 0, time.Now())
	h.acquired(2, 0, time.Now())
	ctx := h.context()
	r, _ := h.beginRelease(latchFunc, false)
	h.lose(h.generation(), ErrLockLost)
	wantState(t, h, releasing, 2)
	if ctx.Err() != nil {
		t.Fatal("a pending loss ended the context")
	}
	if err := h.released(r, releasePartial); err != nil {
		t.Fatal(err)
	}
	wantState(t, h, lost, 1)
	if !errors.Is(context.Cause(ctx), ErrLockLost) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if _, err := h.beginRelease(latchFunc, false); !errors.Is(err, ErrLockLost) {
		t.Fatalf("unlock of a lost hold: %v", err)
	}
	wantState(t, h, free, 0)
}

// A last release that frees the lock makes a pending loss void.
func TestHold_lose_voidedByLastRelease(t *testing.T) {
	h, _ := newTestHold()
	h.acquired(1, 0, time.Now())
	ctx := h.context()
	r, _ := h.beginRelease(latchFunc, false)
	h.lose(h.generation(), ErrLockLost)
	if err := h.released(r, releaseFreed); err != nil {
		t.Fatal(err)
	}
	wantState(t, h, free, 0)
	if context.Cause(ctx) != ErrNotHeld {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}

// A release without a reply is unsettled, then resent under its latch.
func TestHold_unconfirmed_resentUnderLatch(t *testing.T) {
	h, _ := newTestHold()
	h.acquired(1, 0, time.Now())
	r, _ := h.beginRelease(latchFunc, false)
	boom := errors.New("boom")
	if err := h.unconfirmed(r, boom, false); err != boom {
		t.Fatalf("unconfirmed: %v", err)
	}
	wantState(t, h, unsettled, 1)
	n := 0
	r2, err := h.beginRelease(func() string { n++; return "latch:2" }, false)
	if err != nil || !r2.resend || r2.latch != "latch:1" || n != 0 {
		t.Fatalf("resend %+v, %v, new latches %d", r2, err, n)
	}
	// Past the latch the resend finds the lock gone: the hold ended,
	// as asked, with no loss.
	if err := h.released(r2, releaseNotHeld); !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLockLost) {
		t.Fatalf("released: %v", err)
	}
	wantState(t, h, free, 0)
}

// A loss during a last release without a reply leaves it unsettled.
func TestHold_lose_duringUnconfirmedLastRelease(t *testing.T) {
	// The renewal may have found the lock gone because the release
	// removed it: as for a loss after the release, the context ends
	// with ErrNotHeld and the next Unlock settles the release.
	h, env := newTestHold()
	h.acquired(1, 0, time.Now())
	ctx := h.context()
	r, _ := h.beginRelease(latchFunc, false)
	h.lose(h.generation(), ErrLockLost)
	if err := h.unconfirmed(r, errors.New("boom"), false); err == nil {
		t.Fatal("no error")
	}
	wantState(t, h, unsettled, 1)
	if cause := context.Cause(ctx); !errors.Is(cause, ErrNotHeld) || errors.Is(cause, ErrLockLost) || env.unrenewed != 1 {
		t.Fatalf("cause %v, unrenewed %d", cause, env.unrenewed)
	}
	r, err := h.beginRelease(latchFunc, false)
	if err != nil || !r.resend {
		t.Fatalf("resend %+v, %v", r, err)
	}
	if err := h.released(r, releaseNotHeld); !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLockLost) {
		t.Fatalf("released: %v", err)
	}
	wantState(t, h, free, 0)
}

// A loss during an earlier release without a reply stands.
func TestHold_lose_duringUnconfirmedEarlierRelease(t *testing.T) {
	h, _ := newTestHold()
	h.acquired(1, 0, time.Now())
	h.acquired(2, 0, time.Now())
	r, _ := h.beginRelease(latchFunc, false)
	h.lose(h.generation(), ErrLockLost)
	_ = h.unconfirmed(r, errors.New("boom"), false)
	wantState(t, h, lost, 2)
}

// A detached last release without a reply ends the hold.
func TestHold_unconfirmed_detachedLastRelease(t *testing.T) {
	h, env := newTestHold()
	h.acquired(1, 0, time.Now())
	r, _ := h.beginRelease(latchFunc, true)
	if env.stopped != 1 {
		t.Fatalf("renewal stopped %d times", env.stopped)
	}
	if err := h.unconfirmed(r, errors.New("boom"), true); err == nil {
		t.Fatal("no error")
	}
	wantState(t, h, free, 0)
}

// A fixed lease running out lapses the hold.
func TestHold_end_fixedLeaseLapses(t *testing.T) {
	h, env := newTestHold()
	h.acquired(1, 5*time.Millisecond, time.Now())
	ctx := h.context()
	<-ctx.Done()
	wantState(t, h, lapsed, 1)
	if !errors.Is(context.Cause(ctx), ErrNotHeld) || env.renewed != 0 {
		t.Fatalf("cause %v, renewed %d", context.Cause(ctx), env.renewed)
	}
	r, _ := h.beginRelease(latchFunc, false)
	if err := h.released(r, releaseNotHeld); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("released: %v", err)
	}
	wantState(t, h, free, 0)
}

// Events of an older hold change nothing.
func TestHold_staleEvents(t *testing.T) {
	h, _ := newTestHold()
	h.acquired(1, 0, time.Now())
	old := h.generation()
	r, _ := h.beginRelease(latchFunc, false)
	_ = h.released(r, releaseFreed)
	h.acquired(1, 0, time.Now())
	h.lose(old, ErrLockLost)
	h.expire(old, ErrLockLost)
	wantState(t, h, held, 1)
}

// No watchdog after close.
func TestHold_acquired_closedWatchdog(t *testing.T) {
	h, env := newTestHold()
	env.closed = true
	if err := h.acquired(1, 0, time.Now()); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquired under a closed watchdog: %v, want ErrClosed", err)
	}
	wantState(t, h, free, 0)
}

// A loss reported while a re-entry under the watchdog runs (the lease ran
// out by the client's clock, or the hold watcher saw the lock go) leaves
// the hold lost: the re-entry's success reports the loss and registers no
// new watchdog entry, and the Unlocks of the lost holds leave the handle
// free with nothing renewing the lock. (Found by review: the re-entry put
// a new entry on the lost hold, which nothing removed: the lock was
// renewed forever while the handle said it held nothing.)
func TestHold_acquired_reentryDuringLoss(t *testing.T) {
	h, env := newTestHold()
	if err := h.acquired(1, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	start := time.Now() // the re-entry (want 2) is sent
	loss := fmt.Errorf("%w: lease ran out", ErrLockLost)
	h.expire(h.generation(), loss) // the loss while it runs
	if err := h.acquired(2, 0, start); !errors.Is(err, ErrLockLost) {
		t.Fatalf("re-entry into a lost hold: %v, want ErrLockLost", err)
	}
	for i := range 2 {
		if _, err := h.beginRelease(latchFunc, false); !errors.Is(err, ErrLockLost) {
			t.Fatalf("unlock %d of a lost hold: %v, want ErrLockLost", i+1, err)
		}
	}
	wantState(t, h, free, 0)
	if env.renewed != env.unrenewed {
		t.Fatalf("handle is free but %d watchdog entries were made and %d removed: the lock would be renewed forever", env.renewed, env.unrenewed)
	}
}
