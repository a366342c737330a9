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

// renewal returns the call that renews the field f of keys for lease,
// with rearm, and its targets.
func renewal(lease time.Duration, keys ...string) (args []string, targets []track.Target) {
	args = append([]string{"EVALSHA", generated.LockRenewSHA1, strconv.Itoa(len(keys))}, keys...)
	args = append(args, strconv.FormatInt(lease.Milliseconds(), 10), "1")
	targets = make([]track.Target, len(keys))
	for i, k := range keys {
		args = append(args, "f")
		targets[i] = track.Target{Spec: check, Key: k, Field: "f"}
	}
	return args, targets
}

// relayRenew relays a renewal of the field f of keys for a minute, with
// rearm, and returns its reply.
func relayRenew(t testing.TB, tr *track.Tracker, keys ...string) track.Reply {
	t.Helper()
	args, targets := renewal(time.Minute, keys...)
	ch, cancel := tr.Relay("", renewScript, args, targets, time.Minute)
	if ch == nil {
		t.Fatalf("Relay of %s: refused, with its watch's connection up", keys)
	}
	select {
	case r := <-ch:
		if cancel() {
			t.Errorf("cancel of the relayed renewal of %s after its reply: withdrawn, want written", keys)
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
// connection afterwards is heard. The server's PTTL calls
// count the checks of the held key (the barrier's keys are absent: their
// checks read no PTTL, and the renewal reads none).
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
		if r := relayRenew(t, tr, "k"); r.Err != nil || !slices.Equal(r.Val.([]any), []any{int64(1)}) {
			t.Fatalf("renewal %d: %v, %v; want [1]", i, r.Val, r.Err)
		}
		if got := harness.CommandCalls(t, rdb, "exists") - exists; got != 1 {
			t.Fatalf("renewal %d: %d EXISTS, want 1 (its read after the write)", i, got)
		}
		barrier(t, tr) // an invalidation the renewal sent would be checked by now
		if got := harness.CommandCalls(t, rdb, "pttl") - pttl; got != 0 {
			t.Fatalf("renewal %d: the held key was checked %d times after it, want 0", i, got)
		}
		w.wantHeld(t)
	}
	rdb.Del(ctx, "k")
	w.wantLost(t, track.Gone)
}

// Holds checked and renewed many at a time (more than a call tracks by
// its own reads: their keys are tracked apart, by an EXISTS before the
// check and one after the renewal in its MULTI) stay tracked: the
// renewals wake no check, and a delete or write of any of them afterwards
// is heard.
func TestRelay_manyKeysStayTracked(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	tr := newTrackerWith(t, s.Addr(), track.Config{Ping: 200 * time.Millisecond, Gather: time.Second})
	const n = 40
	keys := make([]string, n)
	ws := make([]*watched, n)
	for i := range keys {
		keys[i] = "many-" + strconv.Itoa(i)
		rdb.HSet(ctx, keys[i], "f", 1)
		rdb.PExpire(ctx, keys[i], time.Minute)
	}
	for i := range keys {
		ws[i] = watch(tr, keys[i]) // one first check for all (Gather)
	}
	barrier(t, tr)
	// The barrier's watches are added after the holds', within the same
	// Gather: the check that carries them all (more than armApart keys)
	// tracks them apart, with an EXISTS.
	if got := harness.CommandCalls(t, rdb, "exists"); got == 0 {
		t.Fatalf("no EXISTS: the first check of %d holds added together did not track them apart", n)
	}
	multi := harness.CommandCalls(t, rdb, "multi")
	for round := range 3 {
		pttl := harness.CommandCalls(t, rdb, "pttl")
		r := relayRenew(t, tr, keys...)
		if r.Err != nil || len(r.Val.([]any)) != n {
			t.Fatalf("renewal %d: %v, %v; want %d ones", round, r.Val, r.Err, n)
		}
		barrier(t, tr)
		if got := harness.CommandCalls(t, rdb, "pttl") - pttl; got != 0 {
			t.Fatalf("renewal %d: the held keys were checked %d times after it, want 0", round, got)
		}
	}
	if got := harness.CommandCalls(t, rdb, "multi") - multi; got != 3 {
		t.Fatalf("%d MULTIs for 3 renewals of %d keys, want one each", got, n)
	}
	for _, w := range ws {
		w.wantHeld(t)
	}
	rdb.Del(ctx, keys[0], keys[n-1])
	ws[0].wantLost(t, track.Gone)
	ws[n-1].wantLost(t, track.Gone)
	rdb.HDel(ctx, keys[7], "f")
	ws[7].wantLost(t, track.Gone)
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
	// Writes paused, the call (a script) gets no reply before the
	// connection is killed.
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "10000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Do(ctx, "CLIENT", "UNPAUSE")
	ch, _ := tr.Relay("", renewScript, []string{"EVALSHA", generated.LockRenewSHA1, "1", "k", "60000", "1", "f"}, []track.Target{{Spec: check, Key: "k", Field: "f"}}, time.Minute)
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
