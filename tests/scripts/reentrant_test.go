package scripts_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Reentrant lock scripts

func TestLockAcquire(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		l := newLockKeys(backends.UniqueName(t))

		// Bad arguments: an error naming the script, and no key created.
		for _, c := range []struct {
			what         string
			lease, holds int64
			field, want  string
		}{
			{"lease 0", 0, 1, "c1:1", "lease_ms must be a positive integer"},
			{"negative lease", -5, 1, "c1:1", "lease_ms must be a positive integer"},
			{"holds 0", leaseMS, 0, "c1:1", "holds must be a positive integer"},
			{"negative holds", leaseMS, -1, "c1:1", "holds must be a positive integer"},
			{"empty field", leaseMS, 1, "", "field must not be empty"},
		} {
			_, err := acquire(rdb, l, c.field, c.holds, c.lease)
			wantScriptErr(t, c.what, err, "lock_acquire", c.want)
			if redis.HasErrorPrefix(err, "LOST") {
				t.Fatalf("%s: %v is a LOST error", c.what, err)
			}
			backends.WantGone(t, rdb, l.name)
		}

		// First acquisition.
		wantZero(t, "first acquire")(acquire(rdb, l, "c1:1", 1, leaseMS))
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		backends.WantPTTL(t, rdb, l.name, leaseMS-2000, leaseMS)

		// The same call again (its reply was lost): count unchanged, lease set.
		wantZero(t, "replayed acquire")(acquire(rdb, l, "c1:1", 1, shortMS))
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		backends.WantPTTL(t, rdb, l.name, 0, shortMS)

		// Re-entry, and its replay.
		wantZero(t, "re-entry")(acquire(rdb, l, "c1:1", 2, leaseMS))
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
		backends.WantPTTL(t, rdb, l.name, leaseMS-2000, leaseMS)
		wantZero(t, "replayed re-entry")(acquire(rdb, l, "c1:1", 2, leaseMS))
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		// Another owner: the lock's PTTL (at least 1), nothing changed.
		before := backends.PTTL(t, rdb, l.name)
		pttl := wantOK(t, "other owner")(acquire(rdb, l, "c2:7", 1, shortMS))
		if pttl < 1 || pttl > before {
			t.Fatalf("other owner got %d, want the PTTL in [1, %d]", pttl, before)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
		backends.WantPTTL(t, rdb, l.name, shortMS, before) // not set to the caller's lease

		// A count that skips one: an error, not LOST, nothing changed.
		_, err := acquire(rdb, l, "c1:1", 4, leaseMS)
		wantScriptErr(t, "holds 4 on count 2", err, "lock_acquire", "hold count of c1:1 is 2, caller expected 3")
		if redis.HasErrorPrefix(err, "LOST") {
			t.Fatalf("holds 4 on count 2: %v is a LOST error", err)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		// Re-entry of an owner whose holds are gone: LOST, nothing changed.
		_, err = acquire(rdb, l, "c2:7", 2, leaseMS)
		se := wantScriptErr(t, "re-entry without holds", err, "lock_acquire", "LOST")
		if !redis.HasErrorPrefix(err, "LOST") || !redis.HasErrorPrefix(se.Err, "LOST") || !redis.HasErrorPrefix(errors.Unwrap(err), "LOST") {
			t.Fatalf("re-entry without holds: %v does not start with LOST", err)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		// ... also when the whole lock is gone (expired): no key created.
		if err := rdb.Del(context.Background(), l.name).Err(); err != nil {
			t.Fatal(err)
		}
		_, err = acquire(rdb, l, "c1:1", 3, leaseMS)
		wantScriptErr(t, "re-entry on a deleted lock", err, "lock_acquire", "LOST lualock: the earlier holds of c1:1 are gone")
		if !redis.HasErrorPrefix(err, "LOST") {
			t.Fatalf("re-entry on a deleted lock: %v does not start with LOST", err)
		}
		backends.WantGone(t, rdb, l.name)

		// A lock without expiry (set by hand): PTTL -1, as the header says.
		if err := rdb.HSet(context.Background(), l.name, "c9:9", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if got := wantOK(t, "lock without expiry")(acquire(rdb, l, "c1:1", 1, leaseMS)); got != -1 {
			t.Fatalf("lock without expiry: got %d, want -1", got)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c9:9": "1"})
		backends.WantPTTL(t, rdb, l.name, -2, -1)
		if err := rdb.Del(context.Background(), l.name).Err(); err != nil {
			t.Fatal(err)
		}
		wantNoKeysLeft(t, rdb, l.name)
	})
}

// TestLockRelease_holdsPastLatch: a release resent names the same hold
// count as the first; the script sees the count one lower already and
// replays "holds remain" instead of releasing a second hold, with no latch
// (a release with a count that leaves holds writes none). Without a count
// (0) it releases, as before. The last hold's release is latched and its
// resend replays "released" until the latch goes. Both the reentrant and
// the fair release.
func TestLockRelease_holdsPastLatch(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		for _, fair := range []bool{false, true} {
			l := newLockKeys(backends.UniqueName(t) + map[bool]string{false: "-reentrant", true: "-fair"}[fair])
			release := func(req string, holds int64) (*int64, error) {
				if fair {
					return generated.FairRelease(ctx, rdb, l.fairReleaseKeys(req),
						generated.FairReleaseArgs{LeaseMS: leaseMS, Field: "c1:1", LatchMS: latchMS, WaitMS: waitMS, Publish: "publish", Holds: holds})
				}
				return generated.LockRelease(ctx, rdb, l.releaseKeys(req),
					generated.LockReleaseArgs{LeaseMS: leaseMS, Field: "c1:1", LatchMS: latchMS, Publish: "publish", Holds: holds})
			}
			for holds := int64(1); holds <= 3; holds++ {
				if fair {
					wantZero(t, "acquire")(fairAcquire(rdb, l, "c1:1", holds))
				} else {
					wantZero(t, "acquire")(acquire(rdb, l, "c1:1", holds, leaseMS))
				}
			}
			if got := wantInt(t, "release 3 -> 2")(release("req-1", 3)); got != 0 {
				t.Fatalf("fair=%v: release = %d, want 0", fair, got)
			}
			// With a count, a release that leaves holds writes no latch:
			// the count replays it.
			backends.WantGone(t, rdb, l.latch("req-1"))
			if got := wantInt(t, "the same release past its latch")(release("req-1", 3)); got != 0 {
				t.Fatalf("fair=%v: resent release = %d, want 0 (replayed)", fair, got)
			}
			backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
			// A count of 0 (unknown) releases without the check.
			if got := wantInt(t, "release without a count")(release("req-2", 0)); got != 0 {
				t.Fatalf("fair=%v: release = %d, want 0", fair, got)
			}
			backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
			if got := wantInt(t, "last release")(release("req-3", 1)); got != 1 {
				t.Fatalf("fair=%v: last release = %d, want 1", fair, got)
			}
			backends.WantGone(t, rdb, l.name)
			// The last hold's release is latched: its resend replays
			// "released", also once another owner holds the lock.
			wantLatch(t, rdb, l.latch("req-3"), "1")
			if fair {
				wantZero(t, "another owner")(fairAcquire(rdb, l, "c2:1", 1))
			} else {
				wantZero(t, "another owner")(acquire(rdb, l, "c2:1", 1, leaseMS))
			}
			if got := wantInt(t, "last release resent")(release("req-3", 1)); got != 1 {
				t.Fatalf("fair=%v: resent last release = %d, want 1 (replayed)", fair, got)
			}
			// Past its latch the resend finds nothing: nil, nothing changed.
			if err := rdb.Del(ctx, l.latch("req-3")).Err(); err != nil {
				t.Fatal(err)
			}
			wantNil(t, "last release resent past its latch")(release("req-3", 1))
			backends.WantHash(t, rdb, l.name, map[string]string{"c2:1": "1"})
			if err := rdb.Del(ctx, l.name).Err(); err != nil {
				t.Fatal(err)
			}
			// A negative count is refused.
			_, err := release("req-4", -1)
			wantScriptErr(t, "negative holds", err, map[bool]string{false: "lock_release", true: "fair_release"}[fair], "holds must be a whole number")
		}
	})
}

func TestLockRelease(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		l := newLockKeys(backends.UniqueName(t))
		ps := backends.Subscribe(t, rdb, false, l.channel)

		wantZero(t, "acquire")(acquire(rdb, l, "c1:1", 1, shortMS))
		wantZero(t, "re-enter")(acquire(rdb, l, "c1:1", 2, shortMS))

		// Not held by the caller: nil, no latch, nothing changed.
		wantNil(t, "release by another owner")(release(rdb, l, "c2:1", "req-other", leaseMS, "publish"))
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
		backends.WantPTTL(t, rdb, l.name, 0, shortMS)
		backends.WantGone(t, rdb, l.latch("req-other"))

		// No lock at all: nil, and no key of any kind appears.
		free := newLockKeys(backends.UniqueName(t) + "-free")
		wantNil(t, "release of a free lock")(release(rdb, free, "c1:1", "req-free", leaseMS, "publish"))
		wantNoKeysLeft(t, rdb, free.name)
		backends.WantGone(t, rdb, free.latch("req-free"))

		// Bad arguments: an error, nothing changed, nothing published.
		for _, c := range []struct {
			what, publish string
			lease         int64
			latch         int64
			want          string
		}{
			{"bad publish", "notify", leaseMS, latchMS, "publish must be publish, spublish or both"},
			{"upper-case publish", "PUBLISH", leaseMS, latchMS, "publish must be publish, spublish or both"},
			{"lease 0", "publish", 0, latchMS, "lease_ms must be a positive integer"},
			{"latch 0", "publish", leaseMS, 0, "latch_ms must be a positive integer"},
		} {
			_, err := generated.LockRelease(context.Background(), rdb, l.releaseKeys("req-bad"),
				generated.LockReleaseArgs{LeaseMS: c.lease, Field: "c1:1", LatchMS: c.latch, Publish: c.publish})
			wantScriptErr(t, c.what, err, "lock_release", c.want)
			backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
			backends.WantPTTL(t, rdb, l.name, 0, shortMS)
			backends.WantGone(t, rdb, l.latch("req-bad"))
		}

		// Partial release: 0, count down by one, lease refreshed, latch 0.
		if got := wantInt(t, "partial release")(release(rdb, l, "c1:1", "req-1", leaseMS, "publish")); got != 0 {
			t.Fatalf("partial release = %d, want 0", got)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		backends.WantPTTL(t, rdb, l.name, leaseMS-2000, leaseMS)
		wantLatch(t, rdb, l.latch("req-1"), "0")

		// The same request again: the same answer, counted once.
		if got := wantInt(t, "replayed partial release")(release(rdb, l, "c1:1", "req-1", leaseMS, "publish")); got != 0 {
			t.Fatalf("replayed partial release = %d, want 0", got)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		wantMessages(t, rdb, ps, false, l.channel) // nothing published so far

		// Full release: 1, lock deleted, "0" published once, latch 1.
		if got := wantInt(t, "full release")(release(rdb, l, "c1:1", "req-2", leaseMS, "publish")); got != 1 {
			t.Fatalf("full release = %d, want 1", got)
		}
		backends.WantGone(t, rdb, l.name)
		wantLatch(t, rdb, l.latch("req-2"), "1")
		// Replayed: 1 again, no second message, nothing recreated.
		if got := wantInt(t, "replayed full release")(release(rdb, l, "c1:1", "req-2", leaseMS, "publish")); got != 1 {
			t.Fatalf("replayed full release = %d, want 1", got)
		}
		backends.WantGone(t, rdb, l.name)
		wantMessages(t, rdb, ps, false, l.channel, l.channel+"=0")
		// A new request of the owner that no longer holds it: nil.
		wantNil(t, "release after the last hold")(release(rdb, l, "c1:1", "req-3", leaseMS, "publish"))
		backends.WantGone(t, rdb, l.latch("req-3"))
		wantNoKeysLeft(t, rdb, l.name)

		// SPUBLISH (Redis 7 sharded pub/sub; miniredis has none).
		if b.Name == "miniredis" {
			return
		}
		sl := newLockKeys(backends.UniqueName(t) + "-sharded")
		sps := backends.Subscribe(t, rdb, true, sl.channel)
		wantZero(t, "acquire")(acquire(rdb, sl, "c1:1", 1, leaseMS))
		if got := wantInt(t, "full release with spublish")(release(rdb, sl, "c1:1", "req-s", leaseMS, "spublish")); got != 1 {
			t.Fatalf("full release with spublish = %d, want 1", got)
		}
		wantMessages(t, rdb, sps, true, sl.channel, sl.channel+"=0")
		wantMessages(t, rdb, ps, false, l.channel) // not on classic pub/sub
		wantNoKeysLeft(t, rdb, sl.name)
	})
}

func TestLockRenew(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		// One call's keys must share a slot: one hash tag for the group.
		group := "{" + backends.UniqueName(t) + "}"
		la, lb, lc := newLockKeys(group+"a"), newLockKeys(group+"b"), newLockKeys(group+"c")
		wantZero(t, "acquire a")(acquire(rdb, la, "c1:1", 1, shortMS))
		wantZero(t, "acquire b")(acquire(rdb, lb, "c2:1", 1, shortMS))
		locks := []string{la.name, lb.name, lc.name}

		renew := func(lease int64, locks []string, fields ...string) ([]int64, error) {
			return generated.LockRenew(ctx, rdb, generated.LockRenewKeys{Locks: locks},
				generated.LockRenewArgs{LeaseMS: lease, Fields: fields})
		}

		// Bad calls: an error, no lease touched.
		_, err := renew(waitMS, locks[:2], "c1:1")
		wantScriptErr(t, "fewer fields than locks", err, "lock_renew", "one field per lock is required")
		_, err = renew(waitMS, locks[:2], "c1:1", "c2:1", "c3:1")
		wantScriptErr(t, "more fields than locks", err, "lock_renew", "one field per lock is required")
		_, err = renew(0, locks, "c1:1", "c2:1", "c3:1")
		wantScriptErr(t, "lease 0", err, "lock_renew", "lease_ms must be a positive integer")
		backends.WantPTTL(t, rdb, la.name, 0, shortMS)
		backends.WantPTTL(t, rdb, lb.name, 0, shortMS)

		// Only a lock that still has the owner's field is renewed.
		got, err := renew(waitMS, locks, "c1:1", "c1:1", "c1:1")
		if err != nil || !slices.Equal(got, []int64{1, 0, 0}) {
			t.Fatalf("renew = %v, %v; want [1 0 0]", got, err)
		}
		backends.WantPTTL(t, rdb, la.name, waitMS-2000, waitMS)
		backends.WantPTTL(t, rdb, lb.name, 0, shortMS)
		backends.WantGone(t, rdb, lc.name) // not created
		backends.WantHash(t, rdb, la.name, map[string]string{"c1:1": "1"})
		backends.WantHash(t, rdb, lb.name, map[string]string{"c2:1": "1"})

		got, err = renew(leaseMS, locks, "c1:1", "c2:1", "c3:1")
		if err != nil || !slices.Equal(got, []int64{1, 1, 0}) {
			t.Fatalf("renew = %v, %v; want [1 1 0]", got, err)
		}
		backends.WantPTTL(t, rdb, la.name, leaseMS-2000, leaseMS) // reset, here downwards
		backends.WantPTTL(t, rdb, lb.name, leaseMS-2000, leaseMS)

		// No locks: an empty answer.
		got, err = renew(leaseMS, nil)
		if err != nil || len(got) != 0 {
			t.Fatalf("renew of nothing = %v, %v; want []", got, err)
		}

		if err := rdb.Del(ctx, la.name).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, lb.name).Err(); err != nil {
			t.Fatal(err)
		}

		// On the cluster, locks of different slots in one call are refused.
		if b.Cluster {
			x, y := newLockKeys("{a}"+backends.UniqueName(t)), newLockKeys("{b}"+backends.UniqueName(t))
			_, err := renew(leaseMS, []string{x.name, y.name}, "c1:1", "c1:1")
			if !redis.HasErrorPrefix(err, "CROSSSLOT") {
				t.Fatalf("renew across slots: %v, want CROSSSLOT", err)
			}
			wantScriptErr(t, "renew across slots", err, "lock_renew", "CROSSSLOT")
		}
	})
}

