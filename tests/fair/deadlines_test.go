package fair_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

// ---------------------------------------------------------------------------
// Scenario 4: deadline drift, at the script level with fake owner ids.

const (
	driftLease = 30_000 // ms
	driftWait  = 5_000  // ms
)

// checkDrift runs the part of the drift scenario that needs no clock jump.
// A holder takes the lock; fake:1..fake:4 queue and are told to wait lease,
// lease+wait, lease+2·wait, lease+3·wait less the time since the holder
// took it, their deadlines one wait apart. Redis TIME read before and after
// each call brackets the script's clock, so the bounds follow from order
// alone; tol is the slack in ms of what PTTL gives against TIME (the
// holder's lease as fake:1 reads it, and so fake:1's deadline). The holder
// releases and fake:1 takes the lock: the new head fake:2's deadline is cut
// to the new lease + one wait from now, and the others keep theirs (the
// handoff is O(1): no per-waiter ZINCRBY); fake:3 gives up from the middle:
// it stays in the list as a tombstone (its deadline now - 0.5 ms, popped
// when it reaches the head) and the others keep their deadlines. It leaves
// fake:1 holding the lock and [fake:2 fake:3(tombstone) fake:4] queued.
func checkDrift(t *testing.T, rdb redis.UniversalClient, k fairKeys, tol int64) {
	t.Helper()
	ctx := context.Background()
	took0 := redisNow(t, rdb)
	if r, err := fairAcquire(ctx, rdb, k, "holder:0", driftLease, driftWait); err != nil || r != nil {
		t.Fatalf("holder acquire = %v, %v; want nil (acquired)", ptrString(r), err)
	}
	took1 := redisNow(t, rdb)
	var first int64 // fake:1's deadline: the others' waits count from it
	for i := range 4 {
		field := "fake:" + strconv.Itoa(i+1)
		before := redisNow(t, rdb)
		r, err := fairAcquire(ctx, rdb, k, field, driftLease, driftWait)
		if err != nil || r == nil {
			t.Fatalf("%s acquire = %v, %v; want a wait", field, ptrString(r), err)
		}
		after := redisNow(t, rdb)
		if i == 0 {
			// fake:1 waits out the holder's lease, which ran from the
			// acquisition (between took0 and took1) to this call (between
			// before and after): PTTL, tol ms of clock slack. Its deadline
			// is the script's TIME plus that PTTL plus one budget, and the
			// script may be descheduled between the two reads: up to the
			// call's own span (after - before) either way.
			lo, hi := took0+driftLease-after-tol, took1+driftLease-before+tol
			if *r < lo || *r > hi {
				t.Errorf("%s: first wait %d ms, want %d..%d (the lease since the holder took the lock)", field, *r, lo, hi)
			}
			f, err := rdb.ZScore(ctx, k.timeouts, field).Result()
			if err != nil {
				t.Fatalf("%s's deadline: %v", field, err)
			}
			first = int64(f)
			span := after - before + tol
			if lo, hi := took0+driftLease+driftWait-span, took1+driftLease+driftWait+span; first < lo || first > hi {
				t.Errorf("%s: deadline %d, want %d..%d (the lease and one budget from the holder's acquisition)", field, first, lo, hi)
			}
			continue
		}
		// Each later waiter waits for the one before it: fake:1's deadline
		// plus i-1 budgets, from this call on, exactly (TIME only).
		end := first + int64((i-1)*driftWait)
		if lo, hi := end-after, end-before; *r < lo || *r > hi {
			t.Errorf("%s: first wait %d ms, want %d..%d (fake:1's deadline + %d waits from this call)", field, *r, lo, hi, i-1)
		}
	}
	s := mustSnapshot(t, rdb, k)
	if want := []string{"fake:1", "fake:2", "fake:3", "fake:4"}; !slices.Equal(s.queue, want) {
		t.Fatalf("queue %q, want %q", s.queue, want)
	}
	for i := 2; i <= 4; i++ {
		a, b := s.scores["fake:"+strconv.Itoa(i-1)], s.scores["fake:"+strconv.Itoa(i)]
		if b-a != driftWait {
			t.Errorf("deadline of fake:%d is %d ms after fake:%d's, want one wait (%d)", i, b-a, i-1, driftWait)
		}
	}

	// Handoff: the holder releases, the head asks again and gets the lock.
	if r, err := fairRelease(ctx, rdb, k, "holder:0", driftLease); err != nil || r == nil || *r != 1 {
		t.Fatalf("holder release = %v, %v; want 1", ptrString(r), err)
	}
	before := mustSnapshot(t, rdb, k)
	if r, err := fairAcquire(ctx, rdb, k, "fake:1", driftLease, driftWait); err != nil || r != nil {
		t.Fatalf("fake:1 acquire after the release = %v, %v; want nil (acquired)", ptrString(r), err)
	}
	after := mustSnapshot(t, rdb, k)
	if want := []string{"fake:2", "fake:3", "fake:4"}; !slices.Equal(after.queue, want) {
		t.Fatalf("queue after the handoff %q, want %q", after.queue, want)
	}
	if _, ok := after.scores["fake:1"]; ok {
		t.Errorf("fake:1 holds the lock but still has a deadline")
	}
	// The new head: at most the new lease + one wait from the handoff,
	// which lies between the two snapshots' clocks.
	if got, hi := after.scores["fake:2"], after.now+driftLease+driftWait+tol; got > hi || got < before.now+driftLease+driftWait-tol {
		t.Errorf("handoff: the new head's deadline is now%+d ms, want about lease + one wait (%d)", got-after.now, driftLease+driftWait)
	}
	for _, f := range []string{"fake:3", "fake:4"} {
		if d := s.scores[f] - after.scores[f]; d != 0 {
			t.Errorf("handoff: deadline of %s changed by %d ms, want 0 (O(1) handoff)", f, -d)
		}
	}

	// fake:3 gives up from the middle: a tombstone, the others unchanged.
	if ok, err := fairLeave(ctx, rdb, k, "fake:3", driftWait); err != nil || !ok {
		t.Fatalf("fake:3 leave = %v, %v; want true", ok, err)
	}
	left := mustSnapshot(t, rdb, k)
	if want := []string{"fake:2", "fake:3", "fake:4"}; !slices.Equal(left.queue, want) {
		t.Fatalf("queue after fake:3 left %q, want %q (a tombstone in the middle)", left.queue, want)
	}
	if tomb, ok := left.tombs["fake:3"]; !ok || tomb > float64(left.now) {
		t.Errorf("fake:3 left: its deadline is %v (tombstone %v), want a tombstone at or before now (%d)", left.scores["fake:3"], ok, left.now)
	}
	for _, f := range []string{"fake:2", "fake:4"} {
		if d := after.scores[f] - left.scores[f]; d != 0 {
			t.Errorf("fake:3 left: deadline of %s changed by %d ms, want 0", f, -d)
		}
	}
}

