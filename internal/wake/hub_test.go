package wake_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lualock/lualock/internal/wake"
)

const ch = "redisson_lock__channel:{x}"

// newTestHub returns a hub over a fake transport and a fake clock, closed
// at the end of the test.
func newTestHub(t *testing.T, cfg wake.Config) (*wake.Hub, *fakeTransport, *fakeClock) {
	t.Helper()
	ft, clock := newFakeTransport(), newFakeClock()
	cfg.Clock = clock
	h := wake.New(ft, cfg)
	t.Cleanup(func() { _ = h.Close() })
	return h, ft, clock
}

type subResult struct {
	w     *wake.Waiter
	fresh bool
	err   error
}

// subscribeAsync runs Subscribe in a goroutine and returns where its
// result arrives.
func subscribeAsync(ctx context.Context, h *wake.Hub, channel string) <-chan subResult {
	res := make(chan subResult, 1)
	go func() {
		w, fresh, err := h.Subscribe(ctx, channel, wake.WakeOne, time.Time{})
		res <- subResult{w, fresh, err}
	}()
	return res
}

func receive(t *testing.T, res <-chan subResult) subResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Subscribe did not return")
		return subResult{}
	}
}

// firstWaiter subscribes the first waiter of channel and confirms the
// subscription as Redis would.
func firstWaiter(t *testing.T, h *wake.Hub, ft *fakeTransport, channel string) *wake.Waiter {
	t.Helper()
	subs := func() int {
		n := 0
		for _, op := range ft.ops() {
			if op == "sub "+channel {
				n++
			}
		}
		return n
	}
	before := subs()
	res := subscribeAsync(context.Background(), h, channel)
	eventually(t, "SUBSCRIBE "+channel, func() bool { return subs() > before })
	ft.ev.Confirmed(channel)
	r := receive(t, res)
	if r.err != nil || !r.fresh {
		t.Fatalf("first Subscribe = fresh %v, %v; want fresh, nil", r.fresh, r.err)
	}
	return r.w
}

// moreWaiters subscribes n waiters on a confirmed channel.
func moreWaiters(t *testing.T, h *wake.Hub, channel string, n int) []*wake.Waiter {
	t.Helper()
	var ws []*wake.Waiter
	for range n {
		w, fresh, err := h.Subscribe(context.Background(), channel, wake.WakeOne, time.Time{})
		if err != nil || fresh {
			t.Fatalf("Subscribe on a confirmed channel = fresh %v, %v; want not fresh, nil", fresh, err)
		}
		ws = append(ws, w)
	}
	return ws
}

// wokenSet returns which of ws had a wake-up pending (taking them).
func wokenSet(ws ...*wake.Waiter) []bool {
	got := make([]bool, len(ws))
	for i, w := range ws {
		got[i] = woken(w)
	}
	return got
}

func wantWoken(t *testing.T, what string, ws []*wake.Waiter, want ...bool) {
	t.Helper()
	if got := wokenSet(ws...); !slices.Equal(got, want) {
		t.Errorf("%s: woken = %v, want %v", what, got, want)
	}
}

// TestHub_Subscribe_confirmation: the first waiter of a channel subscribes
// it and waits for Redis's confirmation (fresh); the next ones neither
// subscribe again nor wait (not fresh); the last one to give up
// unsubscribes at once.
func TestHub_Subscribe_confirmation(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{Linger: time.Hour})
	res := subscribeAsync(context.Background(), h, ch)
	eventually(t, "SUBSCRIBE", func() bool { return len(ft.ops()) == 1 })
	select {
	case r := <-res:
		t.Fatalf("Subscribe returned %+v before the confirmation", r)
	case <-time.After(20 * time.Millisecond):
	}
	ft.ev.Confirmed(ch)
	r := receive(t, res)
	if r.err != nil || !r.fresh {
		t.Fatalf("Subscribe = fresh %v, %v; want fresh", r.fresh, r.err)
	}
	ws := append([]*wake.Waiter{r.w}, moreWaiters(t, h, ch, 2)...)
	if w, s, c := h.Counts(); w != 3 || s != 1 || c != 1 {
		t.Errorf("Counts() = %d, %d, %d; want 3 waiters, 1 subscription, 1 conn", w, s, c)
	}
	for _, w := range ws {
		w.Release(false, 0)
		w.Release(false, 0) // idempotent
	}
	if got, want := ft.ops(), []string{"sub " + ch, "unsub " + ch}; !slices.Equal(got, want) {
		t.Errorf("transport ops = %q, want %q (a waiter that gives up unsubscribes at once)", got, want)
	}
	if w, s, _ := h.Counts(); w != 0 || s != 0 {
		t.Errorf("Counts() = %d waiters, %d subscriptions after the releases, want 0, 0", w, s)
	}
}

