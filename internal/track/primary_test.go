package track_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lualock/lualock/internal/track"
	"github.com/lualock/lualock/tests/harness"
	"github.com/redis/go-redis/v9"
)

// With the primary check on (Dialer.DialAddr), a node that answers ROLE as
// a replica is not used; when the primary cannot be reached, the replicas
// it named are dialed too, and the one that answers as a primary (a
// replica promoted, before any Sentinel names it) serves the watches: a
// hold the promotion lost is reported from there.
func TestPrimaryCheck_findsPromotedReplica(t *testing.T) {
	p, prdb := server(t)
	r, rrdb := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quickSync(t, ctx, prdb)
	replicaOf(t, ctx, rrdb, p.Addr())
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
	connected(t, ctx, tr)
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

// twoFailovers is what promotedAgain returns: a (a replica of the dead
// b, synced) with its client, the tracker, the watch of a hold that a
// has, and how many times the tracker has dialed a's address.
type twoFailovers struct {
	a        *harness.Server
	ardb     *redis.Client
	tr       *track.Tracker
	w        *watched
	dialsToA *atomic.Int64
}

// promotedAgain sets up two failovers behind a Sentinel that has not yet
// named the second promotion: a is the primary and b its replica; a
// crashes, b is promoted (and named), and a hold lost there is reported;
// a comes back at its address as b's replica, announcing a port where
// nothing listens (so b's ROLE does not lead to it), and b crashes.
func promotedAgain(t *testing.T, ctx context.Context) twoFailovers {
	t.Helper()
	a, ardb := server(t)
	b, brdb := server(t)
	quickSync(t, ctx, ardb)
	quickSync(t, ctx, brdb)
	replicaOf(t, ctx, brdb, a.Addr())
	for _, k := range []string{"held1", "held2"} {
		if err := ardb.HSet(ctx, k, "f", 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	synced(t, ctx, brdb, "held2")

	var named atomic.Value // the address a Sentinel would name
	named.Store(a.Addr())
	dialsToA := new(atomic.Int64)
	var d net.Dialer
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if addr == a.Addr() {
			dialsToA.Add(1)
		}
		return d.DialContext(ctx, "tcp", addr)
	}
	tr := track.New(track.Dialer{
		Addr:     func(context.Context, string) (string, error) { return "deployment", nil },
		Dial:     func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx, named.Load().(string)) },
		DialAddr: dial,
	}, track.Config{Ping: time.Hour})
	t.Cleanup(tr.Close)
	w1, w2 := watch(tr, "held1"), watch(tr, "held2")
	connected(t, ctx, tr)

	// The first failover: b is promoted, and the tracker found it (the
	// replica a named) once a hold lost there is reported.
	a.Kill()
	if err := brdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	named.Store(b.Addr())
	if err := brdb.HDel(ctx, "held1", "f").Err(); err != nil {
		t.Fatal(err)
	}
	w1.wantLost(t, track.Gone)

	// a rejoins as b's replica; b's ROLE names a port where nothing
	// listens. Then b crashes, still named.
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ardb.ConfigSet(ctx, "replica-announce-port", "1").Err(); err != nil {
		t.Fatal(err)
	}
	replicaOf(t, ctx, ardb, b.Addr())
	synced(t, ctx, ardb, "held2")
	b.Kill()
	return twoFailovers{a: a, ardb: ardb, tr: tr, w: w2, dialsToA: dialsToA}
}

// A primary that rejoined as a replica at its old address and is promoted
// again is found by the tracker, although the primary it replicated named
// it at another address and no Sentinel names it yet: its master_replid2
// is the replication id of the primary the tracker was connected to.
func TestPrimaryCheck_findsFormerPrimaryPromotedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := promotedAgain(t, ctx)
	if err := f.ardb.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.ardb.HDel(ctx, "held2", "f").Err(); err != nil {
		t.Fatal(err)
	}
	f.w.wantLost(t, track.Gone)
}

