package pubsub_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestClient_ShardedPubSub_wakesWaiters runs the reentrant and the fair
// lock with sharded pub/sub (Options.PubSub) on the real servers (miniredis has no
// SPUBLISH): a waiter blocked in Lock is woken by the release's SPUBLISH long
// before its fallback timer, and every subscription is gone afterwards.
func TestClient_ShardedPubSub_wakesWaiters(t *testing.T) {
	for _, b := range backends.All() {
		if b.Name == "miniredis" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.New(t)
			for _, fair := range []bool{false, true} {
				c, err := lualock.New(rdb, lualock.Options{PubSub: lualock.PubSubSharded, MaxWaitTimer: 5 * time.Second, SubscriptionLinger: -1})
				if err != nil {
					t.Fatal(err)
				}
				newLock := c.NewLock
				if fair {
					newLock = c.NewFairLock
				}
				ctx := context.Background()
				// Names in different slots, so a cluster needs several
				// sharded connections.
				for _, name := range []string{backends.UniqueName(t) + "-a", backends.UniqueName(t) + "-b", backends.UniqueName(t) + "-c"} {
					holder, waiter := newLock(name), newLock(name)
					if err := holder.Lock(ctx); err != nil {
						t.Fatal(err)
					}
					got := make(chan time.Time, 1)
					errc := make(chan error, 1)
					go func() {
						err := waiter.Lock(ctx)
						got <- time.Now()
						errc <- err
					}()
					backends.WaitFor(t, "condition", 2*time.Second, func() bool { return c.Stats().Waiters == 1 })
					time.Sleep(20 * time.Millisecond) // let the waiter's retry after subscribing pass
					released := time.Now()
					if err := holder.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
					woke := <-got
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
					if d := woke.Sub(released); d > time.Second {
						t.Errorf("fair=%v %s: waiter acquired %v after the release: the SPUBLISH did not wake it", fair, name, d)
					}
					if err := waiter.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
					if left := backends.KeysLeft(t, rdb, name, false); len(left) > 0 {
						t.Errorf("keys left: %v", left)
					}
				}
				if st := c.Stats(); st.Subscriptions != 0 || st.Waiters != 0 {
					t.Errorf("fair=%v: stats after the waits: %+v", fair, st)
				}
				if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestClient_ShardedPubSub_onePerPrimary: with sharded pub/sub on the
// 3-master cluster, waiters on 60 locks spread over the slots share one
// pub/sub connection per primary (not one per slot), one subscription per
// lock, and each is woken by its release's SPUBLISH.
func TestClient_ShardedPubSub_onePerPrimary(t *testing.T) {
	rdb := harness.SharedCluster(t).Client()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	holders, c := shardedClients(t, rdb)

	const locks = 60
	base := backends.UniqueName(t)
	var held []*lualock.Lock
	slots := map[int64]bool{}
	for i := range locks {
		name := fmt.Sprintf("%s-%d", base, i)
		slot, err := rdb.ClusterKeySlot(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
		l := holders.NewLock(name)
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	type result struct {
		at  time.Time
		err error
	}
	results := make(chan result, locks)
	waiters := make([]*lualock.Lock, locks)
	for i := range locks {
		waiters[i] = c.NewLock(fmt.Sprintf("%s-%d", base, i))
		go func() {
			err := waiters[i].Lock(ctx)
			results <- result{time.Now(), err}
		}()
	}
	// A subscription counts as soon as it is asked for, a connection once
	// a channel is placed on it: wait for both.
	backends.Eventually(10*time.Second, func() bool {
		s := c.Stats()
		return s.Subscriptions == locks && s.PubSubConns >= 1
	})
	st := c.Stats()
	t.Logf("%d locks on %d slots: %+v", locks, len(slots), st)
	if st.Waiters != locks || st.Subscriptions != locks {
		t.Fatalf("Stats = %+v, want %d waiters and %d subscriptions", st, locks, locks)
	}
	if st.PubSubConns < 1 || st.PubSubConns > 3 {
		t.Errorf("Stats.PubSubConns = %d for %d slots, want at most one per primary (3)", st.PubSubConns, len(slots))
	}
	time.Sleep(50 * time.Millisecond) // the waiters' retries after subscribing
	released := time.Now()
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range locks {
		r := <-results
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		if d := r.at.Sub(released); d > 2*time.Second {
			t.Errorf("a waiter got its lock %v after the releases: its SPUBLISH did not wake it", d)
		}
	}
	for _, l := range waiters {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	backends.WaitFor(t, "condition", 2*time.Second, func() bool { s := c.Stats(); return s.Subscriptions == 0 && s.PubSubConns == 0 })
}

// TestClient_ShardedPubSub_reconnect: two locks in different slots of one
// primary share its sharded pub/sub connection. When that connection is
// killed, the client subscribes both channels again on the primary of each
// slot (go-redis alone would resubscribe them in one SSUBSCRIBE on a random
// node: CROSSSLOT), so each waiter is still woken by its release's SPUBLISH,
// long before its 10s fallback timer.
func TestClient_ShardedPubSub_reconnect(t *testing.T) {
	cl := harness.SharedCluster(t)
	clientName := "sharded-reconnect-" + strings.ReplaceAll(backends.UniqueName(t), "/", "-")
	rdb := cl.Client(func(o *redis.ClusterOptions) { o.ClientName = clientName })
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	holders, c := shardedClients(t, rdb)

	// Two names on one primary, in different slots.
	base := backends.UniqueName(t)
	seen := map[string][]string{}
	var names []string
	var node string
	for i := 0; names == nil; i++ {
		name := fmt.Sprintf("%s-%d", base, i)
		n, err := rdb.MasterForKey(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		addr := n.Options().Addr
		for _, o := range seen[addr] {
			if rdb.ClusterKeySlot(ctx, o).Val() != rdb.ClusterKeySlot(ctx, name).Val() {
				names, node = []string{o, name}, addr
				break
			}
		}
		seen[addr] = append(seen[addr], name)
	}
	type waitResult struct {
		at  time.Time
		err error
	}
	var held, waiting []*lualock.Lock
	results := make([]chan waitResult, len(names))
	for i, name := range names {
		h := holders.NewLock(name)
		if err := h.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
		w := c.NewLock(name)
		waiting = append(waiting, w)
		results[i] = make(chan waitResult, 1)
		go func() {
			err := w.Lock(ctx)
			results[i] <- waitResult{time.Now(), err}
		}()
	}
	var srv *redis.Client
	for _, n := range cl.Nodes() {
		if n.Addr() == node {
			srv = n.Client()
		}
	}
	if srv == nil {
		t.Fatalf("no node of the cluster at %s", node)
	}
	defer srv.Close()
	// subscribed reports whether the primary has each channel subscribed
	// once, with what PUBSUB SHARDNUMSUB returned.
	subscribed := func() (bool, []any, error) {
		chans, err := srv.Do(ctx, "pubsub", "shardnumsub", backends.Channel(names[0]), backends.Channel(names[1])).Slice()
		return err == nil && len(chans) == 4 && fmt.Sprint(chans[1]) == "1" && fmt.Sprint(chans[3]) == "1", chans, err
	}
	// A subscription counts in Stats as soon as it is asked for, its
	// connection once it is placed: only when the primary has both
	// channels is every connection the client will open for them open.
	backends.WaitFor(t, "both waiters and their channels subscribed on the primary", 10*time.Second, func() bool {
		s := c.Stats()
		ok, _, _ := subscribed()
		return s.Waiters == 2 && s.Subscriptions == 2 && ok
	})
	if s := c.Stats(); s.PubSubConns != 1 {
		t.Fatalf("Stats = %+v, want the two channels on one connection", s)
	}

	// Kill our pub/sub connection on that primary (only ours).
	killed := 0
	for _, line := range strings.Split(srv.ClientList(ctx).Val(), "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if f["name"] == clientName && strings.Contains(f["flags"], "P") {
			if err := srv.Do(ctx, "client", "kill", "id", f["id"]).Err(); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("killed %d pub/sub connections of ours on %s, want 1", killed, node)
	}
	// Both channels are subscribed again on that primary.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, chans, err := subscribed()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUBSUB SHARDNUMSUB after the kill = %v, %v; want both channels subscribed again", chans, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the waiters' retries after the new confirmations
	for i, h := range held {
		released := time.Now()
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-results[i]
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		d := r.at.Sub(released)
		t.Logf("waiter on %s woken %v after the release", names[i], d)
		if d > 2*time.Second {
			t.Errorf("waiter on %s woken %v after the release: its SPUBLISH was not heard after the reconnect", names[i], d)
		}
		if err := waiting[i].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// shardedClients returns two clients on rdb with sharded pub/sub, a 10s
// fallback timer and no lingering subscriptions, which the test's cleanup
// closes: one for the holders, one for the waiters whose Stats are checked.
func shardedClients(t *testing.T, rdb redis.UniversalClient) (holders, waiters *lualock.Client) {
	t.Helper()
	opts := lualock.Options{PubSub: lualock.PubSubSharded, MaxWaitTimer: 10 * time.Second, SubscriptionLinger: -1}
	return backends.NewClient(t, rdb, opts), backends.NewClient(t, rdb, opts)
}

// TestClient_ShardedPubSub_slotMigration moves the slot of a lock that has a
// waiter to another primary of a private cluster, with the lock held. The
// node that gives the slot away drops its shard channels (SUNSUBSCRIBE
// pushed by Redis); the client must subscribe the waiter's channel again on
// the new owner, so that the release still wakes the waiter at once rather
// than at its fallback timer (30 s here).
func TestClient_ShardedPubSub_slotMigration(t *testing.T) {
	backends.ShortParallel(t)
	cl := harness.StartCluster(t)
	ctx := context.Background()
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := lualock.New(rdb, lualock.Options{PubSub: lualock.PubSubSharded, MaxWaitTimer: 30 * time.Second, SubscriptionLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	name := backends.UniqueName(t)
	channel := "redisson_lock__channel:{" + name + "}"

	holder, waiter := c.NewLock(name), c.NewLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := waiter.Lock(ctx)
		got <- time.Now()
		errc <- err
	}()
	backends.WaitFor(t, "condition", 2*time.Second, func() bool { return c.Stats().Waiters == 1 })

	slot := int(rdb.ClusterKeySlot(ctx, name).Val())
	nodes := map[string]*redis.Client{} // by address
	ids := map[string]string{}
	for _, addr := range cl.Addrs() {
		n := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = n.Close() })
		nodes[addr] = n
		id, err := n.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[addr] = id
	}
	var src, dst string
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int(r.Start) > slot || slot > int(r.End) {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					src = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
			}
		}
	}
	for addr := range nodes {
		if addr != src {
			dst = addr
			break
		}
	}
	if src == "" || dst == "" {
		t.Fatalf("slot %d: owner %q, target %q", slot, src, dst)
	}
	shardSubs := func(addr string) int64 {
		res, err := nodes[addr].Do(ctx, "PUBSUB", "SHARDNUMSUB", channel).Slice()
		if err != nil || len(res) != 2 {
			t.Fatalf("PUBSUB SHARDNUMSUB on %s: %v %v", addr, res, err)
		}
		return res[1].(int64)
	}
	backends.WaitFor(t, "condition", 2*time.Second, func() bool { return shardSubs(src) == 1 })

	// The standard resharding steps, for one slot.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(nodes[dst].Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src]).Err())
	must(nodes[src].Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst]).Err())
	keys, err := nodes[src].ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	must(err)
	host, port, _ := strings.Cut(dst, ":")
	for _, k := range keys {
		must(nodes[src].Migrate(ctx, host, port, k, 0, 5*time.Second).Err())
	}
	must(nodes[dst].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst]).Err())
	must(nodes[src].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst]).Err())
	for addr, n := range nodes {
		if addr != src && addr != dst {
			must(n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst]).Err())
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for shardSubs(dst) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's channel was not subscribed on the slot's new owner within 5s (old owner: %d subscribers)", shardSubs(src))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := shardSubs(src); n != 0 {
		t.Errorf("old owner still has %d subscribers on the channel", n)
	}
	select {
	case <-got:
		t.Fatal("the waiter acquired a lock that is still held")
	default:
	}

	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	woke := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d := woke.Sub(released); d > time.Second {
		t.Errorf("waiter acquired %v after the release: the SPUBLISH on the new owner did not wake it", d)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if left := backends.KeysLeft(t, rdb, name, false); len(left) > 0 {
		t.Errorf("keys left: %v", left)
	}
}