// TestHub_Message_longestIdleFirst: a message wakes one waiter, the one
// idle longest, skipping a waiter whose wake-up is still pending; the woken
// waiter goes to the back.
func TestHub_Message_longestIdleFirst(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{})
	ws := append([]*wake.Waiter{firstWaiter(t, h, ft, ch)}, moreWaiters(t, h, ch, 2)...)
	ft.ev.Message(ch)
	wantWoken(t, "1st message", ws, true, false, false)
	ft.ev.Message(ch)
	wantWoken(t, "2nd message", ws, false, true, false)
	ft.ev.Message(ch)
	ft.ev.Message(ch) // the third is the longest idle, then the first
	wantWoken(t, "3rd and 4th messages", ws, true, false, true)
	// ws[1] is the longest idle now, but leave it a wake-up pending: the next
	// message goes to the one after it, ws[2].
	ws[1].Signal()
	ft.ev.Message(ch)
	wantWoken(t, "a message while ws[1] has one pending", ws, false, true, true)
}

// TestHub_Message_wakeAllMode: a message wakes every WakeAll waiter of
// its channel and, beside them, one WakeOne waiter (the longest idle),
// as a write release wakes every reader and one writer; a WakeAll waiter
// with a wake-up pending keeps one; the fallback timer still wakes one
// waiter of any mode.
func TestHub_Message_wakeAllMode(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{})
	one := []*wake.Waiter{firstWaiter(t, h, ft, ch)}
	var all []*wake.Waiter
	for range 3 {
		w, fresh, err := h.Subscribe(context.Background(), ch, wake.WakeAll, time.Time{})
		if err != nil || fresh {
			t.Fatalf("Subscribe WakeAll = fresh %v, %v; want not fresh, nil", fresh, err)
		}
		all = append(all, w)
	}
	one = append(one, moreWaiters(t, h, ch, 1)...)
	ft.ev.Message(ch)
	wantWoken(t, "1st message: WakeAll waiters", all, true, true, true)
	wantWoken(t, "1st message: WakeOne waiters", one, true, false)
	all[1].Signal()
	ft.ev.Message(ch)
	wantWoken(t, "2nd message: WakeAll waiters", all, true, true, true)
	wantWoken(t, "and no second wake-up for the one pending", all, false, false, false)
	wantWoken(t, "2nd message: WakeOne waiters", one, false, true)

	// The fallback timer wakes one waiter, whatever its mode.
	one[0].Hint(-1, time.Millisecond, 5*time.Second)
	clock.Advance(5 * time.Second)
	if n := countWoken(append(all, one...)...); n != 1 {
		t.Errorf("the fallback timer woke %d waiters, want 1", n)
	}
}

// TestHub_Message_wakeAllOnly: with only WakeAll waiters (a latch's
// Await, a semaphore's waiters) every message wakes all of them, and a
// message with no waiter is kept for the next one.
func TestHub_Message_wakeAllOnly(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{Linger: time.Hour})
	first := firstWaiter(t, h, ft, ch)
	first.Release(true, time.Minute)
	ft.ev.Message(ch)
	var all []*wake.Waiter
	for range 3 {
		w, _, err := h.Subscribe(context.Background(), ch, wake.WakeAll, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, w)
	}
	wantWoken(t, "the kept message", all, true, false, false)
	for i := range 3 {
		ft.ev.Message(ch)
		wantWoken(t, fmt.Sprintf("message %d", i), all, true, true, true)
	}
}

