package family

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

// TestSpinScripts: the spin lock's use of the reentrant scripts.
func TestSpinScripts(t *testing.T) {
	backends.Table(t, []backends.Scenario{{Name: "layout", Run: bothNames(spinLayout)}})
}

// spinLayout: the spin lock is the reentrant lock's hash N (field C:H
// -> hold count, the lease on N), taken with lock_acquire and released with
// lock_release and lock_force_release given publish "none": nothing is
// published on any channel, not even on the last release or a force release,
// as Redisson's RSpinLock.
func spinLayout(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	ch := listen(t, b, rdb, n.channel)
	acquired(t, "spin")(lockAcquire(rdb, n, r1, 1, lease))
	acquired(t, "spin re-entry")(lockAcquire(rdb, n, r1, 2, short))
	backends.WantHash(t, rdb, n.name, map[string]string{r1: "2"})
	backends.WantPTTL(t, rdb, n.name, 0, short)
	refused(t, "other owner", short)(lockAcquire(rdb, n, r2, 1, lease))

	l := n.latch()
	released(t, "release 1 of 2", 0)(lockRelease(rdb, n, l, r1, 2, lease, "none"))
	backends.WantHash(t, rdb, n.name, map[string]string{r1: "1"})
	backends.WantPTTL(t, rdb, n.name, lease-2000, lease)
	backends.WantGone(t, rdb, l) // a count that leaves holds: no latch
	released(t, "resent", 0)(lockRelease(rdb, n, l, r1, 2, lease, "none"))
	backends.WantHash(t, rdb, n.name, map[string]string{r1: "1"})
	l = n.latch()
	released(t, "last release", 1)(lockRelease(rdb, n, l, r1, 1, lease, "none"))
	backends.WantGone(t, rdb, n.name)
	wantString(t, rdb, l, "1")
	ch.want()

	acquired(t, "spin r2")(lockAcquire(rdb, n, r2, 1, lease))
	l = n.latch()
	if ok, err := lockForceRelease(rdb, n, l, "none"); err != nil || !ok {
		t.Fatalf("force release = %v, %v; want true", ok, err)
	}
	backends.WantGone(t, rdb, n.name)
	wantString(t, rdb, l, "1")
	ch.want()

	_, err := lockRelease(rdb, n, n.latch(), r1, 1, lease, "nothing")
	scriptErr(t, "bad publish", err, "lock_release", "publish must be publish, spublish or both (or none: the spin lock)")
	_, err = lockForceRelease(rdb, n, n.latch(), "")
	scriptErr(t, "bad publish", err, "lock_force_release", "publish must be publish, spublish or both (or none: the spin lock)")
}
