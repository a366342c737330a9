package scripts_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Cluster key layout

// callAll runs every script once with lock name's real key layout,
// leaving no keys but a latch. It reports the first error.
func callAll(rdb redis.Scripter, name string) error {
	ctx := context.Background()
	l := newLockKeys(name)
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if _, err := acquire(rdb, l, "c1:1", 1, leaseMS); err != nil {
		return step("lock_acquire", err)
	}
	if _, err := generated.LockStatus(ctx, rdb, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"}); err != nil {
		return step("lock_status", err)
	}
	if _, err := generated.LockRenew(ctx, rdb, generated.LockRenewKeys{Locks: []string{l.name}}, generated.LockRenewArgs{LeaseMS: leaseMS, Fields: []string{"c1:1"}}); err != nil {
		return step("lock_renew", err)
	}
	if _, err := release(rdb, l, "c1:1", "req-1", leaseMS, "publish"); err != nil {
		return step("lock_release", err)
	}
	if _, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"}); err != nil {
		return step("lock_force_release", err)
	}
	if _, err := fairAcquire(rdb, l, "c1:1", 1); err != nil {
		return step("fair_acquire", err)
	}
	if _, err := fairAcquire(rdb, l, "c2:1", 1); err != nil {
		return step("fair_acquire (queue)", err)
	}
	if _, err := fairLeave(rdb, l, "c2:1"); err != nil {
		return step("fair_leave", err)
	}
	if _, err := fairRelease(rdb, l, "c1:1", "req-2"); err != nil {
		return step("fair_release", err)
	}
	if _, err := fairForce(rdb, l); err != nil {
		return step("fair_force_release", err)
	}
	return nil
}

func TestClusterNoCrossSlot(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		base := backends.UniqueName(t)
		names := []string{
			base, base + ":x", base + " with space", base + "-ü",
			"{" + base + "}", "{" + base + "}-x", "a{" + base + "}b", "user:{" + base + "}:lock",
			base + ":{t}", "{t}" + base, "}{" + base + "}", "{" + base + "}{x}", "{" + base + "}}",
		}
		for i := range 24 {
			names = append(names, fmt.Sprintf("%s-%d", base, i), fmt.Sprintf("{%s-%d}lock", base, i))
		}
		slots := map[int64]bool{}
		for _, name := range names {
			if err := callAll(rdb, name); err != nil {
				if redis.HasErrorPrefix(err, "CROSSSLOT") {
					t.Errorf("name %q: CROSSSLOT: %v", name, err)
				} else {
					t.Errorf("name %q: %v", name, err)
				}
				continue
			}
			if left := backends.KeysLeft(t, rdb, name, false); len(left) > 0 {
				t.Errorf("name %q: keys left: %q", name, left)
			}
			if b.Cluster {
				s, err := rdb.ClusterKeySlot(context.Background(), name).Result()
				if err != nil {
					t.Fatal(err)
				}
				slots[s] = true
			}
		}
		if b.Cluster && len(slots) < 10 {
			t.Errorf("the names hit only %d slots; want a spread", len(slots))
		}
	})
}

// A name with a "{" but no non-empty hash tag ("a{b", "a{}b") is hashed
// whole, while tag() does not wrap it in braces: the lock and its other keys
// land in different slots, and every multi-key script fails with CROSSSLOT
// on a cluster. Redisson names keys the same way, so the layout cannot
// change; such names have to be refused before they reach Redis. This test
// documents the behaviour of the scripts for them.
func TestClusterBraceWithoutTag(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		if !b.Cluster {
			t.Skip("cluster only")
		}
		ctx := context.Background()
		base := backends.UniqueName(t)
		for _, name := range []string{base + "{x", base + "{}y", "{}" + base, base + "}{"} {
			l := newLockKeys(name)
			s1, err1 := rdb.ClusterKeySlot(ctx, l.name).Result()
			s2, err2 := rdb.ClusterKeySlot(ctx, l.channel).Result()
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if s1 == s2 {
				t.Logf("name %q: lock and channel share slot %d by chance", name, s1)
				continue
			}
			// Single-key scripts work.
			wantZero(t, "acquire "+name)(acquire(rdb, l, "c1:1", 1, leaseMS))
			// Multi-key ones cannot.
			_, err := release(rdb, l, "c1:1", "req-1", leaseMS, "publish")
			if !redis.HasErrorPrefix(err, "CROSSSLOT") {
				t.Errorf("name %q: release = %v, want CROSSSLOT (lock slot %d, channel slot %d)", name, err, s1, s2)
			}
			if err := rdb.Del(ctx, l.name).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
