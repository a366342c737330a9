package loss_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// lease is the watchdog lease of the suite's clients: the first renewal
// comes a third of it after the acquisition, so a hold that ends within
// waitLoss of a change was ended by the tracker, not by a renewal.
const (
	lease    = 90 * time.Second
	waitLoss = 20 * time.Second
)

// cause is one change that ends a hold in Redis.
type cause struct {
	name   string
	change func(t *testing.T, rdb redis.UniversalClient, other *lualock.Client, k kind, name string, h hold)
}

func causes() []cause {
	ctx := context.Background()
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	return []cause{
		{"del", func(t *testing.T, rdb redis.UniversalClient, _ *lualock.Client, _ kind, _ string, h hold) {
			must(t, rdb.Del(ctx, h.key).Err())
		}},
		{"expiry", func(t *testing.T, rdb redis.UniversalClient, _ *lualock.Client, _ kind, _ string, h hold) {
			if h.id != "" { // a permit's lease is its deadline in the zset
				must(t, rdb.ZAddXX(ctx, h.key, redis.Z{Score: 1, Member: mustHex(t, h.id)}).Err())
				return
			}
			must(t, rdb.PExpire(ctx, h.key, time.Millisecond).Err())
		}},
		{"force", func(t *testing.T, _ redis.UniversalClient, other *lualock.Client, k kind, name string, h hold) {
			must(t, k.force(ctx, other, name, h))
		}},
		{"flushall", func(t *testing.T, rdb redis.UniversalClient, _ *lualock.Client, _ kind, _ string, _ hold) {
			if cl, ok := rdb.(*redis.ClusterClient); ok {
				must(t, cl.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushAll(ctx).Err() }))
				return
			}
			must(t, rdb.FlushAll(ctx).Err())
		}},
		{"overwrite", func(t *testing.T, rdb redis.UniversalClient, _ *lualock.Client, _ kind, _ string, h hold) {
			must(t, rdb.Set(ctx, h.key, "overwritten", 0).Err())
		}},
	}
}

func mustHex(t *testing.T, id string) string {
	t.Helper()
	var b []byte
	if _, err := fmt.Sscanf(id, "%x", &b); err != nil || len(b) != 16 {
		t.Fatalf("permit id %q: %v", id, err)
	}
	return string(b)
}

// realBackends are the backends with client-side caching.
func realBackends(t *testing.T, f func(t *testing.T, b backends.Backend, rdb redis.UniversalClient)) {
	for _, b := range backends.All() {
		if b.Mini() {
			continue // no CLIENT TRACKING: a loss is noticed by the renewal
		}
		t.Run(b.Name, func(t *testing.T) { f(t, b, b.New(t)) })
	}
}

func newClient(t *testing.T, rdb redis.UniversalClient, o lualock.Options) *lualock.Client {
	t.Helper()
	if o.WatchdogLease == 0 {
		o.WatchdogLease = lease
	}
	return backends.NewClient(t, rdb, o)
}

// wantLost waits for the hold's Context to end, well before any renewal
// (lease/3), and checks its cause.
func wantLost(t *testing.T, h hold, what string) {
	t.Helper()
	backends.WaitDone(t, h.ctx, waitLoss, what)
	if cause := context.Cause(h.ctx); !errors.Is(cause, lualock.ErrLockLost) {
		t.Fatalf("%s: cause %v, want ErrLockLost", what, cause)
	}
}

// Every change that ends a hold in Redis ends its Context with
// ErrLockLost within waitLoss, long before a renewal (lease/3 = 30s) or
// the fixed lease (5 min) could: only the tracker explains it. The change
// is made right after the acquisition returns: the moment before the
// tracker's first check is covered too.
func TestLoss_causes(t *testing.T) {
	realBackends(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		c := newClient(t, rdb, lualock.Options{})
		other := newClient(t, rdb, lualock.Options{})
		for _, cs := range causes() {
			t.Run(cs.name, func(t *testing.T) {
				for _, k := range kinds() {
					t.Run(k.name, func(t *testing.T) {
						name := backends.UniqueName(t)
						h := k.take(t, c, name)
						cs.change(t, rdb, other, k, name, h)
						wantLost(t, h, cs.name)
						err := h.release(context.Background())
						if cs.name == "overwrite" {
							return // the release may fail on the key's type (WRONGTYPE)
						}
						if !errors.Is(err, lualock.ErrLockLost) && !errors.Is(err, lualock.ErrNotHeld) {
							t.Errorf("release after the loss: %v, want ErrLockLost or ErrNotHeld", err)
						}
					})
				}
			})
		}
	})
}

