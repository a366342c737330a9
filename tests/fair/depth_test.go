package fair_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

// The fair queue at any depth (docs/PROTOCOL.md, "The fair queue
// at any depth"). The scripts no longer rewrite every waiter's deadline at a
// handoff, find a re-asking waiter's place by its own deadline instead of
// LPOS, and leave a tombstone instead of an LREM when a waiter gives up from
// the middle. These tests hold the promises that rest on those steps:
// exact FIFO, every entry of the list keeps a deadline (Redisson's scripts
// read the head's and the last one's), tombstones leave the queue at either
// end, a live Go waiter survives Redisson's handoffs, a dead one holds the
// queue up for one budget at most.

// foreignGiveUp is the give-up of PROTOCOL.md as Redisson runs it (ARGV
// field, wait): every waiter behind the field moves up one budget, then the
// field leaves the deadline set and the list. It stands for Java Redisson.
const foreignGiveUp = `
local queue = redis.call('lrange', KEYS[1], 0, -1)
local behind = false
for _, f in ipairs(queue) do
  if behind then
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), f)
  elseif f == ARGV[1] then
    behind = true
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
`

// everyEntryScored fails when an entry of the queue has no deadline, or
// a deadline belongs to no entry: Redisson's purge compares the head's
// deadline (3.16.8 fails on a missing one, 4.x stops purging) and its join
// chains on the last one's.
func everyEntryScored(t *testing.T, s queueSnap) {
	t.Helper()
	for _, f := range s.queue {
		_, live := s.scores[f]
		_, tomb := s.tombs[f]
		if !live && !tomb {
			t.Errorf("queue entry %s has no deadline (queue %q)", f, s.queue)
		}
	}
	for f := range s.scores {
		if !slices.Contains(s.queue, f) {
			t.Errorf("deadline of %s, which is not queued (queue %q)", f, s.queue)
		}
	}
	for f := range s.tombs {
		if !slices.Contains(s.queue, f) {
			t.Errorf("tombstone of %s, which is not queued (queue %q)", f, s.queue)
		}
	}
}

// TestFairLeave_tombstones: a waiter that gives up from the middle stays in
// the list as a tombstone (a passed deadline plus half a millisecond), the
// others keep their deadlines; one at the back is popped, and so are the
// tombstones it leaves at the back; a waiter whose tombstone is still
// queued that asks again joins the back (exact FIFO); a tombstone that
// reaches the head is popped by the handoff's purge and the live waiter
// behind it is told it is next. The old scripts removed the waiter with
// LREM at once (no tombstone: this test fails on them).
func TestFairLeave_tombstones(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := keysOf(backends.UniqueName(t))
		const lease, wait = 30_000, 10_000
		if r, err := fairAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
			t.Fatalf("holder = %v, %v", ptrString(r), err)
		}
		join := func(fs ...string) {
			t.Helper()
			for _, f := range fs {
				if r, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
					t.Fatalf("%s asks = %v, %v; want a wait", f, ptrString(r), err)
				}
			}
		}
		leave := func(f string) {
			t.Helper()
			if ok, err := fairLeave(ctx, rdb, k, f, wait); err != nil || !ok {
				t.Fatalf("%s leaves = %v, %v; want true", f, ok, err)
			}
		}
		wantQueue := func(what string, want ...string) queueSnap {
			t.Helper()
			s := mustSnapshot(t, rdb, k)
			if !slices.Equal(s.queue, want) {
				t.Fatalf("%s: queue %q, want %q", what, s.queue, want)
			}
			everyEntryScored(t, s)
			return s
		}

		join("w1", "w2", "w3", "w4")
		s0 := wantQueue("four joined", "w1", "w2", "w3", "w4")
		leave("w2")
		s1 := wantQueue("w2 left from the middle", "w1", "w2", "w3", "w4")
		if tomb, ok := s1.tombs["w2"]; !ok || tomb > float64(s1.now) {
			t.Errorf("w2's deadline %v (tombstone %v), want a tombstone at or before now %d", tomb, ok, s1.now)
		}
		for _, f := range []string{"w1", "w3", "w4"} {
			if s1.scores[f] != s0.scores[f] {
				t.Errorf("%s's deadline moved from %d to %d when w2 left", f, s0.scores[f], s1.scores[f])
			}
		}
		// A lost reply resent: the same state.
		leave("w2")
		wantQueue("w2 left again", "w1", "w2", "w3", "w4")

		// At the back: popped, and the tombstone it leaves at the back too.
		leave("w4")
		wantQueue("w4 left from the back", "w1", "w2", "w3")
		leave("w3")
		wantQueue("w3 left: the tombstone w2 trimmed off the back", "w1")

		// A tombstone in the middle, whose waiter asks again: it joins the
		// back, behind those who came after it gave up.
		join("w2", "w3")
		leave("w2")
		join("w5")
		join("w2")
		s2 := wantQueue("w2 asked again", "w1", "w3", "w5", "w2")
		if s2.scores["w2"] <= s2.scores["w5"] {
			t.Errorf("w2 joined the back with deadline %d, not after w5's %d", s2.scores["w2"], s2.scores["w5"])
		}

		// w3 gives up; the holder releases and w1 takes the lock: the
		// tombstone w3, now at the head, is popped and w5 is told it is next.
		sub := backends.Subscribe(t, rdb, false, k.waiterChannel("w5"), k.waiterChannel("w3"), k.waiterChannel(barrierField))
		leave("w3")
		if r, err := fairRelease(ctx, rdb, k, "holder", lease); err != nil || r == nil || *r != 1 {
			t.Fatalf("holder release = %v, %v; want 1", ptrString(r), err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "w1", lease, wait); err != nil || r != nil {
			t.Fatalf("w1 acquires = %v, %v; want the lock", ptrString(r), err)
		}
		wantQueue("w1 took the lock", "w5", "w2")
		if got := wokenFields(t, rdb, sub, k); !slices.Equal(got, []string{"w5"}) {
			t.Errorf("woken %q, want [w5] (the tombstone w3 hears nothing)", got)
		}
		windDown(t, rdb, k, "w1", lease, wait)
	})
}

