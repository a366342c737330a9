package family

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

// TestRwlockScripts: the read-write lock's scripts (lua/rwlock_*.lua),
// each scenario on a plain and a hash-tagged name.
func TestRwlockScripts(t *testing.T) {
	backends.Table(t, []backends.Scenario{
		{Name: "readBadInput", Run: bothNames(rwReadBadInput)},
		{Name: "readLayout", Run: bothNames(rwReadLayout)},
		{Name: "deadReader", Run: bothNames(rwDeadReader)},
		{Name: "writeLayout", Run: bothNames(rwWriteLayout)},
		{Name: "readOfWriterReleased", Run: bothNames(rwReadOfWriterReleased)},
		{Name: "otherKind", Run: bothNames(rwOtherKind)},
		{Name: "forceRelease", Run: bothNames(rwForceRelease)},
		{Name: "readRenew", Run: bothNames(rwReadRenew)},
		{Name: "status", Run: bothNames(rwStatusScript)},
		{Name: "overlap", Run: bothNames(rwOverlap)},
	})
}

const (
	r1 = "c1:1" // owner fields C:H
	r2 = "c2:7"
	w3 = "c3:3"
)

// rwReadBadInput: an error naming the script, and no key created.
func rwReadBadInput(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	for _, c := range []struct {
		what         string
		field        string
		holds, lease int64
		want         string
	}{
		{"lease 0", r1, 1, 0, "lease_ms must be a positive integer"},
		{"negative lease", r1, 1, -3, "lease_ms must be a positive integer"},
		{"holds 0", r1, 0, lease, "holds must be a positive integer"},
		{"empty field", "", 1, lease, "field must not be empty"},
	} {
		_, err := readAcquire(rdb, n, c.field, c.holds, c.lease)
		scriptErr(t, c.what, err, "rwlock_read_acquire", c.want)
		_, err = writeAcquire(rdb, n, c.field, c.holds, c.lease)
		scriptErr(t, c.what, err, "rwlock_write_acquire", c.want)
		backends.WantGone(t, rdb, n.name, n.timeoutKey(c.field, 1))
	}
	// Releases: bad latch_ms, publish, holds; nothing changed.
	acquired(t, "read")(readAcquire(rdb, n, r1, 1, lease))
	for _, c := range []struct {
		what, publish string
		before        int64
		want          string
	}{
		{"bad publish", "PUBLISH", 1, "publish must be publish, spublish or both"},
		{"none", "none", 1, "publish must be publish, spublish or both"},
		{"negative holds", pub(b), -1, "holds must be a whole number"},
	} {
		_, err := readRelease(rdb, n, n.latch(), r1, c.before, c.publish)
		scriptErr(t, c.what, err, "rwlock_read_release", c.want)
		_, err = writeRelease(rdb, n, n.latch(), r1, c.before, lease, c.publish)
		scriptErr(t, c.what, err, "rwlock_write_release", c.want)
	}
	_, err := writeRelease(rdb, n, n.latch(), r1, 1, 0, pub(b))
	scriptErr(t, "lease 0", err, "rwlock_write_release", "lease_ms must be a positive integer")
	_, err = forceRelease(rdb, n, n.latch(), "both", pub(b))
	scriptErr(t, "bad mode", err, "rwlock_force_release", "mode must be read or write")
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1"})
	wantTimeout(t, rdb, n.timeoutKey(r1, 1), lease-2000, lease)
	del(t, rdb, n.name, n.timeoutKey(r1, 1))
}

