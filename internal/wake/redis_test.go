package wake_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/wake"
)

// recorder is an Events that records what a transport reports.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Confirmed(channel string)    { r.add("confirmed " + channel) }
func (r *recorder) Resubscribed(channel string) { r.add("resubscribed " + channel) }
func (r *recorder) Message(channel string)      { r.add("message " + channel) }

func (r *recorder) count(e string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.events {
		if x == e {
			n++
		}
	}
	return n
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// TestPlain: the plain transport subscribes channels on one connection
// (opened with the first), reports each first confirmation once and every
// message, reports the confirmations go-redis gets when it reconnects as
// resubscriptions, stops hearing an unsubscribed channel, and Close stops
// its goroutines (goleak).
func TestPlain(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	tr := wake.Plain(rdb)
	var rec recorder
	tr.Start(&rec)
	if s, c := tr.Counts(); s != 0 || c != 0 {
		t.Errorf("Counts() = %d, %d before any Subscribe, want 0, 0 (nothing opened)", s, c)
	}
	tr.Subscribe("a")
	tr.Subscribe("b")
	eventually(t, "both confirmations", func() bool { return rec.count("confirmed a") == 1 && rec.count("confirmed b") == 1 })
	if s, c := tr.Counts(); s != 2 || c != 1 {
		t.Errorf("Counts() = %d, %d; want 2 subscriptions on 1 connection", s, c)
	}
	ctx := context.Background()
	rdb.Publish(ctx, "a", "0")
	rdb.Publish(ctx, "b", "0")
	eventually(t, "both messages", func() bool { return rec.count("message a") == 1 && rec.count("message b") == 1 })

	tr.Unsubscribe("b")
	eventually(t, "b unsubscribed on the server", func() bool { return len(mr.PubSubChannels("")) == 1 })
	rdb.Publish(ctx, "b", "0")
	rdb.Publish(ctx, "a", "0")
	eventually(t, "the second message on a", func() bool { return rec.count("message a") == 2 })
	if n := rec.count("message b"); n != 1 {
		t.Errorf("%d messages on b, want 1: it was unsubscribed", n)
	}

	// The server restarts: go-redis reconnects and subscribes a again.
	mr.Close()
	if err := mr.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	eventually(t, "a resubscribed after the restart", func() bool { return rec.count("resubscribed a") >= 1 }, rec.all)
	if n := rec.count("confirmed a"); n != 1 {
		t.Errorf("%d first confirmations of a, want 1 (the others are resubscriptions): %q", n, rec.all())
	}
	rdb.Publish(ctx, "a", "0")
	eventually(t, "a message on a after the restart", func() bool { return rec.count("message a") == 3 })

	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestSharded_standalone: the sharded transport on a client that is no
// cluster uses one connection, as the plain one (SSUBSCRIBE there is
// miniredis's gap, so only the bookkeeping is checked).
func TestSharded_standalone(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	tr := wake.Sharded(rdb)
	tr.Start(&recorder{})
	tr.Subscribe("a")
	tr.Subscribe("b")
	if s, c := tr.Counts(); s != 2 || c != 1 {
		t.Errorf("Counts() = %d, %d; want 2 subscriptions on 1 connection", s, c)
	}
	tr.Unsubscribe("a")
	if s, c := tr.Counts(); s != 1 || c != 1 {
		t.Errorf("Counts() = %d, %d after an Unsubscribe; want 1, 1", s, c)
	}
	if err := tr.Close(); err != nil {
		t.Logf("Close: %v", err) // miniredis refuses SSUBSCRIBE: the connection may be broken
	}
}