// A server at a known address that answers as a primary of another
// replication history (the address now serves another deployment, or a
// server restarted empty) is not taken: its data says nothing of the
// holds, and would report every one lost.
func TestPrimaryCheck_refusesPrimaryOfAnotherHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := promotedAgain(t, ctx)
	_, crdb := server(t)
	quickSync(t, ctx, crdb)
	if err := crdb.Set(ctx, "other", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	replicaOf(t, ctx, f.ardb, crdb.Options().Addr)
	for f.ardb.Get(ctx, "other").Val() != "1" {
		if ctx.Err() != nil {
			t.Fatal("a never synced from c")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := f.ardb.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	// Two dials of a since it answers as a primary: the first one's
	// handshake was judged before the second began (connect tries again
	// only after every candidate's handshake ended).
	for from := f.dialsToA.Load(); f.dialsToA.Load() < from+2; {
		if _, conns := f.tr.Counts(); conns != 0 {
			break // taken: judged below
		}
		if ctx.Err() != nil {
			t.Fatal("the tracker did not try the known address again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, conns := f.tr.Counts(); conns != 0 {
		t.Fatalf("%d tracking connections, want none to a primary of another history", conns)
	}
	f.w.wantHeld(t)
}

// The primary the tracker was connected to, restarted from its RDB, answers
// as a primary whose master_replid2 is its old replication id, with the
// data of its last save: it is not taken (at its address only the same
// process, by its run_id, is), though its history matches.
func TestPrimaryCheck_skipsRestartedPrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, ardb := server(t)
	_, brdb := server(t)
	quickSync(t, ctx, ardb)
	replicaOf(t, ctx, brdb, a.Addr())
	if err := ardb.HSet(ctx, "held", "f", 1).Err(); err != nil {
		t.Fatal(err)
	}
	synced(t, ctx, brdb, "held")
	// The tracker learns the replicas from the primary's ROLE, which names
	// a replica only once its sync is over on the primary's side too (it
	// serves the key a little before that).
	listed(t, ctx, ardb, brdb.Options().Addr)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	var named atomic.Value
	named.Store(a.Addr())
	var viaAddr sync.Map // address -> *atomic.Int64: DialAddr's dials
	dialsTo := func(addr string) *atomic.Int64 {
		c, _ := viaAddr.LoadOrStore(addr, new(atomic.Int64))
		return c.(*atomic.Int64)
	}
	var d net.Dialer
	tr := track.New(track.Dialer{
		Addr: func(context.Context, string) (string, error) { return "deployment", nil },
		Dial: func(ctx context.Context, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", named.Load().(string))
		},
		DialAddr: func(ctx context.Context, addr string) (net.Conn, error) {
			dialsTo(addr).Add(1)
			return d.DialContext(ctx, "tcp", addr)
		},
	}, track.Config{Ping: time.Hour})
	t.Cleanup(tr.Close)
	w := watch(tr, "held")
	connected(t, ctx, tr)
	before := ardb.Info(ctx, "replication").Val()

	// No Sentinel answers; a restarts from its RDB.
	named.Store(dead)
	// A replica's full sync may still be writing its RDB in the
	// background: SAVE is refused until that ends.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := ardb.Save(ctx).Err()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "Background save already in progress") || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	a.Kill()
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	after := ardb.Info(ctx, "replication").Val()
	if old := infoLine(before, "master_replid"); old == "" || infoLine(after, "master_replid2") != old {
		t.Skipf("this Redis does not keep the replication id across a restart (before: %q, after: %q)", before, after)
	}
	// Two rounds of the tracker's dials since: b, a replica, is tried in
	// each, and refused.
	for from := dialsTo(brdb.Options().Addr).Load(); dialsTo(brdb.Options().Addr).Load() < from+2; {
		if _, conns := tr.Counts(); conns != 0 {
			break // taken: judged below
		}
		if ctx.Err() != nil {
			t.Fatal("the tracker did not try the replica again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, conns := tr.Counts(); conns != 0 {
		t.Errorf("%d tracking connections, want none", conns)
	}
	w.wantHeld(t)
}

// listed returns once the primary on rdb names the replica at addr in its
// ROLE reply (only replicas whose sync is over are named).
func listed(t *testing.T, ctx context.Context, rdb *redis.Client, addr string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	for {
		role, err := rdb.Do(ctx, "ROLE").Slice()
		if err == nil && len(role) == 3 {
			if rs, ok := role[2].([]any); ok {
				for _, r := range rs {
					if f, ok := r.([]any); ok && len(f) >= 2 && fmt.Sprint(f[1]) == port {
						return
					}
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the primary never named its replica %s in ROLE (%v, %v)", addr, role, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoLine returns field's value in an INFO reply.
func infoLine(info, field string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return ""
}

// quickSync makes rdb's server, as a primary, send its first full sync
// at once (Redis waits 5s by default for more replicas to share it).
func quickSync(t *testing.T, ctx context.Context, rdb *redis.Client) {
	t.Helper()
	if err := rdb.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
}

// connected returns once tr has its tracking connection.
func connected(t *testing.T, ctx context.Context, tr *track.Tracker) {
	t.Helper()
	for {
		if _, conns := tr.Counts(); conns == 1 {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("no tracking connection to the primary")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replicaOf makes rdb's server a replica of the server at addr.
func replicaOf(t *testing.T, ctx context.Context, rdb *redis.Client, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	if err := rdb.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
}

// synced returns once rdb's server, a replica, serves the hash key that
// its primary wrote.
func synced(t *testing.T, ctx context.Context, rdb *redis.Client, key string) {
	t.Helper()
	for rdb.HGet(ctx, key, "f").Val() != "1" {
		if ctx.Err() != nil {
			t.Fatalf("the replica never synced %s", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