// redisNow is the server's clock in ms, as the scripts read it.
func redisNow(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	tm, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return tm.UnixMilli()
}

func ptrString(r *int64) string {
	if r == nil {
		return "nil"
	}
	return strconv.FormatInt(*r, 10)
}

// TestFairAcquire_deadlineDrift runs the drift scenario's steps that need
// no clock jump on every backend, with real time bracketed by Redis TIME.
func TestFairAcquire_deadlineDrift(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := backends.UniqueName(t)
		k := keysOf(name)
		tol := int64(roundingMs)
		if b.Mini() {
			tol = miniClockMs
		}
		checkDrift(t, rdb, k, tol)
		ctx := context.Background()
		for _, f := range []string{"fake:2", "fake:4"} {
			if ok, err := fairLeave(ctx, rdb, k, f, driftWait); err != nil || !ok {
				t.Errorf("%s leave = %v, %v; want true", f, ok, err)
			}
		}
		if r, err := fairRelease(ctx, rdb, k, "fake:1", driftLease); err != nil || r == nil || *r != 1 {
			t.Errorf("fake:1 release = %v, %v; want 1", ptrString(r), err)
		}
		checkClean(t, rdb, name, time.Second)
	})
}

// fakeClock is a miniredis whose clock (TIME, TTLs) only the test moves,
// from t0 (ms since the epoch); now is its current time.
type fakeClock struct {
	mr      *miniredis.Miniredis
	rdb     *redis.Client
	t0, now int64
}