// TestFairLeave_tombstoneAtTheBackUnderRedisson: a Redisson waiter behind
// a tombstone gives up (Redisson's give-up: LREM, and one budget off those
// behind), which leaves the tombstone last; a Redisson newcomer then chains
// on its deadline: a number, not nil (Redisson 3.16.8 would fail on nil),
// and a Go newcomer trims the tombstone off the back first. Everyone still
// gets the lock in order.
func TestFairLeave_tombstoneAtTheBackUnderRedisson(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := keysOf(backends.UniqueName(t))
		keys := []string{k.lock, k.queue, k.timeouts, k.channel}
		const lease, wait = 30_000, 10_000
		foreign := func(f string) *int64 {
			t.Helper()
			r, err := rdb.Eval(ctx, foreignAcquire, keys, lease, f, wait, time.Now().UnixMilli()).Int64()
			if err == redis.Nil {
				return nil
			}
			if err != nil {
				t.Fatalf("foreign %s asks: %v", f, err)
			}
			return &r
		}
		if r, err := fairAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
			t.Fatalf("holder = %v, %v", ptrString(r), err)
		}
		for _, f := range []string{"g1", "g2"} {
			if r, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s = %v, %v", f, ptrString(r), err)
			}
		}
		if foreign("r1") == nil {
			t.Fatal("r1 got the lock while it is held")
		}
		if ok, err := fairLeave(ctx, rdb, k, "g2", wait); err != nil || !ok {
			t.Fatalf("g2 leaves = %v, %v", ok, err)
		}
		if err := rdb.Eval(ctx, foreignGiveUp, []string{k.queue, k.timeouts}, "r1", wait).Err(); err != nil && err != redis.Nil {
			t.Fatalf("r1 gives up: %v", err)
		}
		s := mustSnapshot(t, rdb, k)
		if !slices.Equal(s.queue, []string{"g1", "g2"}) {
			t.Fatalf("queue %q, want [g1 g2(tombstone)]", s.queue)
		}
		everyEntryScored(t, s)
		if foreign("r2") == nil {
			t.Fatal("r2 got the lock while it is held")
		}
		if r, err := fairAcquire(ctx, rdb, k, "g3", lease, wait); err != nil || r == nil {
			t.Fatalf("g3 = %v, %v", ptrString(r), err)
		}
		s = mustSnapshot(t, rdb, k)
		if !slices.Equal(s.queue, []string{"g1", "g2", "r2", "g3"}) {
			t.Fatalf("queue %q, want [g1 g2(tombstone) r2 g3]", s.queue)
		}
		everyEntryScored(t, s)

		// Hand down: g1, then r2 (the tombstone popped on the way), then g3.
		if r, err := fairRelease(ctx, rdb, k, "holder", lease); err != nil || r == nil || *r != 1 {
			t.Fatalf("holder release = %v, %v", ptrString(r), err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "g1", lease, wait); err != nil || r != nil {
			t.Fatalf("g1 = %v, %v; want the lock", ptrString(r), err)
		}
		if r, err := fairRelease(ctx, rdb, k, "g1", lease); err != nil || r == nil || *r != 1 {
			t.Fatalf("g1 release = %v, %v", ptrString(r), err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "g3", lease, wait); err != nil || r == nil {
			t.Fatalf("g3 jumped the queue: %v, %v", ptrString(r), err)
		}
		if foreign("r2") != nil {
			t.Fatalf("r2, the head, did not get the free lock (queue %q)", mustSnapshot(t, rdb, k).queue)
		}
		if err := rdb.Eval(ctx, foreignRelease, keys, lease, "r2", time.Now().UnixMilli()).Err(); err != nil {
			t.Fatalf("r2 release: %v", err)
		}
		if r, err := fairAcquire(ctx, rdb, k, "g3", lease, wait); err != nil || r != nil {
			t.Fatalf("g3 = %v, %v; want the lock", ptrString(r), err)
		}
		windDown(t, rdb, k, "g3", lease, wait)
	})
}

