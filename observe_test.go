package lualock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lualock/lualock"
)

// obRecorder keeps the events an Observer receives.
type obRecorder struct {
	mu       sync.Mutex
	acquires []lualock.AcquireEvent
	ends     []lualock.HoldEndEvent
	renews   []lualock.RenewEvent
}

func (r *obRecorder) observer() lualock.Observer {
	return lualock.Observer{
		Acquire: func(e lualock.AcquireEvent) { r.mu.Lock(); r.acquires = append(r.acquires, e); r.mu.Unlock() },
		HoldEnd: func(e lualock.HoldEndEvent) { r.mu.Lock(); r.ends = append(r.ends, e); r.mu.Unlock() },
		Renew:   func(e lualock.RenewEvent) { r.mu.Lock(); r.renews = append(r.renews, e); r.mu.Unlock() },
	}
}

func (r *obRecorder) lastAcquire(t *testing.T) lualock.AcquireEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.acquires) == 0 {
		t.Fatal("no Acquire event")
	}
	return r.acquires[len(r.acquires)-1]
}

// waitEnd waits for a HoldEnd event of lock and returns it.
func (r *obRecorder) waitEnd(t *testing.T, lock string) lualock.HoldEndEvent {
	t.Helper()
	var ev lualock.HoldEndEvent
	waitUntil(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, e := range r.ends {
			if e.Name == lock {
				ev = e
				r.ends = append(r.ends[:i], r.ends[i+1:]...)
				return true
			}
		}
		return false
	})
	return ev
}