func drivenClock(t *testing.T) *fakeClock {
	t.Helper()
	c := &fakeClock{mr: miniredis.RunT(t), t0: 1_700_000_000_000}
	c.now = c.t0
	c.mr.SetTime(time.UnixMilli(c.t0))
	c.rdb = redis.NewClient(&redis.Options{Addr: c.mr.Addr()})
	t.Cleanup(func() { _ = c.rdb.Close() })
	return c
}

// advance moves the clock by d and expires what d outlives.
func (c *fakeClock) advance(d time.Duration) {
	c.now += d.Milliseconds()
	c.mr.SetTime(time.UnixMilli(c.now))
	c.mr.FastForward(d)
}

// TestFairAcquire_drivenClock runs the drift scenario on a miniredis whose
// clock the test drives (TIME and TTLs), so every value is exact, then
// jumps the clock: a queued waiter that asks again keeps or renews its
// deadline (one wait after the one ahead's, at least one wait past the
// lock's expiry, at most PTTL + (position + 1) × wait from now), and is
// never purged while it keeps asking (Redisson #3004); abandoned waiters are
// purged once their deadline has passed and the next waiter gets the lock.
func TestFairAcquire_drivenClock(t *testing.T) {
	t.Parallel()
	clk := drivenClock(t)
	rdb, advance := clk.rdb, clk.advance
	ctx := context.Background()
	name := backends.UniqueName(t)
	k := keysOf(name)
	T0 := clk.t0

	checkDrift(t, rdb, k, 0)
	s := mustSnapshot(t, rdb, k)
	// fake:2 and fake:4 were queued at T0 with deadlines T0+40s and T0+50s;
	// the handoff cut fake:2, the new head, to the new lease + one wait
	// (T0+35s) and left fake:4's; fake:3 leaving changed neither.
	if got, want := s.scores, map[string]int64{"fake:2": T0 + 35_000, "fake:4": T0 + 50_000}; !mapsEqual(got, want) {
		t.Fatalf("deadlines %v, want %v", got, want)
	}

	// 10s later: fake:4, behind fake:2 and the tombstone, asks again. It is
	// told to wait for the head's deadline; its own becomes PTTL + 2 waits
	// from now (one live deadline, fake:2's, lies below its own; the
	// tombstone's is past and does not count).
	advance(10 * time.Second)
	if r, err := fairAcquire(ctx, rdb, k, "fake:4", driftLease, driftWait); err != nil || r == nil || *r != 25_000 {
		t.Errorf("fake:4 asks again at T0+10s = %v, %v; want 25000", ptrString(r), err)
	}
	if got := mustSnapshot(t, rdb, k).scores["fake:4"]; got != T0+40_000 {
		t.Errorf("fake:4 deadline after asking again = T0%+d, want T0+40000", got-T0)
	}
	// The holder renews its lease (a re-acquire with the same hold count):
	// the lock now expires at T0+40s.
	if r, err := fairAcquire(ctx, rdb, k, "fake:1", driftLease, driftWait); err != nil || r != nil {
		t.Fatalf("fake:1 renew = %v, %v; want nil", ptrString(r), err)
	}
	// A newcomer queues behind fake:4: its first wait is fake:4's deadline
	// from now, its deadline one wait later.
	if r, err := fairAcquire(ctx, rdb, k, "fake:5", driftLease, driftWait); err != nil || r == nil || *r != 30_000 {
		t.Errorf("fake:5 first wait at T0+10s = %v, %v; want 30000", ptrString(r), err)
	}
	if got := mustSnapshot(t, rdb, k).scores["fake:5"]; got != T0+45_000 {
		t.Errorf("fake:5 deadline = T0%+d, want T0+45000", got-T0)
	}

	// T0+36s: fake:2 never asked again and its deadline (T0+35s) passed.
	// The lock (T0+40s) is still held. fake:4 asks: fake:2 is purged and
	// fake:4, the head now, is told to wait the lock's PTTL; its deadline
	// is PTTL + one wait from now. (The tombstone fake:3, the head after
	// fake:2, is popped by the same purge.)
	advance(26 * time.Second)
	if r, err := fairAcquire(ctx, rdb, k, "fake:4", driftLease, driftWait); err != nil || r == nil || *r != 4_000 {
		t.Errorf("fake:4 asks at T0+36s = %v, %v; want 4000 (the lock's PTTL)", ptrString(r), err)
	}
	s = mustSnapshot(t, rdb, k)
	if want := []string{"fake:4", "fake:5"}; !slices.Equal(s.queue, want) {
		t.Fatalf("queue at T0+36s %q, want %q (fake:2 purged)", s.queue, want)
	}
	if got, want := s.scores, map[string]int64{"fake:4": T0 + 45_000, "fake:5": T0 + 45_000}; !mapsEqual(got, want) {
		t.Errorf("deadlines at T0+36s %v, want %v", got, want)
	}

	// The holder releases; the head takes the lock and fake:5, the new
	// head, keeps its deadline (below the new lease + one wait).
	if r, err := fairRelease(ctx, rdb, k, "fake:1", driftLease); err != nil || r == nil || *r != 1 {
		t.Fatalf("fake:1 release = %v, %v; want 1", ptrString(r), err)
	}
	if r, err := fairAcquire(ctx, rdb, k, "fake:4", driftLease, driftWait); err != nil || r != nil {
		t.Fatalf("fake:4 acquire after the release = %v, %v; want nil (acquired)", ptrString(r), err)
	}
	if got := mustSnapshot(t, rdb, k).scores["fake:5"]; got != T0+45_000 {
		t.Errorf("fake:5 deadline after the handoff = T0%+d, want T0+45000", got-T0)
	}

	// fake:4 holds until T0+66s, longer than fake:5's deadline (T0+40s).
	// fake:5 keeps asking: its deadline is renewed each time and it is
	// never purged (the reference purges it: Redisson #3004).
	for _, at := range []time.Duration{3 * time.Second, 10 * time.Second, 10 * time.Second} {
		advance(at)
		r, err := fairAcquire(ctx, rdb, k, "fake:5", driftLease, driftWait)
		if err != nil || r == nil {
			t.Fatalf("fake:5 asks at T0%+dms = %v, %v; want a wait", clk.now-T0, ptrString(r), err)
		}
		pttl := T0 + 66_000 - clk.now
		if *r != pttl {
			t.Errorf("fake:5 at T0%+dms told to wait %d, want the lock's PTTL %d", clk.now-T0, *r, pttl)
		}
		s = mustSnapshot(t, rdb, k)
		if !slices.Equal(s.queue, []string{"fake:5"}) {
			t.Fatalf("queue at T0%+dms %q, want [fake:5]", clk.now-T0, s.queue)
		}
		if got, want := s.scores["fake:5"], T0+66_000+driftWait; got != want {
			t.Errorf("fake:5 deadline at T0%+dms = T0%+d, want T0%+d", clk.now-T0, got-T0, want-T0)
		}
	}

	// fake:5 is abandoned now, and fake:4's lease runs out (T0+66s). Once
	// fake:5's deadline (T0+71s) has passed, a newcomer purges it and takes
	// the free lock at once.
	advance(time.Duration(T0+71_001-clk.now) * time.Millisecond)
	if r, err := fairAcquire(ctx, rdb, k, "fake:6", driftLease, driftWait); err != nil || r != nil {
		t.Fatalf("fake:6 acquire at T0+71.001s = %v, %v; want nil (acquired)", ptrString(r), err)
	}
	s = mustSnapshot(t, rdb, k)
	if len(s.queue) != 0 || len(s.scores) != 0 || len(s.tombs) != 0 {
		t.Errorf("queue %q, deadlines %v after fake:6 took the lock; want both empty", s.queue, s.scores)
	}
	if r, err := fairRelease(ctx, rdb, k, "fake:6", driftLease); err != nil || r == nil || *r != 1 {
		t.Errorf("fake:6 release = %v, %v; want 1", ptrString(r), err)
	}
	advance(time.Second) // the latches expire
	if left := backends.KeysLeft(t, rdb, name, true); len(left) > 0 {
		t.Errorf("keys left behind: %q", left)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