// TestFairAcquire_redissonHandoffsKeepGoWaiterLive drives the clock: three
// Redisson-style waiters queue, then a Go waiter, which asks again. The
// three then take the lock one after another within a moment, Redisson's
// way: each acquisition takes one budget off every deadline left (ZINCRBY).
// The Go waiter, the head now, was told nothing; its deadline still lies
// more than half a budget ahead (it asks again within half a budget), so
// no purge (a Redisson newcomer's) removes it, and it gets the lock.
func TestFairAcquire_redissonHandoffsKeepGoWaiterLive(t *testing.T) {
	t.Parallel()
	clk := drivenClock(t)
	rdb := clk.rdb
	ctx := context.Background()
	k := keysOf(backends.UniqueName(t))
	keys := []string{k.lock, k.queue, k.timeouts, k.channel}
	const lease, wait = 30_000, 10_000
	askForeign := func(f string) *int64 {
		t.Helper()
		r, err := rdb.Eval(ctx, foreignAcquire, keys, lease, f, wait, clk.now).Int64()
		if err == redis.Nil {
			return nil
		}
		if err != nil {
			t.Fatalf("foreign %s asks: %v", f, err)
		}
		return &r
	}
	releaseForeign := func(f string) {
		t.Helper()
		if err := rdb.Eval(ctx, foreignRelease, keys, lease, f, clk.now).Err(); err != nil {
			t.Fatalf("foreign %s releases: %v", f, err)
		}
	}
	if r, err := fairAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
		t.Fatalf("holder = %v, %v", ptrString(r), err)
	}
	for _, f := range []string{"r1", "r2", "r3"} {
		if askForeign(f) == nil {
			t.Fatalf("%s got the held lock", f)
		}
	}
	if r, err := fairAcquire(ctx, rdb, k, "go", lease, wait); err != nil || r == nil {
		t.Fatalf("go = %v, %v", ptrString(r), err)
	}
	clk.advance(20 * time.Second) // the holder's lease: 10s left
	if r, err := fairAcquire(ctx, rdb, k, "go", lease, wait); err != nil || r == nil {
		t.Fatalf("go asks again = %v, %v", ptrString(r), err)
	}
	asked := clk.now
	if r, err := fairRelease(ctx, rdb, k, "holder", lease); err != nil || r == nil || *r != 1 {
		t.Fatalf("holder release = %v, %v", ptrString(r), err)
	}
	for _, f := range []string{"r1", "r2", "r3"} {
		clk.advance(10 * time.Millisecond)
		if askForeign(f) != nil {
			t.Fatalf("%s, the head, did not get the free lock (queue %q)", f, mustSnapshot(t, rdb, k).queue)
		}
		clk.advance(10 * time.Millisecond)
		releaseForeign(f)
	}
	s := mustSnapshot(t, rdb, k)
	if !slices.Equal(s.queue, []string{"go"}) {
		t.Fatalf("queue %q after three Redisson handoffs, want [go]", s.queue)
	}
	if d := s.scores["go"] - asked; d <= wait/2 {
		t.Fatalf("go's deadline lies %d ms after its last ask, want more than half a budget (%d): it would be purged before it asks again", d, wait/2)
	}
	// Just before its next ask (half a budget after the last), a Redisson
	// newcomer's purge must leave it alone.
	clk.advance(time.Duration(asked+wait/2-1-clk.now) * time.Millisecond)
	askForeign("r4")
	if q := mustSnapshot(t, rdb, k).queue; !slices.Equal(q, []string{"go", "r4"}) {
		t.Fatalf("queue %q, want [go r4]: a live Go waiter was purged", q)
	}
	if r, err := fairAcquire(ctx, rdb, k, "go", lease, wait); err != nil || r != nil {
		t.Fatalf("go = %v, %v; want the lock", ptrString(r), err)
	}
	if r, err := fairRelease(ctx, rdb, k, "go", lease); err != nil || r == nil || *r != 1 {
		t.Fatalf("go release = %v, %v", ptrString(r), err)
	}
	if askForeign("r4") != nil {
		t.Fatalf("r4 did not get the free lock")
	}
	releaseForeign("r4")
	if left := backends.KeysLeft(t, rdb, k.lock, false); len(left) > 0 {
		t.Errorf("keys left behind: %q", left)
	}
}