// A change that leaves the hold ends nothing: the watchdog's renewals, a
// re-entry and its release, another reader's hold. A second hold on the
// same slot, deleted afterwards, is the barrier: the tracker answers one
// connection's invalidations in order, so when its loss is reported the
// changes before it have been checked.
func TestLoss_noFalseLoss(t *testing.T) {
	realBackends(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		// A lease short enough for several renewals in the test's time, long
		// enough that a loaded machine (the tracker's checks and the
		// renewals share it) does not let one lapse: a lapse would end the
		// hold by the watchdog, which is not what this test judges.
		c := newClient(t, rdb, lualock.Options{WatchdogLease: 3 * time.Second})
		other := newClient(t, rdb, lualock.Options{})
		for _, k := range kinds() {
			t.Run(k.name, func(t *testing.T) {
				tag := "{" + backends.UniqueName(t) + "}"
				h := k.take(t, c, tag+"held")
				if k.name == "read" {
					r := other.NewReadWriteLock(tag + "held").ReadLock()
					if err := r.Lock(ctx); err != nil {
						t.Fatal(err)
					}
					defer r.Unlock(ctx)
				}
				for range 3 {
					if err := h.reenter(ctx); err != nil {
						t.Fatal(err)
					}
				}
				// Renewals: every 1s; wait for two to have run.
				time.Sleep(2100 * time.Millisecond)
				bar := lockKind("barrier", (*lualock.Client).NewLock, 0).take(t, c, tag+"barrier")
				if err := rdb.Del(ctx, tag+"barrier").Err(); err != nil {
					t.Fatal(err)
				}
				wantLost(t, bar, "barrier")
				select {
				case <-h.ctx.Done():
					t.Fatalf("the hold ended: %v", context.Cause(h.ctx))
				default:
				}
				if err := h.release(ctx); err != nil {
					t.Fatal(err)
				}
				if cause := context.Cause(h.ctx); errors.Is(cause, lualock.ErrLockLost) {
					t.Fatalf("own release ended the hold with %v", cause)
				}
			})
		}
	})
}

// A restart that lost the keys is noticed when the server answers again,
// not at the next renewal: on a server, a cluster and a primary behind a
// Sentinel of the test's own.
func TestLoss_restart(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(t *testing.T) {
			rdb, nodeOf := ownServers(t, cluster)
			restartCase(t, rdb, nodeOf)
		})
	}
	t.Run("sentinel", func(t *testing.T) {
		rdb, s := startSentinelPrimary(t)
		restartCase(t, rdb, func(string) *harness.Server { return s })
	})
}

// ownServers starts a server, or a cluster, of the caller's own (stopped
// by its cleanup) and returns a client on it and the node that serves a
// name.
func ownServers(tb testing.TB, cluster bool) (redis.UniversalClient, func(name string) *harness.Server) {
	tb.Helper()
	if !cluster {
		s, err := harness.Start(harness.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(s.Stop)
		rdb := s.Client()
		tb.Cleanup(func() { _ = rdb.Close() })
		return rdb, func(string) *harness.Server { return s }
	}
	cl, err := harness.StartClusterE(harness.ClusterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Stop)
	rdb := cl.Client()
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb, func(name string) *harness.Server {
		n, err := rdb.MasterForKey(context.Background(), name)
		if err != nil {
			tb.Fatal(err)
		}
		for _, s := range cl.Nodes() {
			if s.Addr() == n.Options().Addr {
				return s
			}
		}
		tb.Fatalf("no node at %s", n.Options().Addr)
		return nil
	}
}

func restartCase(t *testing.T, rdb redis.UniversalClient, nodeOf func(name string) *harness.Server) {
	c := newClient(t, rdb, lualock.Options{})
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			name := "restart-" + k.name
			h := k.take(t, c, name)
			if err := nodeOf(name).Restart(); err != nil {
				t.Fatal(err)
			}
			wantLost(t, h, "restart")
		})
	}
}

// A handle reuses its watch for each hold. Holds taken in a tight loop
// and released before their first check, then one kept: the kept hold's
// first check is sent, and a force unlock of it ends it within waitLoss;
// so does one taken after the loop by another handle. (The watch stopped
// and added again within one gathering of first checks must count as
// waiting for its check.)
func TestLoss_afterShortHolds(t *testing.T) {
	realBackends(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb, lualock.Options{})
		other := newClient(t, rdb, lualock.Options{})
		name := backends.UniqueName(t)
		l := c.NewLock(name)
		for range 500 {
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		l2 := c.NewLock(name + "-2")
		if err := l2.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		for _, x := range []*lualock.Lock{l, l2} {
			if deleted, err := other.NewLock(x.Name()).ForceUnlock(ctx); err != nil || !deleted {
				t.Fatalf("ForceUnlock(%s) = %v, %v", x.Name(), deleted, err)
			}
			wantLost(t, hold{ctx: x.Context()}, "force unlock of "+x.Name())
		}
	})
}
