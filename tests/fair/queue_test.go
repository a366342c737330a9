package fair_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

// TestFairAcquire_staleWaiterKeepsOrder: a newcomer that queues behind a
// stale waiter (its deadline passed, not purged yet because it is not the
// head) gets the deadline of its place in a live chain, not a single budget
// from now; so the next handoff does not get it purged, and the waiter that
// queued after it does not overtake it.
func TestFairAcquire_staleWaiterKeepsOrder(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := keysOf(backends.UniqueName(t))
		const lease, wait = 30_000, 2_000
		if r, err := fairAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
			t.Fatalf("holder = %v, %v", ptrString(r), err)
		}
		for _, f := range []string{"head", "dead"} {
			if r, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s queues = %v, %v", f, ptrString(r), err)
			}
		}
		// "dead" stopped asking long ago: its deadline has passed.
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: float64(time.Now().UnixMilli() - 1_000), Member: "dead"}).Err(); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"j", "k"} {
			if r, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s queues = %v, %v", f, ptrString(r), err)
			}
		}
		// "dead", stale at the back when j came, was trimmed off: j chains on
		// the head's deadline, two waits past the lock's expiry.
		now := time.Now().UnixMilli()
		js := mustSnapshot(t, rdb, k)
		if want := []string{"head", "j", "k"}; !slices.Equal(js.queue, want) {
			t.Errorf("queue %q, want %q (the stale last waiter trimmed off)", js.queue, want)
		}
		if got := js.scores["j"]; got < now+lease+2*wait-500 {
			t.Errorf("j's deadline is %+d ms from now, want at least about lease + 2 waits (%d)", got-now, lease+2*wait)
		}
		// The holder releases and the head takes the lock. j must still be
		// queued, ahead of k.
		if r, err := fairRelease(ctx, rdb, k, "holder", lease); err != nil || r == nil || *r != 1 {
			t.Fatalf("holder release = %v, %v", ptrString(r), err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "head", lease, wait); err != nil || r != nil {
			t.Fatalf("head acquires = %v, %v", ptrString(r), err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "k", lease, wait); err != nil || r == nil {
			t.Fatalf("k asks again = %v, %v", ptrString(r), err)
		}
		s := mustSnapshot(t, rdb, k)
		// "dead", the head now and stale, is purged; j is not.
		if want := []string{"j", "k"}; !slices.Equal(s.queue, want) {
			t.Errorf("queue %q, want %q (j keeps its place)", s.queue, want)
		}
		windDown(t, rdb, k, "head", lease, wait)
	})
}

// TestFairAcquire_renewedDeadlineAfterPurge: a waiter that asks again
// behind a waiter that then dies keeps a deadline within PTTL + budget ×
// (position + 1) from now once the dead one is purged at its deadline, and
// so does a newcomer that chains on it: its renewal counts one budget for
// the live deadline below its own, and the purge that makes it the head
// cuts it to one budget past the lock's expiry.
func TestFairAcquire_renewedDeadlineAfterPurge(t *testing.T) {
	t.Parallel()
	clk := drivenClock(t)
	rdb, advance := clk.rdb, clk.advance
	ctx := context.Background()
	k := keysOf(backends.UniqueName(t))
	const lease, wait = 30_000, 2_000
	T0 := clk.t0
	acquire := func(field string, queued bool) {
		t.Helper()
		r, err := fairAcquire(ctx, rdb, k, field, lease, wait)
		if err != nil || (r != nil) != queued {
			t.Fatalf("%s at T0%+d = %v, %v; want queued %v", field, clk.now-T0, ptrString(r), err, queued)
		}
	}
	acquire("holder", false)
	acquire("dead", true) // deadline T0+32s, never asks again
	acquire("live", true) // T0+34s
	advance(20 * time.Second)
	acquire("holder", false) // the holder's lease is renewed: expiry T0+50s
	acquire("live", true)    // renews behind "dead"
	// One live deadline lies below its own ("dead"'s): one budget for it
	// (a Redisson handoff would take it off) and one more past the lock's
	// expiry.
	if got := mustSnapshot(t, rdb, k).scores["live"]; got != T0+54_000 {
		t.Errorf("live's renewed deadline = T0%+d, want T0+54000 (two budgets past the lock's expiry)", got-T0)
	}
	advance(13 * time.Second) // T0+33s: "dead" is past its deadline
	acquire("new", true)
	s := mustSnapshot(t, rdb, k)
	if want := []string{"live", "new"}; !slices.Equal(s.queue, want) {
		t.Fatalf("queue %q, want %q (dead purged)", s.queue, want)
	}
	pttl := T0 + 50_000 - clk.now
	for i, f := range s.queue {
		if limit := clk.now + pttl + int64(i+1)*wait; s.scores[f] > limit {
			t.Errorf("%s at position %d: deadline T0%+d, over PTTL + %d budgets from now (T0%+d)", f, i, s.scores[f]-T0, i+1, limit-T0)
		}
	}
	// "live" keeps asking while the lock is held past its first deadline:
	// it is never purged.
	for range 3 {
		advance(time.Second)
		acquire("live", true)
	}
	if got := mustSnapshot(t, rdb, k).queue; !slices.Equal(got, []string{"live", "new"}) {
		t.Errorf("queue %q, want live then new", got)
	}
	windDown(t, rdb, k, "holder", lease, wait)
}