// TestHub_Subscribe_heardSince: on a confirmed channel, a waiter whose
// last attempt started before a message that other waiters heard gets a
// fresh subscription (it must try again: the release may serve it too);
// one whose attempt started after it does not.
func TestHub_Subscribe_heardSince(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{})
	firstWaiter(t, h, ft, ch)
	before := clock.Now()
	clock.Advance(time.Millisecond)
	ft.ev.Message(ch)
	clock.Advance(time.Millisecond)
	after := clock.Now()
	for _, c := range []struct {
		since time.Time
		fresh bool
	}{{before, true}, {after, false}, {time.Time{}, false}} {
		w, fresh, err := h.Subscribe(context.Background(), ch, wake.WakeAll, c.since)
		if err != nil || fresh != c.fresh {
			t.Errorf("Subscribe since %v = fresh %v, %v; want %v", c.since, fresh, err, c.fresh)
		}
		w.Release(false, 0)
	}
}

// TestWaiter_Release_sharedWakesShared: a WakeShared waiter that got the
// lock wakes every other WakeShared waiter, not the WakeOne or WakeAll
// ones, and drops a wake-up it did not use (the others heard it too); a
// WakeShared waiter that gives up passes its unused wake-up on.
func TestWaiter_Release_sharedWakesShared(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{})
	one := firstWaiter(t, h, ft, ch)
	sub := func(m wake.Mode) *wake.Waiter {
		w, _, err := h.Subscribe(context.Background(), ch, m, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	all := sub(wake.WakeAll)
	shared := []*wake.Waiter{sub(wake.WakeShared), sub(wake.WakeShared), sub(wake.WakeShared)}
	shared[0].Signal() // a wake-up it takes and does not use
	shared[0].Release(true, time.Minute)
	wantWoken(t, "the other readers", shared[1:], true, true)
	wantWoken(t, "WakeOne and WakeAll waiters", []*wake.Waiter{one, all}, false, false)

	shared[1].Signal()
	shared[1].Release(false, 0) // gives up: its wake-up passes on
	if n := countWoken(one, all, shared[2]); n != 1 {
		t.Errorf("%d waiters got the wake-up a giving-up waiter left, want 1", n)
	}
}

// countWoken counts which of ws had a wake-up pending (taking them).
func countWoken(ws ...*wake.Waiter) int {
	n := 0
	for _, w := range wokenSet(ws...) {
		if w {
			n++
		}
	}
	return n
}

// TestHub_Message_pendingForNextWaiter: a message that finds no waiter (the
// channel lingers after its last waiter got the lock) is kept for the next
// waiter, who finds it at once; one message is kept at most.
func TestHub_Message_pendingForNextWaiter(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{Linger: time.Hour})
	firstWaiter(t, h, ft, ch).Release(true, time.Minute)
	ft.ev.Message(ch)
	ft.ev.Message(ch)
	ws := moreWaiters(t, h, ch, 2)
	wantWoken(t, "waiters after two unheard messages", ws, true, false)
	if got := ft.ops(); len(got) != 1 {
		t.Errorf("transport ops = %q, want the one SUBSCRIBE (the lingering channel serves the new waiters)", got)
	}
}

// TestHub_Resubscribed_wakesAll: a resubscription wakes every waiter and
// every watcher, reports the channel and its waiters, and with no waiter
// leaves a wake-up for the next one.
func TestHub_Resubscribed_wakesAll(t *testing.T) {
	type report struct {
		channel string
		waiters int
	}
	var reports []report
	h, ft, _ := newTestHub(t, wake.Config{Linger: time.Hour, OnResubscribe: func(c string, n int) { reports = append(reports, report{c, n}) }})
	ws := append([]*wake.Waiter{firstWaiter(t, h, ft, ch)}, moreWaiters(t, h, ch, 2)...)
	var notified atomic.Int32
	watch := h.Watch(ch, func() { notified.Add(1) })
	defer watch.Stop()
	ws[1].Signal() // one already pending: still one after
	ft.ev.Resubscribed(ch)
	wantWoken(t, "after a resubscription", ws, true, true, true)
	wantWoken(t, "and no second wake-up", ws, false, false, false)
	if n := notified.Load(); n != 1 {
		t.Errorf("watcher notified %d times, want 1", n)
	}
	if want := []report{{ch, 3}}; !slices.Equal(reports, want) {
		t.Errorf("OnResubscribe calls = %v, want %v", reports, want)
	}
	for _, w := range ws {
		w.Release(true, time.Minute)
	}
	ft.ev.Resubscribed(ch)
	if next := moreWaiters(t, h, ch, 1); !woken(next[0]) {
		t.Error("a resubscription with no waiter left no wake-up for the next one")
	}
}

