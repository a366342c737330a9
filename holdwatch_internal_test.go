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
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := &clusterPlacer{rdb: rdb, down: map[string]unreached{}}
	key := t.Name() + ":{placer}"
	m, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	master := m.Options().Addr
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