// rwReadLayout: readers' holds, each with its own timeout key, re-entry, a
// resent acquisition and release, the lock's TTL following its longest live
// hold, and the release message when the last reader leaves.
func rwReadLayout(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	ch := listen(t, b, rdb, n.rwlock)

	v, err := readAcquire(rdb, n, r1, 1, lease)
	acquired(t, "first read")(v, err)
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1"})
	wantTimeout(t, rdb, n.timeoutKey(r1, 1), lease-2000, lease)
	backends.WantPTTL(t, rdb, n.name, lease-2000, lease)

	// The same call again (its reply was lost): no second hold; the
	// hold's timeout is set again, the lock's TTL is never cut.
	v, err = readAcquire(rdb, n, r1, 1, short)
	acquired(t, "resent first read")(v, err)
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1"})
	wantTimeout(t, rdb, n.timeoutKey(r1, 1), 0, short)
	backends.WantGone(t, rdb, n.timeoutKey(r1, 2))
	backends.WantPTTL(t, rdb, n.name, lease-2000, lease)

	// Re-entry: hold 2 with its own timeout.
	v, err = readAcquire(rdb, n, r1, 2, 5000)
	acquired(t, "re-entry")(v, err)
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "2"})
	wantTimeout(t, rdb, n.timeoutKey(r1, 2), 3000, 5000)
	backends.WantPTTL(t, rdb, n.name, lease-2000, lease)

	// A second reader with a longer lease extends the lock.
	v, err = readAcquire(rdb, n, r2, 1, long)
	acquired(t, "second reader")(v, err)
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "2", r2: "1"})
	wantTimeout(t, rdb, n.timeoutKey(r2, 1), long-2000, long)
	backends.WantPTTL(t, rdb, n.name, long-2000, long)

	// A writer waits: the lock's PTTL, nothing changed.
	w, err := writeAcquire(rdb, n, w3, 1, lease)
	refused(t, "writer behind readers", long)(w, err)
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "2", r2: "1"})

	// Counts that do not follow: LOST for an owner without holds, an
	// error for a skipped count; nothing changed.
	_, err = readAcquire(rdb, n, "c9:9", 2, lease)
	scriptErr(t, "re-entry without holds", err, "rwlock_read_acquire", "LOST lualock: the earlier read holds of c9:9 are gone")
	if !redis.HasErrorPrefix(err, "LOST") {
		t.Fatalf("re-entry without holds: %v is not a LOST error", err)
	}
	_, err = readAcquire(rdb, n, r1, 4, lease)
	scriptErr(t, "skipped count", err, "rwlock_read_acquire", "read hold count of c1:1 is 2, caller expected 3")
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "2", r2: "1"})
	backends.WantGone(t, rdb, n.timeoutKey("c9:9", 2), n.timeoutKey(r1, 3), n.timeoutKey(r1, 4))

	// Release the newest hold of r1: its timeout key goes, the lock
	// lives as long as the longest live hold (r2's).
	l1 := n.latch()
	released(t, "release r1 hold 2", 0)(readRelease(rdb, n, l1, r1, 2, pub(b)))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1", r2: "1"})
	backends.WantGone(t, rdb, n.timeoutKey(r1, 2))
	wantTimeout(t, rdb, n.timeoutKey(r1, 1), 0, short)
	// A release that names its count and leaves holds writes no latch.
	backends.WantGone(t, rdb, l1)
	backends.WantPTTL(t, rdb, n.name, long-3000, long)
	// Resent, under its request id or another: the hold count replays it.
	released(t, "resent release", 0)(readRelease(rdb, n, l1, r1, 2, pub(b)))
	released(t, "resent past the latch", 0)(readRelease(rdb, n, n.latch(), r1, 2, pub(b)))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1", r2: "1"})
	ch.want()

	// r2 leaves: the lock now lives as long as r1's hold (short).
	released(t, "release r2", 1)(readRelease(rdb, n, n.latch(), r2, 1, pub(b)))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1"})
	backends.WantGone(t, rdb, n.timeoutKey(r2, 1))
	p := backends.WantPTTL(t, rdb, n.name, 0, short)
	if tp := backends.PTTL(t, rdb, n.timeoutKey(r1, 1)); p < tp-200 {
		t.Fatalf("lock PTTL %d, shorter than its live hold's %d", p, tp)
	}
	ch.want()

	// The last reader leaves: the lock goes, "0" is published.
	l2 := n.latch()
	released(t, "release r1", 1)(readRelease(rdb, n, l2, r1, 1, pub(b)))
	backends.WantGone(t, rdb, n.name, n.timeoutKey(r1, 1))
	wantString(t, rdb, l2, "1")
	ch.want("0")
	released(t, "resent last release", 1)(readRelease(rdb, n, l2, r1, 1, pub(b)))
	released(t, "release past the latch", -1)(readRelease(rdb, n, n.latch(), r1, 1, pub(b)))
	released(t, "release of a free lock", -1)(readRelease(rdb, n, n.latch(), r2, 0, pub(b)))
	backends.WantGone(t, rdb, n.name)
	ch.want()
}