// obLog is a goroutine-safe buffer for a slog text handler.
type obLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *obLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the logged lines that contain every one of parts.
func (l *obLog) lines(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// TestOptions_Observer_events: an acquisition reports its outcome, kind,
// owner and whether it waited for another holder (a handoff); a hold's end
// reports how long it was held and why it ended (released, expired, lost
// because a renewal found it gone, closed); each renewal call reports its
// size and error. The Logger gets the loss, the give-up and the renewal
// failure with the lock's name and owner.
func TestOptions_Observer_events(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	var rec obRecorder
	var logs obLog
	c := lkClient(t, rdb, lualock.Options{
		WatchdogLease: 1500 * time.Millisecond, // a renewal every 500ms
		Observer:      rec.observer(),
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})

	a, b := c.NewLock("ob"), c.NewLock("ob")
	before := time.Now()
	if err := a.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if ev := rec.lastAcquire(t); ev.Err != nil || ev.Handoff || ev.Kind != lualock.KindReentrant || ev.Name != "ob" || !strings.HasPrefix(ev.Owner, c.ID()+":") || ev.Context != ctx {
		t.Errorf("uncontended Lock: event %+v, want Err nil, no handoff, lock ob, owner %s:H, the call's context", ev, c.ID())
	}
	if err := b.TryLock(ctx, 20*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock = %v, want ErrNotObtained", err)
	}
	if ev := rec.lastAcquire(t); !errors.Is(ev.Err, lualock.ErrNotObtained) || ev.Wait < 20*time.Millisecond || ev.Owner == "" {
		t.Errorf("TryLock that gave up: event %+v, want ErrNotObtained after at least 20ms", ev)
	}
	if got := logs.lines("level=INFO", "lualock: gave up waiting", "name=ob", "owner="+c.ID()+":"); len(got) != 1 {
		t.Errorf("log of the give-up: %q, want one Info line with lock and owner", logs.lines())
	}

	// b waits; a's release hands the lock over.
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	waitUntil(t, func() bool { return c.Stats().Waiters == 1 })
	waitUntil(t, func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.renews) > 0 })
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	elapsed := time.Since(before)
	if ev := rec.waitEnd(t, "ob"); ev.Reason != lualock.Released || ev.Reason.Lost() || ev.Held <= 0 || ev.Held > elapsed || !errors.Is(ev.Cause, lualock.ErrNotHeld) {
		t.Errorf("released hold: event %+v, want Released, held for a time in (0, %v]", ev, elapsed)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Lock: %v", err)
	}
	if ev := rec.lastAcquire(t); ev.Err != nil || !ev.Handoff {
		t.Errorf("Lock after waiting for a release: event %+v, want Handoff", ev)
	}
	rec.mu.Lock()
	for _, ev := range rec.renews {
		if ev.Err != nil || ev.Holds != 1 || ev.Took <= 0 {
			t.Errorf("renewal of one healthy hold: event %+v, want Holds 1, Err nil", ev)
		}
	}
	rec.mu.Unlock()

	// A renewal that fails is reported and logged; then one finds the lock
	// gone: a loss.
	mr.SetError("ERR injected by the test")
	waitUntil(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.renews) > 0 && rec.renews[len(rec.renews)-1].Err != nil
	})
	// The Logger is written after the Observer is called: wait for the
	// line rather than reading the log at the event.
	warned := func() bool {
		return len(logs.lines("level=WARN", "lualock: renewal failed", "name=ob", "owner="+c.ID()+":", "injected")) > 0
	}
	for deadline := time.Now().Add(5 * time.Second); !warned() && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
	if !warned() {
		t.Errorf("no Warn line for the failed renewal with lock and owner; log: %q", logs.lines())
	}
	mr.SetError("")
	mr.Del("ob")
	ev := rec.waitEnd(t, "ob")
	if ev.Reason != lualock.LostGone || !ev.Reason.Lost() || !errors.Is(ev.Cause, lualock.ErrLockLost) || !strings.HasPrefix(ev.Owner, c.ID()+":") {
		t.Errorf("hold deleted from outside: event %+v, want LostGone", ev)
	}
	if cause := context.Cause(b.Context()); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("Context cause of the lost hold = %v, want ErrLockLost", cause)
	}
	if got := logs.lines("level=WARN", "lualock: lost", "name=ob", "reason=lost_gone"); len(got) != 1 {
		t.Errorf("log of the loss: %q, want one Warn line", logs.lines())
	}
	if err := b.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock of the lost hold = %v, want ErrLockLost", err)
	}

	// A fair lock's fixed lease runs out: Expired, not a loss.
	f := c.NewFairLock("obfair")
	if err := f.LockLease(ctx, 30*time.Millisecond); err != nil {
		t.Fatalf("fair LockLease: %v", err)
	}
	if ev := rec.lastAcquire(t); ev.Kind != lualock.KindFair || ev.Err != nil {
		t.Errorf("fair LockLease: event %+v, want Fair", ev)
	}
	// A fixed lease's hold ends a margin (1% + 2ms) before Redis expires it.
	if ev := rec.waitEnd(t, "obfair"); ev.Reason != lualock.Expired || ev.Kind != lualock.KindFair || ev.Held < 30*time.Millisecond*99/100-2*time.Millisecond {
		t.Errorf("fixed lease ran out: event %+v, want Expired, Fair, held for the 30ms lease less its margin", ev)
	}

	// Close ends a watched hold: Closed, logged at Info.
	h := c.NewLock("obclose")
	if err := h.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if ev := rec.waitEnd(t, "obclose"); ev.Reason != lualock.Closed || ev.Reason.Lost() {
		t.Errorf("hold when the client closed: event %+v, want Closed", ev)
	}
	if got := logs.lines("level=INFO", "name=obclose"); len(got) != 1 {
		t.Errorf("log of the hold Close stopped renewing: %q, want one Info line", logs.lines())
	}
	if got := logs.lines("level=ERROR"); len(got) != 0 {
		t.Errorf("Error lines: %q, want none", got)
	}
}

// TestEndReason_String: every reason has its label and only the Lost* ones
// are losses.
func TestEndReason_String(t *testing.T) {
	for r, want := range map[lualock.EndReason]string{
		lualock.Released: "released", lualock.Expired: "expired", lualock.Closed: "closed",
		lualock.LostGone: "lost_gone", lualock.LostRenewalsFailed: "lost_renewals_failed",
		lualock.LostAtUnlock: "lost_at_unlock", lualock.LostOnReentry: "lost_on_reentry",
		lualock.LostOther: "lost_other",
	} {
		if got := r.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", r, got, want)
		}
		if lost := strings.HasPrefix(want, "lost_"); r.Lost() != lost {
			t.Errorf("%v.Lost() = %v, want %v", r, r.Lost(), lost)
		}
	}
}

