package lualock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/harness"
)

// TestClusterPlacer: the tracker's placement on a cluster names the master
// of a key's slot, or, for unreachedFor after the tracker last failed to
// reach that master, another master, which answers a command on the key
// with MOVED to the slot's master as it knows it (so the tracker follows a
// failover as soon as the cluster's nodes know of it); then the master
// again.
func TestClusterPlacer(t *testing.T) {
	c := harness.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, key, master := newPlacer(ctx, t, c.Client())
	if got, err := p.addr(ctx, key); err != nil || got != master {
		t.Fatalf("addr = %q, %v; want the slot's master %s", got, err, master)
	}

	p.refresh(ctx, master) // the tracker could not reach it
	other, err := p.addr(ctx, key)
	if err != nil || other == master || other == "" {
		t.Fatalf("addr after the master was not reached = %q, %v; want another master", other, err)
	}
	o := redis.NewClient(&redis.Options{Addr: other, MaintNotificationsConfig: harness.NoMaintNotifications()})
	t.Cleanup(func() { _ = o.Close() })
	if err := o.Get(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), " "+master) {
		t.Fatalf("GET on the other master %s: %v, want MOVED to %s", other, err, master)
	}

	time.Sleep(unreachedFor + 10*time.Millisecond) // no failure since
	if got, err := p.addr(ctx, key); err != nil || got != master {
		t.Errorf("addr %v after the last failure = %q, %v; want the master %s again", unreachedFor, got, err, master)
	}
}

// TestClusterPlacer_replica: on a cluster whose masters have replicas, the
// placement of a key whose master the tracker could not reach is that
// master's replica, as another master's CLUSTER NODES names it (a
// promoted replica answers the check itself, before the other masters
// know of the promotion); not promoted, the replica
// refuses a command on the key with MOVED to its master.
func TestClusterPlacer_replica(t *testing.T) {
	c := harness.StartReplicatedCluster(t, harness.ReplicatedClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, key, master := newPlacer(ctx, t, c.Client())
	// The replica is found by CLUSTER NODES: right after the start,
	// before any write, go-redis's view (CLUSTER SLOTS) may list none.
	p.refresh(ctx, master)
	got, err := p.addr(ctx, key)
	if err != nil || got == master {
		t.Fatalf("addr after the master was not reached = %q, %v; want its replica", got, err)
	}
	r := redis.NewClient(&redis.Options{Addr: got, MaintNotificationsConfig: harness.NoMaintNotifications()})
	t.Cleanup(func() { _ = r.Close() })
	role, err := r.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) < 3 || role[0] != "slave" {
		t.Fatalf("ROLE of %s = %v, %v; want a replica", got, role, err)
	}
	if err := r.Get(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), " "+master) {
		t.Fatalf("GET on the replica %s: %v, want MOVED to %s", got, err, master)
	}
}

// newPlacer returns a placer on rdb (closed with the test), a key of the
// test and the address of its slot's master.
func newPlacer(ctx context.Context, t *testing.T, rdb *redis.ClusterClient) (p *clusterPlacer, key, master string) {
	t.Helper()
	t.Cleanup(func() { _ = rdb.Close() })
	key = t.Name() + ":{placer}"
	m, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return &clusterPlacer{rdb: rdb, down: map[string]unreached{}}, key, m.Options().Addr
}