func TestLockForceRelease(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLockKeys(backends.UniqueName(t))
		ps := backends.Subscribe(t, rdb, false, l.channel)
		wantZero(t, "acquire")(acquire(rdb, l, "c1:1", 1, leaseMS))
		wantZero(t, "re-enter")(acquire(rdb, l, "c1:1", 2, leaseMS))

		_, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "notify"})
		wantScriptErr(t, "bad publish", err, "lock_force_release", "publish must be publish, spublish or both")
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		ok, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"})
		if err != nil || !ok {
			t.Fatalf("force release = %v, %v; want true", ok, err)
		}
		backends.WantGone(t, rdb, l.name)
		ok, err = generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"})
		if err != nil || ok {
			t.Fatalf("force release of nothing = %v, %v; want false", ok, err)
		}
		wantMessages(t, rdb, ps, false, l.channel, l.channel+"=0")

		// A resent force release (its reply was lost) replays its outcome:
		// it does not delete the lock of the owner that came next.
		keys := l.forceKeys()
		if ok, err := generated.LockForceRelease(ctx, rdb, keys, generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"}); err != nil || ok {
			t.Fatalf("force release of nothing = %v, %v; want false", ok, err)
		}
		wantZero(t, "c2 acquires")(acquire(rdb, l, "c2:1", 1, leaseMS))
		first := l.forceKeys()
		if ok, err := generated.LockForceRelease(ctx, rdb, first, generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"}); err != nil || !ok {
			t.Fatalf("force release = %v, %v; want true", ok, err)
		}
		wantZero(t, "c3 acquires")(acquire(rdb, l, "c3:1", 1, leaseMS))
		if ok, err := generated.LockForceRelease(ctx, rdb, first, generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"}); err != nil || !ok {
			t.Fatalf("resent force release = %v, %v; want the first outcome, true", ok, err)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c3:1": "1"})
		_ = backends.Messages(t, rdb, ps, false, l.channel)
		if ok, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"}); err != nil || !ok {
			t.Fatalf("final force release = %v, %v; want true", ok, err)
		}
		wantNoKeysLeft(t, rdb, l.name)
	})
}