// TestWaiter_Hint_bounds: the fallback timer fires just after the ttl told,
// at least floor and at most ceil from now, at the ceiling when the lock
// has no expiry; it wakes the waiter once (no re-arm for a lone waiter).
func TestWaiter_Hint_bounds(t *testing.T) {
	for _, c := range []struct {
		name             string
		ttl, floor, ceil time.Duration
		want             time.Duration
	}{
		{"ttl", 30 * time.Millisecond, time.Millisecond, time.Second, 31 * time.Millisecond},
		{"floor", 0, 50 * time.Millisecond, time.Second, 50 * time.Millisecond},
		{"ceil", time.Hour, time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		{"no expiry", -1, time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, ft, clock := newTestHub(t, wake.Config{})
			w := firstWaiter(t, h, ft, ch)
			w.Hint(c.ttl, c.floor, c.ceil)
			clock.Advance(c.want - time.Millisecond)
			if woken(w) {
				t.Fatalf("woken before %v", c.want)
			}
			clock.Advance(time.Millisecond)
			if !woken(w) {
				t.Fatalf("not woken at %v", c.want)
			}
			clock.Advance(time.Hour)
			if woken(w) {
				t.Error("a lone waiter was woken again: the timer re-armed")
			}
		})
	}
}

// TestWaiter_Hint_earliestWins: a channel has one fallback timer, at the
// earliest time its waiters asked for; a later hint does not postpone it.
func TestWaiter_Hint_earliestWins(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{})
	ws := append([]*wake.Waiter{firstWaiter(t, h, ft, ch)}, moreWaiters(t, h, ch, 1)...)
	ws[0].Hint(-1, time.Millisecond, 100*time.Millisecond)
	ws[1].Hint(20*time.Millisecond, time.Millisecond, time.Second)  // earlier: moves it
	ws[0].Hint(500*time.Millisecond, time.Millisecond, time.Second) // later: ignored
	clock.Advance(20 * time.Millisecond)
	wantWoken(t, "at 21ms", ws, false, false)
	clock.Advance(time.Millisecond)
	wantWoken(t, "at 21ms", ws, true, false)
	if n := clock.armed(); n != 1 {
		t.Errorf("%d timers armed after the first fired, want 1 (re-armed for the other waiter)", n)
	}
}

// TestWaiter_Hint_rearm: when the timer fires it wakes one waiter and,
// while others remain, arms itself again at the channel's ceiling, so that
// the others are not left without a timer when the woken one gets the lock.
func TestWaiter_Hint_rearm(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{})
	ws := append([]*wake.Waiter{firstWaiter(t, h, ft, ch)}, moreWaiters(t, h, ch, 2)...)
	ws[2].Hint(10*time.Millisecond, time.Millisecond, 100*time.Millisecond)
	clock.Advance(11 * time.Millisecond)
	wantWoken(t, "at 11ms", ws, true, false, false)
	ws[0].Release(true, 0) // got the lock; its lease 0: a timer at 1ms for the others
	clock.Advance(time.Millisecond)
	wantWoken(t, "1ms after the holder's release with lease 0", ws[1:], true, false)
	// Re-armed at the ceiling: the last waiter wakes 100ms later.
	clock.Advance(99 * time.Millisecond)
	wantWoken(t, "99ms later", ws[1:], false, false)
	clock.Advance(time.Millisecond)
	wantWoken(t, "at the ceiling", ws[1:], false, true)
	// Two waiters left: the timer re-armed again.
	clock.Advance(100 * time.Millisecond)
	wantWoken(t, "at the next ceiling", ws[1:], true, false)
}

// TestWaiter_Release_leaseTimer: a waiter that got the lock with a lease
// leaves the others a timer at that lease (nothing is published when a
// lease runs out), unless an earlier one is armed.
func TestWaiter_Release_leaseTimer(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{})
	ws := append([]*wake.Waiter{firstWaiter(t, h, ft, ch)}, moreWaiters(t, h, ch, 1)...)
	ws[0].Hint(-1, time.Millisecond, time.Second)
	ws[0].Release(true, 30*time.Millisecond)
	clock.Advance(30 * time.Millisecond)
	wantWoken(t, "before the lease ran out", ws[1:], false)
	clock.Advance(time.Millisecond)
	wantWoken(t, "when the lease ran out", ws[1:], true)
}

