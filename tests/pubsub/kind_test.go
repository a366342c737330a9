package pubsub_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// The pub/sub kind (Options.PubSub) against a foreign client that publishes
// as Redisson does: Redisson 3.22 and later SPUBLISH on a Redis 7 cluster,
// every other case PUBLISH. These tests reproduce, without Java, a waiter
// that listened with the wrong kind: a foreign holder (HSET N <uuid>:1 1, PEXPIRE N 30000), a lualock
// waiter, then a script that deletes N and publishes "0" on the release
// channel with the kind under test. A waiter that listens on that kind must
// wake within wakeWithin; one that does not hears nothing and sleeps on its
// fallback timer (fallbackTimer here).

const (
	wakeWithin    = time.Second      // a heard release: milliseconds, bounded far below the timer
	fallbackTimer = 10 * time.Second // the waiters' fallback timer (Options.MaxWaitTimer)
	deafFor       = 500 * time.Millisecond
)

// foreignRelease deletes the lock and publishes "0" on channel with cmd,
// in one script, as Redisson's unlock does.
var foreignRelease = redis.NewScript(`redis.call('del', KEYS[1]); return redis.call(ARGV[1], KEYS[2], '0')`)

// attemptCounter counts, per lock name, the acquire scripts (reentrant and
// fair) that Redis has run: a waiter makes its first attempt, subscribes,
// and attempts once more before it sleeps (a release may have gone unheard
// while it subscribed). A release sent before that second attempt has run
// is found by it, whatever the pub/sub kind: the test waits for two.
type attemptCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *attemptCounter) note(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) > 3 && strings.EqualFold(fmt.Sprint(a[0]), "evalsha") &&
		(a[1] == generated.LockAcquireSHA1 || a[1] == generated.FairAcquireSHA1) {
		h.mu.Lock()
		h.n[fmt.Sprint(a[3])]++
		h.mu.Unlock()
	}
}

func (h *attemptCounter) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[name]
}

// listensTo reports which release kinds a waiter with mode hears on the
// backend: PUBLISH and/or SPUBLISH.
func listensTo(mode lualock.PubSubMode, cluster bool) (plain, sharded bool) {
	switch mode {
	case lualock.PubSubPlain:
		return true, false
	case lualock.PubSubSharded:
		return false, true
	case lualock.PubSubBoth:
		return true, true
	default: // auto: what Redisson 3.22+ does
		return !cluster, cluster
	}
}

// numSub returns the number of plain and of sharded subscribers of
// channel, summed over the masters of a cluster.
func numSub(t *testing.T, rdb redis.UniversalClient, channel string) (plain, sharded int64) {
	t.Helper()
	plain, sharded, err := harness.NumSub(context.Background(), rdb, channel)
	if err != nil {
		t.Fatal(err)
	}
	return plain, sharded
}

