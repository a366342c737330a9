package track_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lualock/lualock/internal/track"
)

// With the primary check on (Dialer.DialAddr), a node that answers ROLE as
// a replica is not used; when the primary cannot be reached, the replicas
// it named are dialed in turn, and the one that answers as a primary (a
// replica promoted, before any Sentinel names it) serves the watches: a
// hold the promotion lost is reported from there.
func TestPrimaryCheck_findsPromotedReplica(t *testing.T) {
	p, prdb := server(t)
	r, rrdb := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, port, _ := net.SplitHostPort(p.Addr())
	if err := rrdb.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	// The replica has synced once it serves what the primary wrote.
	if err := prdb.HSet(ctx, "held", "f", 1).Err(); err != nil {
		t.Fatal(err)
	}
	for rrdb.HGet(ctx, "held", "f").Val() != "1" {
		if ctx.Err() != nil {
			t.Fatal("the replica never synced")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// named is the node a Sentinel would name: the replica first.
	var named atomic.Value
	named.Store(r.Addr())
	var d net.Dialer
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	tr := track.New(track.Dialer{
		Addr:     func(context.Context, string) (string, error) { return "deployment", nil },
		Dial:     func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx, named.Load().(string)) },
		DialAddr: dial,
	}, track.Config{Ping: 200 * time.Millisecond})
	t.Cleanup(tr.Close)

	w := watch(tr, "held")
	// Named, the replica is refused: no connection while it is one.
	for range 20 {
		if _, conns := tr.Counts(); conns != 0 {
			t.Fatalf("%d tracking connections to a replica, want none", conns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	named.Store(p.Addr())
	for {
		if _, conns := tr.Counts(); conns == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no tracking connection to the primary")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.wantHeld(t)

	// The primary crashes; what is named stays the dead primary. The
	// replica is promoted and has lost the hold.
	p.Stop()
	if err := rrdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rrdb.HDel(ctx, "held", "f").Err(); err != nil {
		t.Fatal(err)
	}
	w.wantLost(t, track.Gone)
}
