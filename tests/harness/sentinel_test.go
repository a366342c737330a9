package harness

import (
	"context"
	"testing"
	"time"
)

// TestSentinel_failover: a deployment starts stable, a failover promotes
// the replica and the crashed primary comes back as its replica, twice (so
// the second failover starts from a promoted node), and a write acknowledged
// by WAIT survives it while one cut from the link is lost.
func TestSentinel_failover(t *testing.T) {
	d := StartSentinel(t, SentinelOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := d.Client()
	defer rdb.Close()
	first, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first != d.Nodes()[0] {
		t.Fatalf("primary %s, want the first node %s", first.Addr(), d.Nodes()[0].Addr())
	}
	prev := first
	for i := range 2 {
		// Kept: acknowledged by the replica before the crash.
		if err := rdb.Set(ctx, "kept", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := rdb.Wait(ctx, 1, time.Second).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT: %d, %v", n, err)
		}
		// Lost: the link holds it back and the crash drops it.
		d.SetLinkDelay(100 * time.Millisecond)
		if err := rdb.Set(ctx, "lost", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		old, promoted, err := d.Failover(ctx)
		d.SetLinkDelay(0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("failover %d: %s -> %s in %v", i, old.Addr(), promoted.Addr(), time.Since(start))
		if old != prev || promoted == old {
			t.Fatalf("failover %d: %s -> %s, want away from %s", i, old.Addr(), promoted.Addr(), prev.Addr())
		}
		prev = promoted
		if v, err := rdb.Get(ctx, "kept").Int(); err != nil || v != i {
			t.Fatalf("kept after failover %d: %d, %v", i, v, err)
		}
		if n, err := rdb.Exists(ctx, "lost").Result(); err != nil || n != int64(i) {
			// i == 0: never replicated; i == 1: the first round's value
			// was replicated at the rejoin, this round's is lost.
			if v, _ := rdb.Get(ctx, "lost").Int(); v == i {
				t.Fatalf("lost after failover %d: %v %v, want the crash to lose it", i, v, err)
			}
		}
	}
}