// rwDeadReader: a reader whose timeout keys are gone (its lease ran out) no
// longer counts: the last live reader's release deletes the lock and wakes
// the waiters, as Redisson's cleanup does.
func rwDeadReader(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	ch := listen(t, b, rdb, n.rwlock)
	acquired(t, "r1")(readAcquire(rdb, n, r1, 1, lease))
	acquired(t, "r1 again")(readAcquire(rdb, n, r1, 2, lease))
	acquired(t, "r2")(readAcquire(rdb, n, r2, 1, lease))
	del(t, rdb, n.timeoutKey(r1, 1), n.timeoutKey(r1, 2)) // r1's holds expired
	released(t, "release r2", 1)(readRelease(rdb, n, n.latch(), r2, 1, pub(b)))
	backends.WantGone(t, rdb, n.name)
	ch.want("0")
	// A writer gets in.
	acquired(t, "writer")(writeAcquire(rdb, n, w3, 1, lease))
	released(t, "writer release", 1)(writeRelease(rdb, n, n.latch(), w3, 1, lease, pub(b)))
	ch.want("1")

	// The owner's own remaining holds expired: its release of the
	// newest ends the lock and says so (1: nothing left).
	acquired(t, "r1")(readAcquire(rdb, n, r1, 1, lease))
	acquired(t, "r1 again")(readAcquire(rdb, n, r1, 2, lease))
	del(t, rdb, n.timeoutKey(r1, 1))
	released(t, "release r1 hold 2", 1)(readRelease(rdb, n, n.latch(), r1, 2, pub(b)))
	backends.WantGone(t, rdb, n.name, n.timeoutKey(r1, 2))
	ch.want("0")
}