// TestWaiter_Release_passesWakeup: a waiter that leaves with a wake-up it
// did not act on (never received, or signalled back) passes it to another
// waiter; with no other waiter it is kept for the next one.
func TestWaiter_Release_passesWakeup(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{Linger: time.Hour})
	ws := append([]*wake.Waiter{firstWaiter(t, h, ft, ch)}, moreWaiters(t, h, ch, 2)...)
	ft.ev.Message(ch)
	ws[0].Release(false, 0) // never received it
	wantWoken(t, "after ws[0] left with the wake-up", ws[1:], true, false)
	ft.ev.Message(ch)
	if !woken(ws[2]) {
		t.Fatal("ws[2] not woken by the second message")
	}
	ws[2].Signal() // took it and ends without acting on it: hand it back
	ws[2].Release(false, 0)
	wantWoken(t, "after ws[2] handed its wake-up back", ws[1:2], true)
	// The last waiter: a watcher keeps the channel, the wake-up is kept.
	watch := h.Watch(ch, func() {})
	defer watch.Stop()
	ws[1].Signal()
	ws[1].Release(false, 0)
	if next := moreWaiters(t, h, ch, 1); !woken(next[0]) {
		t.Error("the wake-up of the last waiter was not kept for the next one")
	}
}

// TestWaiter_Release_linger: the last waiter that got the lock leaves the
// channel subscribed for Config.Linger, then it is unsubscribed; a new
// waiter meanwhile keeps it (no SUBSCRIBE, no wait); a last waiter that
// gives up unsubscribes at once.
func TestWaiter_Release_linger(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{Linger: 500 * time.Millisecond})
	firstWaiter(t, h, ft, ch).Release(true, time.Minute)
	clock.Advance(499 * time.Millisecond)
	if got := ft.ops(); len(got) != 1 {
		t.Fatalf("transport ops = %q before the linger ran out, want the SUBSCRIBE only", got)
	}
	clock.Advance(time.Millisecond)
	if got, want := ft.ops(), []string{"sub " + ch, "unsub " + ch}; !slices.Equal(got, want) {
		t.Fatalf("transport ops = %q after the linger, want %q", got, want)
	}

	// Again, with a new waiter during the linger.
	firstWaiter(t, h, ft, ch).Release(true, time.Minute)
	clock.Advance(200 * time.Millisecond)
	w := moreWaiters(t, h, ch, 1)[0]
	clock.Advance(time.Hour)
	if got := ft.ops(); len(got) != 3 {
		t.Fatalf("transport ops = %q, want no UNSUBSCRIBE while a waiter came during the linger", got)
	}
	w.Release(false, 0) // gives up: at once
	if got := ft.ops(); len(got) != 4 || got[3] != "unsub "+ch {
		t.Fatalf("transport ops = %q, want an UNSUBSCRIBE at once when the last waiter gives up", got)
	}
}

// TestHub_Subscribe_confirmWaitExpires: a subscription Redis does not
// confirm within Config.ConfirmWait is no error: the waiter goes on, fresh,
// on its fallback timer; a later confirmation is the first, not a
// resubscription.
func TestHub_Subscribe_confirmWaitExpires(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{ConfirmWait: 2 * time.Second})
	res := subscribeAsync(context.Background(), h, ch)
	eventually(t, "the confirm wait's timer", func() bool { return clock.armed() == 1 })
	clock.Advance(2*time.Second - time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("Subscribe returned %+v before the confirm wait ran out", r)
	default:
	}
	clock.Advance(time.Millisecond)
	r := receive(t, res)
	if r.err != nil || !r.fresh {
		t.Fatalf("Subscribe = fresh %v, %v; want fresh, nil", r.fresh, r.err)
	}
	// A second waiter waits for the confirmation too (the channel is not
	// confirmed yet), which releases both.
	res2 := subscribeAsync(context.Background(), h, ch)
	eventually(t, "the second confirm wait's timer", func() bool { return clock.armed() == 1 })
	ft.ev.Confirmed(ch)
	if r2 := receive(t, res2); r2.err != nil || !r2.fresh {
		t.Fatalf("second Subscribe = fresh %v, %v; want fresh, nil", r2.fresh, r2.err)
	}
	if woken(r.w) {
		t.Error("the first confirmation woke a waiter: it is no resubscription")
	}
}