// TestFairAcquire_deadMiddleBoundedDelay drives the clock: a waiter queued
// deep that dies keeps the deadline of its last renewal (its place × one
// budget); the Go handoffs ahead of it do not move it (no per-waiter
// ZINCRBY), but the one that makes it the head cuts it to the new lease +
// one budget, and the release after cuts it to one budget: the live waiter
// behind it gets the lock one budget after that release, not later.
func TestFairAcquire_deadMiddleBoundedDelay(t *testing.T) {
	t.Parallel()
	clk := drivenClock(t)
	rdb := clk.rdb
	ctx := context.Background()
	k := keysOf(backends.UniqueName(t))
	const lease, wait = 5_000, 20_000
	acq := func(f string) *int64 {
		t.Helper()
		r, err := fairAcquire(ctx, rdb, k, f, lease, wait)
		if err != nil {
			t.Fatalf("%s asks: %v", f, err)
		}
		return r
	}
	rel := func(f string) {
		t.Helper()
		if r, err := fairReleaseWait(ctx, rdb, k, f, lease, wait); err != nil || r == nil || *r != 1 {
			t.Fatalf("%s release = %v, %v; want 1", f, ptrString(r), err)
		}
	}
	if acq("holder") != nil {
		t.Fatal("holder did not get the free lock")
	}
	for _, f := range []string{"a", "b", "c", "dead", "live"} {
		if acq(f) == nil {
			t.Fatalf("%s got the held lock", f)
		}
	}
	clk.advance(time.Second)
	acq("dead") // its last ask: three live deadlines below its own (a, b, c)
	s := mustSnapshot(t, rdb, k)
	if want := clk.now + 4_000 + 4*wait; s.scores["dead"] != want {
		t.Errorf("dead's renewed deadline now%+d, want PTTL + 4 budgets (now%+d)", s.scores["dead"]-clk.now, want-clk.now)
	}
	// a, b, c take the lock in turn, quickly.
	prev := "holder"
	for _, f := range []string{"a", "b", "c"} {
		clk.advance(100 * time.Millisecond)
		rel(prev)
		if acq(f) != nil {
			t.Fatalf("%s, the head, did not get the free lock", f)
		}
		prev = f
	}
	s = mustSnapshot(t, rdb, k)
	if s.queue[0] != "dead" || s.scores["dead"] > clk.now+lease+wait {
		t.Fatalf("queue %q, dead's deadline now%+d: want dead at the head, cut to the lease + one budget (%d)", s.queue, s.scores["dead"]-clk.now, lease+wait)
	}
	clk.advance(100 * time.Millisecond)
	rel("c")
	freed := clk.now
	// The live waiter asks on its timers (here every second): it gets the
	// lock once dead's budget has run out, one budget after the release.
	for clk.now < freed+2*wait {
		clk.advance(time.Second)
		if acq("live") == nil {
			if d := clk.now - freed; d > wait+1000 {
				t.Errorf("live got the lock %d ms after the release, want at most one budget (%d) + its 1s timer", d, wait)
			}
			rel("live")
			if left := backends.KeysLeft(t, rdb, k.lock, false); len(left) > 0 {
				t.Errorf("keys left behind: %q", left)
			}
			return
		}
	}
	t.Fatalf("live did not get the lock within two budgets of the release (queue %q)", mustSnapshot(t, rdb, k).queue)
}