// rwWriteLayout: the write lock, its re-entry, resends, the downgrade (the
// writer takes read holds, then leaves the write lock), the refused upgrade,
// and the messages: "1" when the write lock goes (free or downgraded), "0"
// when the last reader goes.
func rwWriteLayout(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	ch := listen(t, b, rdb, n.rwlock)

	acquired(t, "write")(writeAcquire(rdb, n, r1, 1, lease))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "write", r1 + ":write": "1"})
	backends.WantPTTL(t, rdb, n.name, lease-2000, lease)
	acquired(t, "resent write")(writeAcquire(rdb, n, r1, 1, lease))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "write", r1 + ":write": "1"})

	// Re-entry with a shorter lease: counted once, the TTL not cut.
	acquired(t, "write re-entry")(writeAcquire(rdb, n, r1, 2, short))
	acquired(t, "resent write re-entry")(writeAcquire(rdb, n, r1, 2, short))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "write", r1 + ":write": "2"})
	backends.WantPTTL(t, rdb, n.name, lease-2000, lease)
	_, err := writeAcquire(rdb, n, r2, 2, lease)
	scriptErr(t, "write re-entry without holds", err, "rwlock_write_acquire", "LOST lualock: the earlier write holds of c2:7 are gone")

	// Others wait, readers and writers alike.
	refused(t, "other writer", lease)(writeAcquire(rdb, n, r2, 1, lease))
	refused(t, "other reader", lease)(readAcquire(rdb, n, r2, 1, lease))
	backends.WantGone(t, rdb, n.timeoutKey(r2, 1))

	// The writer takes a read hold (downgrade).
	acquired(t, "writer's read")(readAcquire(rdb, n, r1, 1, long))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "write", r1 + ":write": "2", r1: "1"})
	wantTimeout(t, rdb, n.timeoutKey(r1, 1), long-2000, long)
	backends.WantPTTL(t, rdb, n.name, long-2000, long)

	// One write hold released: still write mode, nothing published.
	l := n.latch()
	released(t, "write release 1 of 2", 0)(writeRelease(rdb, n, l, r1, 2, lease, pub(b)))
	released(t, "resent", 0)(writeRelease(rdb, n, l, r1, 2, lease, pub(b)))
	released(t, "resent past the latch", 0)(writeRelease(rdb, n, n.latch(), r1, 2, lease, pub(b)))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "write", r1 + ":write": "1", r1: "1"})
	// A count that leaves holds: no latch; the lease is not cut.
	backends.WantGone(t, rdb, l)
	backends.WantPTTL(t, rdb, n.name, long-3000, long)
	ch.want()

	// The last write hold: mode read, the read hold stays, "1" wakes
	// the waiting readers.
	l = n.latch()
	released(t, "last write release", 1)(writeRelease(rdb, n, l, r1, 1, lease, pub(b)))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1"})
	wantString(t, rdb, l, "1")
	ch.want("1")
	released(t, "resent last write release", 1)(writeRelease(rdb, n, l, r1, 1, lease, pub(b)))
	released(t, "write release without write holds", -1)(writeRelease(rdb, n, n.latch(), r1, 1, lease, pub(b)))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1"})

	// Now readers enter, writers wait; the reader r1 cannot upgrade.
	acquired(t, "reader after the downgrade")(readAcquire(rdb, n, r2, 1, lease))
	_, err = writeAcquire(rdb, n, r1, 1, lease)
	scriptErr(t, "upgrade", err, "rwlock_write_acquire", "UPGRADE lualock: c1:1 holds read holds")
	if !redis.HasErrorPrefix(err, "UPGRADE") {
		t.Fatalf("upgrade: %v is not an UPGRADE error", err)
	}
	refused(t, "writer behind readers", long)(writeAcquire(rdb, n, w3, 1, lease))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "1", r2: "1"})
	ch.want()

	released(t, "r1 leaves", 1)(readRelease(rdb, n, n.latch(), r1, 1, pub(b)))
	ch.want()
	released(t, "r2 leaves", 1)(readRelease(rdb, n, n.latch(), r2, 1, pub(b)))
	backends.WantGone(t, rdb, n.name, n.timeoutKey(r1, 1), n.timeoutKey(r2, 1))
	ch.want("0")

	// A writer alone: its release deletes the lock and publishes "1".
	acquired(t, "w3")(writeAcquire(rdb, n, w3, 1, lease))
	released(t, "w3 release", 1)(writeRelease(rdb, n, n.latch(), w3, 1, lease, pub(b)))
	backends.WantGone(t, rdb, n.name)
	ch.want("1")
}

// rwReadOfWriterReleased: the writer releases a read hold of its own while
// it still writes: the lock stays in write mode, its TTL is not cut to the
// read holds' (Redisson sets it to theirs), nothing is published.
func rwReadOfWriterReleased(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	ch := listen(t, b, rdb, n.rwlock)
	acquired(t, "write")(writeAcquire(rdb, n, r1, 1, long))
	acquired(t, "read")(readAcquire(rdb, n, r1, 1, short))
	acquired(t, "read 2")(readAcquire(rdb, n, r1, 2, short))
	released(t, "read release", 0)(readRelease(rdb, n, n.latch(), r1, 2, pub(b)))
	released(t, "read release", 1)(readRelease(rdb, n, n.latch(), r1, 1, pub(b)))
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "write", r1 + ":write": "1"})
	backends.WantPTTL(t, rdb, n.name, long-3000, long)
	backends.WantGone(t, rdb, n.timeoutKey(r1, 1), n.timeoutKey(r1, 2))
	ch.want()
	released(t, "write release", 1)(writeRelease(rdb, n, n.latch(), r1, 1, lease, pub(b)))
	backends.WantGone(t, rdb, n.name)
	ch.want("1")
}