// TestFairLeave_wakesFirstLiveWaiter: when the head of the queue leaves and
// the waiter after it is stale (its deadline passed), the leave purges it
// and wakes the first live waiter, whose deadline is cut to one budget from
// now since the lock is free; the stale one hears nothing.
func TestFairLeave_wakesFirstLiveWaiter(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := keysOf(backends.UniqueName(t))
		const lease, wait = 30_000, 2_000
		if r, err := fairAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
			t.Fatalf("holder = %v, %v", ptrString(r), err)
		}
		for _, f := range []string{"leaver", "stale", "live"} {
			if r, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s queues = %v, %v", f, ptrString(r), err)
			}
		}
		if r, err := fairReleaseWait(ctx, rdb, k, "holder", lease, wait); err != nil || r == nil || *r != 1 {
			t.Fatalf("holder release = %v, %v", ptrString(r), err)
		}
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: float64(time.Now().UnixMilli() - 1_000), Member: "stale"}).Err(); err != nil {
			t.Fatal(err)
		}
		sub := backends.Subscribe(t, rdb, false, k.waiterChannel("stale"), k.waiterChannel("live"), k.waiterChannel(barrierField))
		if ok, err := fairLeave(ctx, rdb, k, "leaver", wait); err != nil || !ok {
			t.Fatalf("leaver leaves = %v, %v", ok, err)
		}
		got := wokenFields(t, rdb, sub, k)
		if want := []string{"live"}; !slices.Equal(got, want) {
			t.Errorf("messages after the head left: %q, want %q (the first live waiter)", got, want)
		}
		s := mustSnapshot(t, rdb, k)
		if want := []string{"live"}; !slices.Equal(s.queue, want) {
			t.Errorf("queue %q, want %q (the stale waiter purged)", s.queue, want)
		}
		if d := s.scores["live"] - time.Now().UnixMilli(); d > wait {
			t.Errorf("live's deadline is %dms from now, want at most one budget (%dms): the lock is free", d, wait)
		}
		windDown(t, rdb, k, "", lease, wait)
	})
}

// TestFairAcquire_noSelfWake: a waiter whose call purges the dead waiters
// ahead of it learns from the reply that it is the head; the script does not
// also publish to its own channel (which would only cost it another call).
// A waiter made head by someone else's call is woken on its channel.
func TestFairAcquire_noSelfWake(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := keysOf(backends.UniqueName(t))
		const lease, wait = 30_000, 2_000
		for _, f := range []string{"holder", "dead", "me", "dead2", "other"} {
			if _, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		sub := backends.Subscribe(t, rdb, false, k.waiterChannel("me"), k.waiterChannel("other"), k.waiterChannel(barrierField))
		past := float64(time.Now().UnixMilli() - 1_000)
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: past, Member: "dead"}, redis.Z{Score: past, Member: "dead2"}).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := fairAcquire(ctx, rdb, k, "me", lease, wait)
		if err != nil || r == nil {
			t.Fatalf("me = %v, %v; want queued", ptrString(r), err)
		}
		if q := mustSnapshot(t, rdb, k).queue; q[0] != "me" {
			t.Fatalf("queue %q, want me at the head", q)
		}
		// The holder releases and "me" takes the lock: "dead2", the head
		// now and stale, is purged by the next call, someone else's.
		if r, err := fairRelease(ctx, rdb, k, "holder", lease); err != nil || r == nil {
			t.Fatalf("holder release = %v, %v", ptrString(r), err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "me", lease, wait); err != nil || r != nil {
			t.Fatalf("me acquires = %v, %v", ptrString(r), err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "late", lease, wait); err != nil || r == nil {
			t.Fatalf("late queues = %v, %v", ptrString(r), err)
		}
		got := wokenFields(t, rdb, sub, k)
		// "me" was woken once, by the release (it was the head then);
		// "other" when the call of "late" purged "dead2" ahead of it.
		if want := []string{"me", "other"}; !slices.Equal(got, want) {
			t.Errorf("messages on the waiters' channels %q, want %q", got, want)
		}
		windDown(t, rdb, k, "me", lease, wait)
	})
}