// TestFairForceRelease_popsTombstoneHead: a force release with a tombstone
// at the head pops it and wakes the live waiter behind it, whose deadline
// it cuts to one budget.
func TestFairForceRelease_popsTombstoneHead(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := keysOf(backends.UniqueName(t))
		const lease, wait = 30_000, 10_000
		if r, err := fairAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
			t.Fatalf("holder = %v, %v", ptrString(r), err)
		}
		for _, f := range []string{"a", "b", "c"} {
			if r, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s = %v, %v", f, ptrString(r), err)
			}
		}
		if ok, err := fairLeave(ctx, rdb, k, "b", wait); err != nil || !ok {
			t.Fatalf("b leaves = %v, %v", ok, err)
		}
		// a leaves from the head: the tombstone b is popped on the way, c
		// is the head.
		if ok, err := fairLeave(ctx, rdb, k, "a", wait); err != nil || !ok {
			t.Fatalf("a leaves = %v, %v", ok, err)
		}
		if q := mustSnapshot(t, rdb, k).queue; !slices.Equal(q, []string{"c"}) {
			t.Fatalf("queue %q, want [c]", q)
		}
		// A tombstone at the head when the lock is force-released.
		for _, f := range []string{"d", "e"} {
			if r, err := fairAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s = %v, %v", f, ptrString(r), err)
			}
		}
		if ok, err := fairLeave(ctx, rdb, k, "d", wait); err != nil || !ok {
			t.Fatalf("d leaves = %v, %v", ok, err)
		}
		// c's deadline passes (it died): the force release purges c and the
		// tombstone d and wakes e.
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: float64(time.Now().UnixMilli() - 1_000), Member: "c"}).Err(); err != nil {
			t.Fatal(err)
		}
		sub := backends.Subscribe(t, rdb, false, k.waiterChannel("c"), k.waiterChannel("d"), k.waiterChannel("e"), k.waiterChannel(barrierField))
		ok, err := fairForce(ctx, rdb, k)
		if err != nil || !ok {
			t.Fatalf("force release = %v, %v; want true", ok, err)
		}
		s := mustSnapshot(t, rdb, k)
		if !slices.Equal(s.queue, []string{"e"}) {
			t.Fatalf("queue %q after the force release, want [e]", s.queue)
		}
		if got := s.scores["e"]; got > s.now+wait {
			t.Errorf("e's deadline now%+d, want at most one budget (%d)", got-s.now, wait)
		}
		if got := wokenFields(t, rdb, sub, k); !slices.Equal(got, []string{"e"}) {
			t.Errorf("woken %q, want [e]", got)
		}
		if r, err := fairAcquire(ctx, rdb, k, "e", lease, wait); err != nil || r != nil {
			t.Fatalf("e = %v, %v; want the lock", ptrString(r), err)
		}
		windDown(t, rdb, k, "e", lease, wait)
	})
}