// rwOtherKind: a hash without a mode field (a reentrant lock under the same
// name) is waited for and never written; a force release leaves it and
// answers WRONGTYPE.
func rwOtherKind(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	acquired(t, "reentrant lock")(lockAcquire(rdb, n, r1, 1, lease))
	refused(t, "read", lease)(readAcquire(rdb, n, r2, 1, lease))
	refused(t, "write", lease)(writeAcquire(rdb, n, r2, 1, lease))
	released(t, "read release by the same field", -1)(readRelease(rdb, n, n.latch(), r1, 1, pub(b)))
	ok, err := forceRelease(rdb, n, n.latch(), "read", pub(b))
	if ok || !redis.HasErrorPrefix(err, "WRONGTYPE") || !strings.Contains(err.Error(), "is a lock, not a read-write lock") {
		t.Fatalf("force release read of a reentrant lock = %v, %v; want a WRONGTYPE error saying it is a lock", ok, err)
	}
	backends.WantHash(t, rdb, n.name, map[string]string{r1: "1"})
	del(t, rdb, n.name)
}

// rwForceRelease: deletes the lock only in the mode named, with the mode's
// message; a resend replays its outcome.
func rwForceRelease(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	ch := listen(t, b, rdb, n.rwlock)
	acquired(t, "r1")(readAcquire(rdb, n, r1, 1, lease))
	acquired(t, "r2")(readAcquire(rdb, n, r2, 1, lease))
	if ok, err := forceRelease(rdb, n, n.latch(), "write", pub(b)); err != nil || ok {
		t.Fatalf("force write of a read lock = %v, %v; want false", ok, err)
	}
	ch.want()
	l := n.latch()
	if ok, err := forceRelease(rdb, n, l, "read", pub(b)); err != nil || !ok {
		t.Fatalf("force read = %v, %v; want true", ok, err)
	}
	backends.WantGone(t, rdb, n.name)
	wantString(t, rdb, l, "1")
	ch.want("0")

	// The next owner is safe from the resend.
	acquired(t, "w3")(writeAcquire(rdb, n, w3, 1, lease))
	if ok, err := forceRelease(rdb, n, l, "read", pub(b)); err != nil || !ok {
		t.Fatalf("resent force read = %v, %v; want the replayed true", ok, err)
	}
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "write", w3 + ":write": "1"})
	ch.want()
	if ok, err := forceRelease(rdb, n, n.latch(), "write", pub(b)); err != nil || !ok {
		t.Fatalf("force write = %v, %v; want true", ok, err)
	}
	backends.WantGone(t, rdb, n.name)
	ch.want("1")
	if ok, err := forceRelease(rdb, n, n.latch(), "write", pub(b)); err != nil || ok {
		t.Fatalf("force write of no lock = %v, %v; want false", ok, err)
	}
	ch.want()
}