// TestOptions_Observer_noAllocs: an Observer whose funcs keep nothing adds
// no allocation to a lock and unlock, and no Logger logs on that path.
func TestOptions_Observer_noAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts: skipped with -short")
	}
	ctx := t.Context()
	_, rdb := lkMini(t)
	var logs obLog
	var n int
	plain := lkClient(t, rdb, lualock.Options{})
	observed := lkClient(t, rdb, lualock.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observer: lualock.Observer{
			Acquire: func(lualock.AcquireEvent) { n++ },
			HoldEnd: func(lualock.HoldEndEvent) { n++ },
			Renew:   func(lualock.RenewEvent) { n++ },
		},
	})
	allocs := func(c *lualock.Client) float64 {
		l := c.NewLock("allocs")
		return testing.AllocsPerRun(200, func() {
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Other goroutines (miniredis's, go-redis's) allocate too: the least of
	// a few runs is the call's own count.
	least := func(c *lualock.Client) float64 {
		m := allocs(c) // the first run also loads the scripts
		for range 4 {
			m = min(m, allocs(c))
		}
		return m
	}
	// One allocation of slack: AllocsPerRun counts every goroutine's
	// allocations, averaged and rounded down, and the client's background
	// work (the latch sweeper's round trips, one per 20ms of releases)
	// varies with how long the runs take, by up to about 3 of some 1655
	// on miniredis. An Observer or a Logger that allocated on this path
	// would add at least one per event, two or more per lock+unlock, in
	// every round: a round over the slack is measured again, up to three
	// rounds, and the test fails when every round is over.
	// (TestClient_events_noAllocs counts the event path alone: 0.)
	var base, with float64
	for round := 1; round <= 3; round++ {
		n = 0
		base, with = least(plain), least(observed)
		t.Logf("round %d: lock+unlock on miniredis: %.1f allocations without, %.1f with an Observer and a Logger", round, base, with)
		if with <= base+1 {
			break
		}
	}
	if with > base+1 {
		t.Errorf("lock+unlock: %.1f allocations with an Observer and a Logger, %.1f without, in each of 3 rounds", with, base)
	}
	if n < 2*5*200 {
		t.Errorf("the Observer saw %d events, want at least %d", n, 2*5*200)
	}
	if s := logs.lines(); len(s) != 0 {
		t.Errorf("a lock and unlock that succeed logged %q", s)
	}
}

// TestOptions_Logger_reconnect: when the pub/sub connection comes back
// after Redis went away, the Logger gets one Info line per channel
// subscribed again, and the waiter still gets the lock.
func TestOptions_Logger_reconnect(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	var logs obLog
	c := lkClient(t, rdb, lualock.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	holder, waiter := c.NewLock("reconnect"), c.NewLock("reconnect")
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	waitUntil(t, func() bool { return c.Stats().Waiters == 1 })
	waitUntil(t, func() bool { return len(mr.PubSubChannels("")) == 1 }) // the SUBSCRIBE landed
	mr.Close()
	if err := mr.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	waitUntil(t, func() bool {
		return len(logs.lines("level=INFO", "lualock: pub/sub reconnected", "channel=redisson_lock__channel:{reconnect}", "waiters=1")) == 1
	})
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Lock after the reconnect: %v", err)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestOptions_Observer_lostOnUnlockAndRenewals: the loss reasons besides a
// renewal finding the lock gone: a watched hold deleted before Unlock
// (LostAtUnlock) and renewals failing for a whole lease
// (LostRenewalsFailed).
func TestOptions_Observer_lostOnUnlockAndRenewals(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	var rec obRecorder
	c := lkClient(t, rdb, lualock.Options{WatchdogLease: 600 * time.Millisecond, Observer: rec.observer()})

	l := c.NewLock("atunlock")
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	mr.Del("atunlock")
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Fatalf("Unlock of a deleted hold = %v, want ErrLockLost", err)
	}
	if ev := rec.waitEnd(t, "atunlock"); ev.Reason != lualock.LostAtUnlock {
		t.Errorf("hold deleted before Unlock: reason %v, want %v", ev.Reason, lualock.LostAtUnlock)
	}

	r := c.NewLock("renewals")
	if err := r.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	mr.SetError("ERR injected by the test")
	ev := rec.waitEnd(t, "renewals")
	mr.SetError("")
	if ev.Reason != lualock.LostRenewalsFailed || !errors.Is(ev.Cause, lualock.ErrLockLost) {
		t.Errorf("renewals failing for a lease: event %+v, want %v", ev, lualock.LostRenewalsFailed)
	}
	if err := r.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock of the lost hold = %v, want ErrLockLost", err)
	}
}
