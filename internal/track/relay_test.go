package track_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/track"
	"github.com/lualock/lualock/tests/harness"
)

var renewScript = &track.Spec{Name: "lock_renew", SHA1: generated.LockRenewSHA1, Source: generated.LockRenewScript.Source}

// relayRenew relays a renewal of key's field f for a minute, with rearm
// as given, and returns its reply.
func relayRenew(t *testing.T, tr *track.Tracker, key string, rearm bool) track.Reply {
	t.Helper()
	args := []string{"EVALSHA", generated.LockRenewSHA1, "1", key, "60000", map[bool]string{false: "0", true: "1"}[rearm], "f"}
	ch, cancel := tr.Relay("", renewScript, args, []track.Target{{Spec: check, Key: key, Field: "f"}}, time.Minute)
	if ch == nil {
		t.Fatalf("Relay of %s: refused, with its watch's connection up", key)
	}
	select {
	case r := <-ch:
		if cancel() {
			t.Errorf("cancel of the relayed renewal of %s after its reply: withdrawn, want written", key)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no reply to the relayed renewal in 10s")
	}
	return track.Reply{}
}

// A renewal relayed on the tracking connection wakes no check of the
// key it renews (NOLOOP), and, its script reading the key again after
// its write (EXISTS), leaves the key tracked: a delete by another
// connection afterwards is heard. The server's PTTL calls count the
// checks of the held key (the barrier's keys are absent: their checks
// read no PTTL, and the renewal reads none).
func TestRelay_renewalWakesNothing(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTracker(t, s.Addr())
	rdb.HSet(ctx, "k", "f", 1)
	rdb.PExpire(ctx, "k", time.Minute)
	w := watch(tr, "k")
	barrier(t, tr)
	for i := range 3 {
		pttl, exists := harness.CommandCalls(t, rdb, "pttl"), harness.CommandCalls(t, rdb, "exists")
		if r := relayRenew(t, tr, "k", true); r.Err != nil || !slices.Equal(r.Val.([]any), []any{int64(1)}) {
			t.Fatalf("renewal %d: %v, %v; want [1]", i, r.Val, r.Err)
		}
		barrier(t, tr) // an invalidation the renewal sent would be checked by now
		if got := harness.CommandCalls(t, rdb, "pttl") - pttl; got != 0 {
			t.Fatalf("renewal %d: the held key was checked %d times after it, want 0", i, got)
		}
		if got := harness.CommandCalls(t, rdb, "exists") - exists; got != 1 {
			t.Fatalf("renewal %d: %d EXISTS, want 1 (its read after the write)", i, got)
		}
		w.wantHeld(t)
	}
	rdb.Del(ctx, "k")
	w.wantLost(t, track.Gone)
}

// Relay refuses a call for a key that no connection watches, and one
// after Close: its caller sends it itself. A connection that breaks
// before the reply answers ErrNoReply, or the call got its reply first.
func TestRelay_refused(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTracker(t, s.Addr())
	if ch, _ := tr.Relay("", renewScript, []string{"PING"}, []track.Target{{Spec: check, Key: "unwatched", Field: "f"}}, time.Minute); ch != nil {
		t.Error("Relay for a key no connection watches: sent, want refused")
	}
	rdb.HSet(ctx, "k", "f", 1)
	watch(tr, "k")
	barrier(t, tr)
	// A call that blocks the server's reply past a killed connection.
	ch, _ := tr.Relay("", renewScript, []string{"BLPOP", "nothing", "5"}, []track.Target{{Spec: check, Key: "k", Field: "f"}}, time.Minute)
	if ch == nil {
		t.Fatal("Relay refused with the connection up")
	}
	backendsWait(t, func() bool {
		n, _ := rdb.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Result()
		return n > 0
	})
	select {
	case r := <-ch:
		if !errors.Is(r.Err, track.ErrNoReply) {
			t.Errorf("reply after the connection broke: %v, %v; want ErrNoReply", r.Val, r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10s after the connection broke")
	}
	tr.Close()
	if ch, _ := tr.Relay("", renewScript, []string{"PING"}, []track.Target{{Spec: check, Key: "k", Field: "f"}}, time.Minute); ch != nil {
		t.Error("Relay after Close: sent, want refused")
	}
}

// backendsWait polls cond for up to 10s.
func backendsWait(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A relayed call larger than the writer's buffer, made after the link
// was idle longer than Timeout, is written and answered on the same
// connection: the write deadline is set before the write, not left from
// the last flush.
func TestRelay_bigCallAfterIdle(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	const timeout = 200 * time.Millisecond
	tr := newTrackerWith(t, s.Addr(), track.Config{Ping: time.Hour, Timeout: timeout})
	rdb.HSet(ctx, "k", "f", 1)
	rdb.PExpire(ctx, "k", time.Minute)
	w := watch(tr, "k")
	barrier(t, tr)
	received := connectionsReceived(t, rdb)
	time.Sleep(3 * timeout) // idle: the last flush's deadline is past
	big := strings.Repeat("x", 16<<10)
	ch, _ := tr.Relay("", renewScript, []string{"ECHO", big}, []track.Target{{Spec: check, Key: "k", Field: "f"}}, time.Minute)
	if ch == nil {
		t.Fatal("Relay refused with the connection up")
	}
	select {
	case r := <-ch:
		if r.Err != nil || r.Val != big {
			t.Fatalf("reply to the big call: %.20v, %v; want its echo", r.Val, r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply to the big call in 10s")
	}
	barrier(t, tr)
	if got := connectionsReceived(t, rdb); got != received {
		t.Errorf("connections received went from %d to %d: the tracking connection was replaced", received, got)
	}
	w.wantHeld(t)
}

// connectionsReceived is the server's total_connections_received.
func connectionsReceived(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	s, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}