// rwReadRenew: the watchdog's renewal of read holds renews the owner's own
// timeout keys and the lock, never another reader's (Redisson 3.16 renews
// every reader's: #1458), and reports an owner whose holds are gone,
// renewing nothing of it.
func rwReadRenew(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	acquired(t, "r1")(readAcquire(rdb, n, r1, 1, short))
	acquired(t, "r1 again")(readAcquire(rdb, n, r1, 2, short))
	acquired(t, "r2")(readAcquire(rdb, n, r2, 1, short))

	got, err := readRenew(rdb, long, []names{n, n, n}, r1, "c9:9", r1+":write")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 0 || got[2] != 0 {
		t.Fatalf("renew r1, c9:9, r1:write = %v, %v; want [1 0 0]", got, err)
	}
	wantTimeout(t, rdb, n.timeoutKey(r1, 1), long-2000, long)
	wantTimeout(t, rdb, n.timeoutKey(r1, 2), long-2000, long)
	wantTimeout(t, rdb, n.timeoutKey(r2, 1), 0, short) // not renewed
	backends.WantPTTL(t, rdb, n.name, long-2000, long)
	backends.WantHash(t, rdb, n.name, map[string]string{"mode": "read", r1: "2", r2: "1"})

	// r2's hold 1 is gone: lost, and nothing of r2 is renewed.
	del(t, rdb, n.timeoutKey(r2, 1))
	if err := rdb.PExpire(context.Background(), n.name, 5000*1e6).Err(); err != nil {
		t.Fatal(err)
	}
	got, err = readRenew(rdb, long, []names{n}, r2)
	if err != nil || len(got) != 1 || got[0] != 0 {
		t.Fatalf("renew r2 without its timeout key = %v, %v; want [0]", got, err)
	}
	backends.WantPTTL(t, rdb, n.name, 3000, 5000)
	backends.WantGone(t, rdb, n.timeoutKey(r2, 1))

	// Locks of one slot in one call: a second lock sharing the tag.
	if n.prefix == n.name {
		m := newNames("", false)
		m.name = "other-" + n.name
		m.prefix = m.name
		acquired(t, "other lock")(readAcquire(rdb, m, r2, 1, short))
		got, err = readRenew(rdb, lease, []names{n, m}, r1, r2)
		if err != nil || len(got) != 2 || got[0] != 1 || got[1] != 1 {
			t.Fatalf("renew two locks = %v, %v; want [1 1]", got, err)
		}
		wantTimeout(t, rdb, m.timeoutKey(r2, 1), lease-2000, lease)
		backends.WantPTTL(t, rdb, m.name, lease-2000, lease)
		del(t, rdb, m.name, m.timeoutKey(r2, 1))
	}

	// Bad input: errors, nothing renewed.
	for _, c := range []struct {
		what   string
		keys   []string
		fields []string
		lease  int64
		want   string
	}{
		{"lease 0", []string{n.name, n.prefix}, []string{r1}, 0, "lease_ms must be a positive integer"},
		{"odd keys", []string{n.name}, []string{r1}, lease, "a lock and a prefix key per lock"},
		{"fields short", []string{n.name, n.prefix}, nil, lease, "a lock and a prefix key per lock"},
		{"empty field", []string{n.name, n.prefix}, []string{""}, lease, "field must not be empty"},
	} {
		_, err := readRenewRaw(rdb, c.keys, c.lease, c.fields...)
		scriptErr(t, c.what, err, "rwlock_read_renew", c.want)
	}
	wantTimeout(t, rdb, n.timeoutKey(r1, 1), lease-5000, long) // renewed to lease by the two-lock call, if it ran
	del(t, rdb, n.name, n.timeoutKey(r1, 1), n.timeoutKey(r1, 2))
}

// rwStatusScript: mode, the owner's read and write hold counts and the PTTL,
// in one read-only call.
func rwStatusScript(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	check := func(what string, mode, reads, writes int64, lo, hi, hlen int64) {
		t.Helper()
		st, err := rwStatus(rdb, n, r1)
		if err != nil || len(st) != 5 || st[0] != mode || st[1] != reads || st[2] != writes || st[3] <= lo || st[3] > hi || st[4] != hlen {
			t.Fatalf("%s: status = %v, %v; want [%d %d %d (%d, %d] %d]", what, st, err, mode, reads, writes, lo, hi, hlen)
		}
	}
	check("free", 0, 0, 0, -3, -2, 0)
	acquired(t, "w")(writeAcquire(rdb, n, r1, 1, lease))
	acquired(t, "r")(readAcquire(rdb, n, r1, 1, lease))
	check("write and read", 2, 1, 1, lease-2000, lease, 3)
	released(t, "w", 1)(writeRelease(rdb, n, n.latch(), r1, 1, lease, pub(b)))
	acquired(t, "r2")(readAcquire(rdb, n, r2, 1, lease))
	check("read", 1, 1, 0, lease-2000, lease, 3)
	del(t, rdb, n.name, n.timeoutKey(r1, 1), n.timeoutKey(r2, 1))
}
