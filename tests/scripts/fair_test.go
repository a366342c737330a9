package scripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Fair lock scripts: the wrapper contract on every backend

func TestFairScripts(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		l := newLockKeys(backends.UniqueName(t))
		ps := backends.Subscribe(t, rdb, false, l.channel, l.waiterChannel("c2:1"), l.waiterChannel("c3:1"), l.waiterChannel("c4:1"))

		// c1 takes the free lock: nothing queued.
		wantZero(t, "c1 acquires")(fairAcquire(rdb, l, "c1:1", 1))
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		backends.WantPTTL(t, rdb, l.name, leaseMS-2000, leaseMS)
		backends.WantGone(t, rdb, l.queue, l.timeouts)

		// c2 queues: it waits the lock's PTTL, deadline = now + PTTL + wait.
		t0 := serverMS(t, rdb)
		ttl2 := wantOK(t, "c2 queues")(fairAcquire(rdb, l, "c2:1", 1))
		t1 := serverMS(t, rdb)
		if ttl2 <= leaseMS-2000 || ttl2 > leaseMS {
			t.Fatalf("c2 waits %d, want ~the lock's PTTL %d", ttl2, leaseMS)
		}
		wantList(t, rdb, l.queue, "c2:1")
		z := zset(t, rdb, l.timeouts)
		if d := z["c2:1"]; len(z) != 1 || d < t0+ttl2+waitMS-5 || d > t1+ttl2+waitMS+5 {
			t.Fatalf("deadlines = %v, want c2:1 in [%d, %d]", z, t0+ttl2+waitMS, t1+ttl2+waitMS)
		}
		d2 := z["c2:1"]

		// c3 queues behind c2: it waits until c2's deadline, and its own is
		// one wait budget later.
		t0 = serverMS(t, rdb)
		ttl3 := wantOK(t, "c3 queues")(fairAcquire(rdb, l, "c3:1", 1))
		t1 = serverMS(t, rdb)
		if ttl3 < d2-t1-5 || ttl3 > d2-t0+5 {
			t.Fatalf("c3 waits %d, want c2's deadline - now in [%d, %d]", ttl3, d2-t1, d2-t0)
		}
		wantList(t, rdb, l.queue, "c2:1", "c3:1")
		z = zset(t, rdb, l.timeouts)
		if len(z) != 2 || z["c2:1"] != d2 || z["c3:1"] != d2+waitMS {
			t.Fatalf("deadlines = %v, want c2:1=%d c3:1=%d", z, d2, d2+waitMS)
		}

		// c2 asks again: not queued twice, waits the lock's PTTL.
		again := wantOK(t, "c2 asks again")(fairAcquire(rdb, l, "c2:1", 1))
		if again <= 0 || again > leaseMS {
			t.Fatalf("c2 asking again waits %d, want the lock's PTTL", again)
		}
		wantList(t, rdb, l.queue, "c2:1", "c3:1")
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		wantMessages(t, rdb, ps, false, l.channel) // nobody woken yet

		// c1 releases: 1, the lock is gone, only the head (c2) is woken, on
		// its own channel.
		if got := wantInt(t, "c1 releases")(fairRelease(rdb, l, "c1:1", "req-1")); got != 1 {
			t.Fatalf("c1 releases = %d, want 1", got)
		}
		backends.WantGone(t, rdb, l.name)
		wantLatch(t, rdb, l.latch("req-1"), "1")
		wantMessages(t, rdb, ps, false, l.channel, l.waiterChannel("c2:1")+"=0")
		wantList(t, rdb, l.queue, "c2:1", "c3:1")

		// Release of an owner that holds nothing: nil.
		wantNil(t, "c9 releases")(fairRelease(rdb, l, "c9:1", "req-9"))
		backends.WantGone(t, rdb, l.latch("req-9"))
		_ = backends.Messages(t, rdb, ps, false, l.channel) // (the free lock's head may be woken again)

		// c3 cannot jump the queue.
		if got := wantOK(t, "c3 while c2 heads the queue")(fairAcquire(rdb, l, "c3:1", 1)); got < 0 {
			t.Fatalf("c3 waits %d", got)
		}
		backends.WantGone(t, rdb, l.name)
		z = zset(t, rdb, l.timeouts)
		d3 := z["c3:1"]

		// c2, the head, takes it: out of both; the new head c3's deadline
		// is cut to the new lease + one wait budget (no per-waiter move: the
		// handoff is O(1)).
		t0 = serverMS(t, rdb)
		wantZero(t, "c2 acquires")(fairAcquire(rdb, l, "c2:1", 1))
		t1 = serverMS(t, rdb)
		backends.WantHash(t, rdb, l.name, map[string]string{"c2:1": "1"})
		wantList(t, rdb, l.queue, "c3:1")
		z = zset(t, rdb, l.timeouts)
		if lo, hi := min(d3, t0+leaseMS+waitMS), min(d3, t1+leaseMS+waitMS); len(z) != 1 || z["c3:1"] < lo || z["c3:1"] > hi {
			t.Fatalf("deadlines = %v, want c3:1 in [%d, %d]", z, lo, hi)
		}
		// Re-entry of the holder.
		wantZero(t, "c2 re-enters")(fairAcquire(rdb, l, "c2:1", 2))
		backends.WantHash(t, rdb, l.name, map[string]string{"c2:1": "2"})

		// c4 queues behind c3; c3, the head, leaves: out of both, and the
		// new head c4's deadline is cut to one budget past the lock's expiry
		// (now + PTTL, read the script's way just before and just after the
		// call; ±2 ms: their rounding), from the one it had chained on c3's.
		// Redis reads TIME and PTTL at the script's start; miniredis runs
		// the script in this process without that frozen time, so its
		// PTTL, read after TIME, is short by up to the call's duration.
		wantOK(t, "c4 queues")(fairAcquire(rdb, l, "c4:1", 1))
		wantList(t, rdb, l.queue, "c3:1", "c4:1")
		d4 := zset(t, rdb, l.timeouts)["c4:1"]
		e0 := lockExpiry(t, rdb, l.name)
		called := time.Now()
		ok, err := fairLeave(rdb, l, "c3:1")
		if err != nil || !ok {
			t.Fatalf("c3 leaves = %v, %v; want true", ok, err)
		}
		var drift int64
		if b.Mini() {
			drift = time.Since(called).Milliseconds() + 1
		}
		e1 := lockExpiry(t, rdb, l.name)
		wantList(t, rdb, l.queue, "c4:1")
		z = zset(t, rdb, l.timeouts)
		if lo, hi := min(d4, min(e0, e1)+waitMS-2-drift), min(d4, max(e0, e1)+waitMS+2); len(z) != 1 || z["c4:1"] < lo || z["c4:1"] > hi || z["c4:1"] >= d4 {
			t.Fatalf("deadlines = %v, want c4:1 in [%d, %d] (it was %d)", z, lo, hi, d4)
		}
		ok, err = fairLeave(rdb, l, "c3:1")
		if err != nil || ok {
			t.Fatalf("c3 leaves again = %v, %v; want false", ok, err)
		}
		// Each new head of the queue is told it is next, on its own channel:
		// c3 when c2 took the lock, c4 when c3 left.
		wantMessages(t, rdb, ps, false, l.channel, l.waiterChannel("c3:1")+"=0", l.waiterChannel("c4:1")+"=0")

		// Partial release by c2: 0, lease refreshed, nobody woken.
		if got := wantInt(t, "c2 partial release")(fairRelease(rdb, l, "c2:1", "req-2")); got != 0 {
			t.Fatalf("c2 partial release = %d, want 0", got)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c2:1": "1"})
		wantLatch(t, rdb, l.latch("req-2"), "0")
		wantMessages(t, rdb, ps, false, l.channel)

		// Force release: true, lock gone, a message on the lock's
		// channel (as lock_force_release), the head (c4) woken.
		ok, err = fairForce(rdb, l)
		if err != nil || !ok {
			t.Fatalf("force release = %v, %v; want true", ok, err)
		}
		backends.WantGone(t, rdb, l.name)
		wantMessages(t, rdb, ps, false, l.channel, l.channel+"=0", l.waiterChannel("c4:1")+"=0")
		wantList(t, rdb, l.queue, "c4:1")

		// c4 leaves; then force release finds nothing.
		if ok, err := fairLeave(rdb, l, "c4:1"); err != nil || !ok {
			t.Fatalf("c4 leaves = %v, %v; want true", ok, err)
		}
		ok, err = fairForce(rdb, l)
		if err != nil || ok {
			t.Fatalf("force release of nothing = %v, %v; want false", ok, err)
		}
		wantMessages(t, rdb, ps, false, l.channel)
		wantNoKeysLeft(t, rdb, l.name)

		// Bad arguments: errors naming the script, nothing created.
		bad := newLockKeys(backends.UniqueName(t) + "-bad")
		_, err = generated.FairAcquire(context.Background(), rdb, bad.fairKeys(),
			generated.FairAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", WaitMS: 0, Holds: 1, Publish: "publish"})
		wantScriptErr(t, "fair acquire wait 0", err, "fair_acquire", "wait_ms must be a positive integer")
		_, err = generated.FairAcquire(context.Background(), rdb, bad.fairKeys(),
			generated.FairAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", WaitMS: waitMS, Holds: 1, Publish: "x"})
		wantScriptErr(t, "fair acquire bad publish", err, "fair_acquire", "publish must be publish, spublish or both")
		_, err = generated.FairLeave(context.Background(), rdb, generated.FairLeaveKeys(bad.fairKeys()),
			generated.FairLeaveArgs{Field: "c1:1", WaitMS: -1, Publish: "publish"})
		wantScriptErr(t, "fair leave wait -1", err, "fair_leave", "wait_ms must be a positive integer")
		_, err = generated.FairRelease(context.Background(), rdb, bad.fairReleaseKeys("r"),
			generated.FairReleaseArgs{LeaseMS: leaseMS, Field: "c1:1", LatchMS: latchMS, WaitMS: waitMS, Publish: ""})
		wantScriptErr(t, "fair release bad publish", err, "fair_release", "publish must be publish, spublish or both")
		_, err = generated.FairForceRelease(context.Background(), rdb, bad.fairForceKeys(),
			generated.FairForceReleaseArgs{LatchMS: latchMS, WaitMS: waitMS, Publish: "PUBLISH"})
		wantScriptErr(t, "fair force release bad publish", err, "fair_force_release", "publish must be publish, spublish or both")
		wantNoKeysLeft(t, rdb, bad.name)
		backends.WantGone(t, rdb, bad.latch("r"))
	})
}
