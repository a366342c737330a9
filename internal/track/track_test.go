package track_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/track"
	"github.com/lualock/lualock/tests/harness"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var check = &track.Spec{Name: "hold_check", SHA1: generated.HoldCheckSHA1, Source: generated.HoldCheckScript.Source}

// server starts a redis-server of the test's own.
func server(t testing.TB) (*harness.Server, *redis.Client) {
	t.Helper()
	s, err := harness.Start(harness.Options{})
	if err != nil {
		if os.Getenv("LUALOCK_REQUIRE_REDIS") == "" {
			t.Skipf("no redis-server: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	rdb := s.Client()
	t.Cleanup(func() { rdb.Close() })
	return s, rdb
}

func newTracker(t testing.TB, addr string) *track.Tracker {
	t.Helper()
	return newTrackerWith(t, addr, track.Config{Ping: 200 * time.Millisecond})
}

// newTrackerWith is newTracker with cfg.
func newTrackerWith(t testing.TB, addr string, cfg track.Config) *track.Tracker {
	t.Helper()
	tr := track.New(track.Dialer{
		Addr: func(context.Context, string) (string, error) { return addr, nil },
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
	}, cfg)
	t.Cleanup(tr.Close)
	return tr
}

// watched is a watch whose losses land on a channel.
type watched struct {
	w    *track.Watch
	lost chan track.Loss
}

func watch(tr *track.Tracker, key string) *watched {
	w := &watched{lost: make(chan track.Loss, 2)}
	w.w = tr.Watch(track.Target{Spec: check, Key: key, Field: "f"}, func(l track.Loss) { w.lost <- l })
	return w
}

func (w *watched) wantLost(t testing.TB, want track.Loss) {
	t.Helper()
	select {
	case l := <-w.lost:
		if l != want {
			t.Fatalf("loss %v, want %v", l, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no loss reported in 10s")
	}
}

func (w *watched) wantHeld(t testing.TB) {
	t.Helper()
	select {
	case l := <-w.lost:
		t.Fatalf("loss %v reported, want none", l)
	default:
	}
}

// barrier returns once the tracker has handled every check queued and
// every invalidation sent before it: a watch of an absent key is reported
// gone by its first check, after the checks queued before it (one
// connection, replies in order); a push for a change made before the
// first such watch precedes that watch's reply, and the check it queues is
// answered before the second one's.
func barrier(t testing.TB, tr *track.Tracker) {
	t.Helper()
	for i := range 2 {
		b := watch(tr, fmt.Sprintf("absent-%d-%d", time.Now().UnixNano(), i))
		b.wantLost(t, track.Gone)
	}
}

// Every change that ends a hold is reported, with its cause; a change
// that leaves the hold's field ends nothing.
func TestWatch_causes(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTracker(t, s.Addr())
	hold := func(key string) *watched {
		t.Helper()
		if err := rdb.HSet(ctx, key, "f", 1).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.PExpire(ctx, key, time.Minute)
		w := watch(tr, key)
		barrier(t, tr) // its first check ran: the key is tracked
		w.wantHeld(t)
		return w
	}
	cases := []struct {
		name   string
		change func(key string)
		want   track.Loss
	}{
		{"del", func(k string) { rdb.Del(ctx, k) }, track.Gone},
		{"hdel", func(k string) { rdb.HDel(ctx, k, "f") }, track.Gone},
		{"expiry", func(k string) { rdb.PExpire(ctx, k, time.Millisecond) }, track.Gone},
		{"overwrite", func(k string) { rdb.Set(ctx, k, "x", 0) }, track.Overwritten},
		{"flushall", func(string) { rdb.FlushAll(ctx) }, track.Gone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := hold("k-" + c.name)
			c.change("k-" + c.name)
			w.wantLost(t, c.want)
		})
	}
	t.Run("renewal", func(t *testing.T) {
		w := hold("k-renewal")
		for range 3 {
			rdb.PExpire(ctx, "k-renewal", time.Minute) // the watchdog's renewal
			rdb.HIncrBy(ctx, "k-renewal", "f", 1)      // a re-entry
			rdb.HSet(ctx, "k-renewal", "other", 1)     // another reader
			barrier(t, tr)
		}
		w.wantHeld(t)
		w.w.Stop()
		rdb.Del(ctx, "k-renewal")
		barrier(t, tr)
		w.wantHeld(t) // stopped: nothing is reported
	})
}

// A change between the acquisition and the watch is seen by the first
// check.
func TestWatch_gap(t *testing.T) {
	s, _ := server(t)
	tr := newTracker(t, s.Addr())
	w := watch(tr, "never-set")
	w.wantLost(t, track.Gone)
}

// A broken tracking connection, and a restart that lost the key, make the
// tracker check every watch again when the server answers.
func TestWatch_reconnect(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTracker(t, s.Addr())
	rdb.HSet(ctx, "a", "f", 1)
	rdb.HSet(ctx, "b", "f", 1)
	a, b := watch(tr, "a"), watch(tr, "b")
	barrier(t, tr)
	// Killed connections: reconnect, check, nothing lost.
	if err := rdb.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	barrier(t, tr)
	a.wantHeld(t)
	b.wantHeld(t)
	// A restart loses both.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	a.wantLost(t, track.Gone)
	b.wantLost(t, track.Gone)
	if w, c := tr.Counts(); w != 0 || c != 1 {
		t.Errorf("Counts: %d watches, %d conns; want 0, 1", w, c)
	}
}

// A script flushed from the server is loaded again.
func TestWatch_noscript(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTracker(t, s.Addr())
	rdb.HSet(ctx, "a", "f", 1)
	a := watch(tr, "a")
	barrier(t, tr)
	rdb.ScriptFlush(ctx)
	rdb.HSet(ctx, "a", "g", 1)
	barrier(t, tr)
	a.wantHeld(t)
	rdb.Del(ctx, "a")
	a.wantLost(t, track.Gone)
}

// On a cluster, a watch placed on a node that does not serve its slot
// (a stale slot map, a migrated slot) follows the MOVED reply to the one
// that does, and is reported there.
func TestWatch_moved(t *testing.T) {
	cl, err := harness.StartClusterE(harness.ClusterOptions{})
	if err != nil {
		if os.Getenv("LUALOCK_REQUIRE_REDIS") == "" {
			t.Skipf("no cluster: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	rdb := cl.Client()
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	first := cl.Addrs()[0] // every key is placed here first
	tr := track.New(track.Dialer{
		Addr: func(context.Context, string) (string, error) { return first, nil },
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
	}, track.Config{Slot: keys.Slot})
	t.Cleanup(tr.Close)
	var ws []*watched
	for i := range 6 {
		key := fmt.Sprintf("moved-%d", i)
		rdb.HSet(ctx, key, "f", 1)
		ws = append(ws, watch(tr, key))
	}
	if _, conns := tr.Counts(); conns > 3 {
		t.Errorf("%d connections, want at most one per primary", conns)
	}
	for i, w := range ws {
		rdb.Del(ctx, fmt.Sprintf("moved-%d", i))
		w.wantLost(t, track.Gone)
	}
	if _, conns := tr.Counts(); conns < 2 {
		t.Errorf("%d connections: the keys never moved to their primaries", conns)
	}
}

// A change watch calls back after its first check and after every change
// of its key, a delete among them (it reports no loss and goes on), and
// not after Stop.
func TestWatchChange(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTracker(t, s.Addr())
	changed := make(chan struct{}, 16)
	w := tr.WatchChange(track.Target{Spec: check, Key: "k", Field: "mode"}, func() { changed <- struct{}{} })
	want := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no call in 10s", what)
		}
	}
	want("first check") // the key is tracked from here
	for _, c := range []struct {
		name   string
		change func()
	}{
		{"hset", func() { rdb.HSet(ctx, "k", "mode", "write") }},
		{"mode turned", func() { rdb.HSet(ctx, "k", "mode", "read") }},
		{"pexpire", func() { rdb.PExpire(ctx, "k", time.Minute) }},
		{"del", func() { rdb.Del(ctx, "k") }},
		{"hset after del", func() { rdb.HSet(ctx, "k", "mode", "write") }},
	} {
		c.change()
		want(c.name)
	}
	if n, _ := tr.Counts(); n != 0 {
		t.Errorf("Counts: %d watches, want 0 (change watches aside)", n)
	}
	w.Stop()
	rdb.HSet(ctx, "k", "mode", "read")
	barrier(t, tr) // the push of that change was handled
	select {
	case <-changed:
		t.Fatal("called after Stop")
	default:
	}
}

// A Watch added again after Stop watches the new hold only: a check sent
// for an earlier add (which may find the key absent) is not reported for
// the later one, and each loss comes with its add's tag.
func TestAdd_reuse(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTracker(t, s.Addr())
	type loss struct {
		tag uint64
		how track.Loss
	}
	lost := make(chan loss, 4)
	report := func(tag uint64, how track.Loss) { lost <- loss{tag, how} }
	var w track.Watch
	target := track.Target{Spec: check, Key: "reused", Field: "f"}
	tag := uint64(0)
	for range 20 {
		// The earlier hold's key is gone when its check runs; the next
		// hold's key exists by the time the next add is made.
		rdb.Del(ctx, "reused")
		tag++
		if !tr.Add(&w, target, tag, report) {
			t.Fatal("Add returned false before Close")
		}
		w.Stop()
		if err := rdb.HSet(ctx, "reused", "f", 1).Err(); err != nil {
			t.Fatal(err)
		}
		tag++
		if !tr.Add(&w, target, tag, report) {
			t.Fatal("Add returned false before Close")
		}
		barrier(t, tr)
		for len(lost) > 0 {
			// The earlier add's first check may find its key gone before
			// its Stop (a loss of that add, legitimately reported): only
			// a loss of the add watching the held key is wrong.
			if l := <-lost; l.tag != tag-1 || l.how != track.Gone {
				t.Fatalf("loss %v of add %d reported while add %d watches a held key", l.how, l.tag, tag)
			}
		}
		w.Stop()
	}
	if !tr.Add(&w, target, tag+1, report) {
		t.Fatal("Add returned false before Close")
	}
	barrier(t, tr)
	for len(lost) > 0 {
		if l := <-lost; l.tag != tag-1 || l.how != track.Gone {
			t.Fatalf("loss %v of add %d reported while add %d watches a held key", l.how, l.tag, tag+1)
		}
	}
	rdb.Del(ctx, "reused")
	select {
	case l := <-lost:
		if l != (loss{tag + 1, track.Gone}) {
			t.Fatalf("loss %+v, want {tag:%d how:Gone}", l, tag+1)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no loss reported in 10s")
	}
	barrier(t, tr)
	if len(lost) != 0 {
		t.Fatalf("%d more losses reported, want one", len(lost))
	}
}