// TestHub_Subscribe_ctxCancel: a caller whose context ends during the
// confirm wait gets ctx's error and leaves: the channel, without waiters,
// is unsubscribed.
func TestHub_Subscribe_ctxCancel(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{Linger: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	res := subscribeAsync(ctx, h, ch)
	eventually(t, "SUBSCRIBE", func() bool { return len(ft.ops()) == 1 })
	cancel()
	r := receive(t, res)
	if !errors.Is(r.err, context.Canceled) || r.w != nil {
		t.Fatalf("Subscribe = %v, %v; want nil, context.Canceled", r.w, r.err)
	}
	if got, want := ft.ops(), []string{"sub " + ch, "unsub " + ch}; !slices.Equal(got, want) {
		t.Errorf("transport ops = %q, want %q", got, want)
	}
	if w, _, _ := h.Counts(); w != 0 {
		t.Errorf("%d waiters left, want 0", w)
	}
}

// TestHub_Close: Close returns Config.ErrClosed to a waiter in its confirm
// wait, closes the transport, and from then on Subscribe fails, Watch
// returns nil and a release sends no UNSUBSCRIBE. A second Close returns
// nil.
func TestHub_Close(t *testing.T) {
	errClosed := errors.New("owner: closed")
	h, ft, _ := newTestHub(t, wake.Config{ErrClosed: errClosed})
	w := firstWaiter(t, h, ft, "other")
	res := subscribeAsync(context.Background(), h, ch)
	eventually(t, "SUBSCRIBE", func() bool { return len(ft.ops()) == 2 })
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := receive(t, res); !errors.Is(r.err, errClosed) {
		t.Errorf("Subscribe in its confirm wait = %v, want the ErrClosed of Config", r.err)
	}
	if !ft.isClosed() {
		t.Error("the transport was not closed")
	}
	if _, _, err := h.Subscribe(context.Background(), ch, wake.WakeOne, time.Time{}); !errors.Is(err, errClosed) {
		t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
	}
	if h.Watch(ch, func() {}) != nil {
		t.Error("Watch after Close is not nil")
	}
	w.Release(false, 0)
	if got := ft.ops(); len(got) != 2 {
		t.Errorf("transport ops = %q, want no UNSUBSCRIBE after Close", got)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}

	// The default error is wake.ErrClosed.
	h2, _, _ := newTestHub(t, wake.Config{})
	_ = h2.Close()
	if _, _, err := h2.Subscribe(context.Background(), ch, wake.WakeOne, time.Time{}); !errors.Is(err, wake.ErrClosed) {
		t.Errorf("Subscribe after Close = %v, want wake.ErrClosed", err)
	}
}

// TestHub_Config_closing: once Config.Closing is closed the hub counts as
// closed before Close runs: waiters in their confirm wait get ErrClosed,
// the waiters that leave send no UNSUBSCRIBE (Close is about to close the
// connections).
func TestHub_Config_closing(t *testing.T) {
	closing := make(chan struct{})
	h, ft, _ := newTestHub(t, wake.Config{Closing: closing})
	w := firstWaiter(t, h, ft, "other")
	res := subscribeAsync(context.Background(), h, ch)
	eventually(t, "SUBSCRIBE", func() bool { return len(ft.ops()) == 2 })
	close(closing)
	if r := receive(t, res); !errors.Is(r.err, wake.ErrClosed) {
		t.Errorf("Subscribe in its confirm wait = %v, want ErrClosed", r.err)
	}
	w.Release(false, 0)
	if got := ft.ops(); len(got) != 2 {
		t.Errorf("transport ops = %q, want no UNSUBSCRIBE once closing", got)
	}
	if _, _, err := h.Subscribe(context.Background(), ch, wake.WakeOne, time.Time{}); !errors.Is(err, wake.ErrClosed) {
		t.Errorf("Subscribe once closing = %v, want ErrClosed", err)
	}
}

// TestHub_Watch: a watcher hears every message and every resubscription
// (while a message wakes one waiter), needs no timer, keeps the channel
// subscribed, and is not called after Stop; the last watcher's Stop lets
// the channel linger, then go.
func TestHub_Watch(t *testing.T) {
	h, ft, clock := newTestHub(t, wake.Config{Linger: 500 * time.Millisecond})
	var n1, n2 atomic.Int32
	w1 := h.Watch(ch, func() { n1.Add(1) })
	w2 := h.Watch(ch, func() { n2.Add(1) })
	if got := ft.ops(); !slices.Equal(got, []string{"sub " + ch}) {
		t.Fatalf("transport ops = %q, want one SUBSCRIBE for two watchers", got)
	}
	ft.ev.Confirmed(ch)
	waiter := moreWaiters(t, h, ch, 1)[0]
	for range 3 {
		ft.ev.Message(ch)
	}
	ft.ev.Resubscribed(ch)
	if a, b := n1.Load(), n2.Load(); a != 4 || b != 4 {
		t.Errorf("watchers notified %d and %d times, want 4 each (3 messages, 1 resubscription)", a, b)
	}
	if !woken(waiter) {
		t.Error("the waiter was not woken")
	}
	waiter.Release(false, 0)
	if clock.armed() != 0 {
		t.Errorf("%d timers armed with watchers only, want 0", clock.armed())
	}
	if got := ft.ops(); len(got) != 1 {
		t.Fatalf("transport ops = %q, want the channel kept for the watchers", got)
	}
	w1.Stop()
	w1.Stop() // idempotent
	ft.ev.Message(ch)
	if a, b := n1.Load(), n2.Load(); a != 4 || b != 5 {
		t.Errorf("after w1.Stop: notified %d and %d times, want 4 and 5", a, b)
	}
	w2.Stop()
	clock.Advance(499 * time.Millisecond)
	if got := ft.ops(); len(got) != 1 {
		t.Fatalf("transport ops = %q, want the channel lingering", got)
	}
	clock.Advance(time.Millisecond)
	if got, want := ft.ops(), []string{"sub " + ch, "unsub " + ch}; !slices.Equal(got, want) {
		t.Errorf("transport ops = %q after the linger, want %q", got, want)
	}
}

// TestHub_Wake: Wake wakes the waiters as a message does (every shared
// waiter, one WakeOne waiter) and tells no watcher; on a channel the hub
// does not subscribe it does nothing.
func TestHub_Wake(t *testing.T) {
	h, ft, _ := newTestHub(t, wake.Config{})
	one := []*wake.Waiter{firstWaiter(t, h, ft, ch)}
	one = append(one, moreWaiters(t, h, ch, 1)...)
	var shared []*wake.Waiter
	for range 2 {
		w, _, err := h.Subscribe(context.Background(), ch, wake.WakeShared, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		shared = append(shared, w)
	}
	var notified atomic.Int32
	watch := h.Watch(ch, func() { notified.Add(1) })
	defer watch.Stop()
	h.Wake(ch)
	wantWoken(t, "WakeShared waiters", shared, true, true)
	wantWoken(t, "WakeOne waiters", one, true, false)
	if n := notified.Load(); n != 0 {
		t.Errorf("the watcher was notified %d times, want 0", n)
	}
	h.Wake("other")
	if got := ft.ops(); !slices.Equal(got, []string{"sub " + ch}) {
		t.Errorf("transport ops = %q, want Wake to subscribe nothing", got)
	}
}

// TestBoth: a channel is subscribed on both transports and confirmed when
// both confirmed it; a message or a resubscription on either reaches the
// hub; the counts add up; an unsubscription goes to both.
func TestBoth(t *testing.T) {
	a, b, clock := newFakeTransport(), newFakeTransport(), newFakeClock()
	h := wake.New(wake.Both(a, b), wake.Config{Clock: clock})
	defer func() {
		if err := h.Close(); err != nil || !a.isClosed() || !b.isClosed() {
			t.Errorf("Close = %v, closed %v and %v; want nil, both closed", err, a.isClosed(), b.isClosed())
		}
	}()
	res := subscribeAsync(context.Background(), h, ch)
	eventually(t, "SUBSCRIBE on both", func() bool { return len(a.ops()) == 1 && len(b.ops()) == 1 })
	a.ev.Confirmed(ch)
	select {
	case r := <-res:
		t.Fatalf("Subscribe returned %+v with one kind confirmed", r)
	case <-time.After(20 * time.Millisecond):
	}
	b.ev.Confirmed(ch)
	r := receive(t, res)
	if r.err != nil || !r.fresh {
		t.Fatalf("Subscribe = fresh %v, %v; want fresh", r.fresh, r.err)
	}
	ws := append([]*wake.Waiter{r.w}, moreWaiters(t, h, ch, 1)...)
	if w, s, c := h.Counts(); w != 2 || s != 2 || c != 2 {
		t.Errorf("Counts() = %d, %d, %d; want 2 waiters, 2 subscriptions (once per kind), 2 conns", w, s, c)
	}
	a.ev.Message(ch)
	b.ev.Message(ch) // the same release, published twice: wakes the other
	wantWoken(t, "a release published on both kinds", ws, true, true)
	b.ev.Resubscribed(ch)
	wantWoken(t, "a resubscription of one kind", ws, true, true)
	for _, w := range ws {
		w.Release(false, 0)
	}
	for _, f := range []*fakeTransport{a, b} {
		if got, want := f.ops(), []string{"sub " + ch, "unsub " + ch}; !slices.Equal(got, want) {
			t.Errorf("transport ops = %q, want %q", got, want)
		}
	}
	// A resubscription of one kind before the other's first confirmation
	// still wakes the waiters (their confirm wait may have run out).
	res = subscribeAsync(context.Background(), h, ch)
	eventually(t, "the confirm wait's timer", func() bool { return clock.armed() == 1 })
	clock.Advance(2 * time.Second)
	r = receive(t, res)
	a.ev.Confirmed(ch)
	a.ev.Resubscribed(ch)
	wantWoken(t, "a resubscription before the other kind confirmed", []*wake.Waiter{r.w}, true)
	r.w.Release(false, 0)
}

// TestHub_concurrent: waiters of a few channels come and go concurrently
// (some get the lock, some give up) while messages and resubscriptions
// arrive, under the race detector: the transport never sees a channel
// subscribed twice or unsubscribed when it is not subscribed, and when all
// are gone (the lingers over) nothing is left subscribed.
func TestHub_concurrent(t *testing.T) {
	ft := newFakeTransport()
	ft.autoConfirm = true
	h := wake.New(ft, wake.Config{Linger: time.Millisecond, ConfirmWait: time.Second})
	defer func() { _ = h.Close() }()
	chans := []string{"a", "b", "c"}
	stop := make(chan struct{})
	var events sync.WaitGroup
	events.Add(1)
	go func() { // plays Redis
		defer events.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%50 == 0 {
				ft.ev.Resubscribed(chans[i%3])
			} else {
				ft.ev.Message(chans[i%3])
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var waiters sync.WaitGroup
	for g := range 6 {
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			for i := range 100 {
				w, _, err := h.Subscribe(context.Background(), chans[(g+i)%3], wake.WakeOne, time.Time{})
				if err != nil {
					t.Errorf("Subscribe: %v", err)
					return
				}
				w.Hint(time.Duration(i%5)*time.Millisecond, time.Millisecond, 5*time.Millisecond)
				select {
				case <-w.C():
					if i%3 == 0 {
						w.Signal() // did not act on it
					}
				case <-time.After(time.Millisecond):
				}
				w.Release(i%2 == 0, time.Millisecond)
			}
		}()
	}
	waiters.Wait()
	close(stop)
	events.Wait()
	if w, _, _ := h.Counts(); w != 0 {
		t.Errorf("%d waiters left", w)
	}
	eventually(t, "every channel unsubscribed after its linger", func() bool { _, s, _ := h.Counts(); return s == 0 })
	state := map[string]bool{}
	for _, op := range ft.ops() {
		kind, c, _ := strings.Cut(op, " ")
		if (kind == "sub") == state[c] {
			t.Fatalf("transport got %q while the channel's subscribed state was %v", op, state[c])
		}
		state[c] = kind == "sub"
	}
}