// TestClient_PubSub_foreignRelease: on standalone Redis and the cluster, for
// every mode, the reentrant and the fair lock, a waiter wakes within wakeWithin
// of a foreign release published on a kind it listens to, and does not wake
// (it sleeps on its timer) for a kind it does not. With the default (auto)
// on the cluster, an SPUBLISH release (Redisson 3.22+) wakes it: before
// Options.PubSub, lualock listened with SUBSCRIBE there and slept.
func TestClient_PubSub_foreignRelease(t *testing.T) {
	backends.ShortParallel(t)
	modes := []lualock.PubSubMode{lualock.PubSubAuto, lualock.PubSubPlain, lualock.PubSubSharded, lualock.PubSubBoth}
	for _, b := range backends.All() {
		if b.Mini() {
			continue // no SPUBLISH in miniredis
		}
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.New(t)
			attempts := &attemptCounter{n: map[string]int{}}
			rdb.AddHook(backends.Observe{Note: attempts.note})
			var lat []time.Duration
			for _, mode := range modes {
				c := backends.NewClient(t, rdb, lualock.Options{PubSub: mode, MaxWaitTimer: fallbackTimer, SubscriptionLinger: -1})
				hearsPlain, hearsSharded := listensTo(mode, b.Cluster)
				for _, fair := range []bool{false, true} {
					for _, cmd := range []string{"publish", "spublish"} {
						hears := hearsPlain
						if cmd == "spublish" {
							hears = hearsSharded
						}
						name := fmt.Sprintf("%s-%v-%v-%s", backends.UniqueName(t), mode, fair, cmd)
						d, woke := waitWoken(t, rdb, c, name, fair, cmd, mode, attempts)
						switch {
						case hears && !woke:
							t.Errorf("mode %v, fair=%v: a %s release did not wake the waiter within %v", mode, fair, cmd, wakeWithin)
						case hears:
							lat = append(lat, d)
						case woke:
							t.Errorf("mode %v, fair=%v: a %s release woke the waiter after %v, but this mode does not listen to it", mode, fair, cmd, d)
						}
					}
				}
			}
			t.Logf("wake-up after a foreign release, %d heard releases: max %v", len(lat), maxDur(lat))
		})
	}
}

// waitWoken makes a foreign holder of name, a waiter of client c, and a
// foreign release with cmd; it returns how long after the release the
// waiter got the lock and whether it did within wakeWithin (deafFor for a kind
// mode does not listen to). It cleans the lock up either way.
func waitWoken(t *testing.T, rdb redis.UniversalClient, c *lualock.Client, name string, fair bool, cmd string, mode lualock.PubSubMode, attempts *attemptCounter) (time.Duration, bool) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.HSet(ctx, name, "6b8f1e52-0000-4000-8000-000000000001:1", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(ctx, name, 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	l := c.NewLock(name)
	if fair {
		l = c.NewFairLock(name)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan error, 1)
	go func() { got <- l.Lock(wctx) }()

	channel := "redisson_lock__channel:{" + name + "}"
	if fair {
		// The fair waiter listens on its own channel, channel:field; the
		// field is the head of the queue.
		queue := "redisson_lock_queue:{" + name + "}"
		backends.WaitFor(t, "condition", 2*time.Second, func() bool { return rdb.LLen(ctx, queue).Val() == 1 })
		channel += ":" + rdb.LIndex(ctx, queue, 0).Val()
	}
	wantPlain, wantSharded := listensTo(mode, rdbIsCluster(rdb))
	backends.WaitFor(t, "condition", 2*time.Second, func() bool {
		p, s := numSub(t, rdb, channel)
		return (p > 0) == wantPlain && (s > 0) == wantSharded
	})
	backends.WaitFor(t, "condition", 2*time.Second, func() bool { return attempts.count(name) >= 2 }) // asleep: only a message wakes it now
	hears := wantPlain
	if cmd == "spublish" {
		hears = wantSharded
	}
	limit := wakeWithin
	if !hears {
		limit = deafFor
	}
	start := time.Now()
	if err := foreignRelease.Run(ctx, rdb, []string{name, channel}, cmd).Err(); err != nil {
		t.Fatal(err)
	}
	tm := time.NewTimer(limit)
	defer tm.Stop()
	var d time.Duration
	woke := false
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		d, woke = time.Since(start), true
	case <-tm.C:
		cancel()
		if err := <-got; err == nil {
			woke = true // won the race with the cancellation
			d = time.Since(start)
		}
	}
	if woke {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		woke = d <= limit
	}
	return d, woke
}

func rdbIsCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestClient_PubSub_publishes: a lualock release (Unlock and ForceUnlock)
// publishes on the kinds its mode says, which raw SUBSCRIBE and SSUBSCRIBE
// connections observe: auto as Redisson 3.22+ on the topology, both on both.
func TestClient_PubSub_publishes(t *testing.T) {
	backends.ShortParallel(t)
	modes := []lualock.PubSubMode{lualock.PubSubAuto, lualock.PubSubPlain, lualock.PubSubSharded, lualock.PubSubBoth}
	for _, b := range backends.All() {
		if b.Name == "miniredis" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.New(t)
			ctx := context.Background()
			for _, mode := range modes {
				c := backends.NewClient(t, rdb, lualock.Options{PubSub: mode})
				for _, force := range []bool{false, true} {
					name := fmt.Sprintf("%s-%v-%v", backends.UniqueName(t), mode, force)
					channel := "redisson_lock__channel:{" + name + "}"
					plain := rdb.Subscribe(ctx, channel)
					sharded := rdb.SSubscribe(ctx, channel)
					for _, ps := range []*redis.PubSub{plain, sharded} {
						if _, err := ps.Receive(ctx); err != nil { // the confirmation
							t.Fatal(err)
						}
					}
					l := c.NewLock(name)
					if err := l.Lock(ctx); err != nil {
						t.Fatal(err)
					}
					if force {
						if ok, err := c.NewLock(name).ForceUnlock(ctx); err != nil || !ok {
							t.Fatalf("ForceUnlock = %v, %v", ok, err)
						}
					} else if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
					wantPlain, wantSharded := listensTo(mode, b.Cluster)
					for _, k := range []struct {
						ps   *redis.PubSub
						want bool
						kind string
					}{{plain, wantPlain, "PUBLISH"}, {sharded, wantSharded, "SPUBLISH"}} {
						limit := 2 * time.Second
						if !k.want {
							limit = 200 * time.Millisecond
						}
						rctx, cancel := context.WithTimeout(ctx, limit)
						m, err := k.ps.ReceiveMessage(rctx)
						cancel()
						switch {
						case k.want && err != nil:
							t.Errorf("mode %v force=%v: no %s message: %v", mode, force, k.kind, err)
						case k.want && m.Payload != "0":
							t.Errorf("mode %v force=%v: %s message %q, want \"0\"", mode, force, k.kind, m.Payload)
						case !k.want && err == nil:
							t.Errorf("mode %v force=%v: unexpected %s message %q", mode, force, k.kind, m.Payload)
						}
						_ = k.ps.Close()
					}
				}
			}
		})
	}
}

// TestClient_PubSub_autoClusterSlots: a ClusterClient with its own
// ClusterSlots (as redis.NewFailoverClusterClient makes for a
// sentinel-managed Redis, where Redisson uses plain pub/sub) is not taken
// for a Redis Cluster: the default publishes with PUBLISH, not SPUBLISH.
func TestClient_PubSub_autoClusterSlots(t *testing.T) {
	for _, b := range backends.All() {
		if b.Name != "standalone" {
			continue
		}
		plainRdb := b.New(t)
		addr := plainRdb.(*redis.Client).Options().Addr
		rdb := redis.NewClusterClient(&redis.ClusterOptions{
			ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
				return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: addr}}}}, nil
			},
		})
		t.Cleanup(func() { _ = rdb.Close() })
		ctx := context.Background()
		c := backends.NewClient(t, rdb, lualock.Options{})
		name := backends.UniqueName(t)
		plain := plainRdb.Subscribe(ctx, "redisson_lock__channel:{"+name+"}")
		defer plain.Close()
		sharded := plainRdb.SSubscribe(ctx, "redisson_lock__channel:{"+name+"}")
		defer sharded.Close()
		for _, ps := range []*redis.PubSub{plain, sharded} {
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
		}
		l := c.NewLock(name)
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if _, err := plain.ReceiveMessage(rctx); err != nil {
			t.Errorf("no PUBLISH from the default on a ClusterSlots client: %v", err)
		}
		cancel()
		rctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
		if m, err := sharded.ReceiveMessage(rctx); err == nil {
			t.Errorf("SPUBLISH %q from the default on a ClusterSlots client, want PUBLISH only", m.Payload)
		}
		cancel()
	}
}