func TestLockStatus(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLockKeys(backends.UniqueName(t))
		rec := &backends.Recorder{Scripter: rdb}
		status := func(field string) []int64 {
			t.Helper()
			got, err := generated.LockStatus(ctx, rec, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: field})
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			if len(got) != 3 {
				t.Fatalf("status = %v, want 3 numbers", got)
			}
			return got
		}
		if got := status("c1:1"); !slices.Equal(got, []int64{0, 0, -2}) {
			t.Fatalf("status of no lock = %v, want [0 0 -2]", got)
		}
		backends.WantGone(t, rdb, l.name)

		wantZero(t, "acquire")(acquire(rdb, l, "c1:1", 1, leaseMS))
		wantZero(t, "re-enter")(acquire(rdb, l, "c1:1", 2, leaseMS))
		got := status("c1:1")
		if got[0] != 1 || got[1] != 2 || got[2] <= leaseMS-2000 || got[2] > leaseMS {
			t.Fatalf("status of the holder = %v, want [1 2 ~%d]", got, leaseMS)
		}
		got = status("c2:1")
		if got[0] != 1 || got[1] != 0 || got[2] <= 0 || got[2] > leaseMS {
			t.Fatalf("status of another owner = %v, want [1 0 ~%d]", got, leaseMS)
		}
		if err := rdb.Persist(ctx, l.name).Err(); err != nil {
			t.Fatal(err)
		}
		if got := status("c1:1"); !slices.Equal(got, []int64{1, 2, -1}) {
			t.Fatalf("status of a lock without expiry = %v, want [1 2 -1]", got)
		}
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "2"}) // read only

		// It runs as EVALSHA_RO, never EVALSHA or EVAL (the script was
		// loaded by a call before this test, or by lock_acquire's NOSCRIPT
		// recovery; SCRIPT LOAD shows up when it had to be loaded).
		if rec.Count("evalsha_ro") < 4 || rec.Count("evalsha") != 0 || rec.Count("eval") != 0 || rec.Count("eval_ro") != 0 {
			t.Fatalf("script commands sent = %v, want EVALSHA_RO only", rec.Calls())
		}
		if err := rdb.Del(ctx, l.name).Err(); err != nil {
			t.Fatal(err)
		}
	})
}
