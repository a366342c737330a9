package failover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestAck_notReplicated: when the replica never acknowledges (its link is
// cut), every kind's acquisition fails with ErrNotReplicated after
// ReplicaAckTimeout and leaves nothing held: another owner obtains it at
// once. With acknowledgement off the same acquisitions succeed.
func TestAck_notReplicated(t *testing.T) {
	t.Parallel() // every test of the suite has a deployment of its own
	d := harness.StartSentinel(t, harness.SentinelOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(mode lualock.ReplicaAck) *lualock.Client {
		rdb := d.Client(func(o *redis.FailoverOptions) { o.ContextTimeoutEnabled = true })
		t.Cleanup(func() { _ = rdb.Close() })
		return backends.NewClient(t, rdb, lualock.Options{ReplicaAck: mode, ReplicaAckTimeout: 200 * time.Millisecond})
	}
	on, off := client(lualock.ReplicaAckOne), client(lualock.ReplicaAckOff)
	names := map[string]string{}
	tag := roundTag(t.Name(), 0)
	for _, k := range kinds() {
		names[k.name] = tag + ":" + k.name
		if k.setup != nil {
			if err := k.setup(ctx, on, names[k.name]); err != nil {
				t.Fatalf("%s setup: %v", k.name, err)
			}
		}
	}
	d.Nodes()[0].Proxy.CutLink() // the primary's replication link
	for _, k := range kinds() {
		_, err := k.take(ctx, on, names[k.name])
		if !errors.Is(err, lualock.ErrNotReplicated) {
			t.Fatalf("%s: %v, want ErrNotReplicated", k.name, err)
		}
		// Undone: the other client obtains it, and gives it back.
		var h hold
		for start := time.Now(); ; {
			if h, err = k.probe(ctx, off, names[k.name]); err == nil || time.Since(start) > 5*time.Second {
				break
			}
			time.Sleep(10 * time.Millisecond) // a semaphore's permits come back in the background
		}
		if err != nil {
			t.Fatalf("%s: after ErrNotReplicated another owner cannot obtain it: %v", k.name, err)
		}
		if err := h.release(ctx); err != nil {
			t.Fatalf("%s: release: %v", k.name, err)
		}
	}
}
