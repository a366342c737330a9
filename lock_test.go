package lualock_test

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/harness"
)

// Unit tests of the reentrant lock on miniredis: bad input, use after
// Close, options, and what needs a clock the test drives. miniredis's clock
// stands still here unless the test calls FastForward, so Redis-side leases
// are exact; the lock's own Go timers (watchdog, fixed-lease expiry) still
// follow real time. The scenarios on real servers are in ../tests.
//
// Helpers of this file start with lk, apart from those of the fair lock's
// tests in the same package.

// lkMini starts a miniredis with a client on it; the test's cleanup stops
// both.
func lkMini(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// lkClient returns a lualock client on rdb, closed by the test's cleanup.
func lkClient(t *testing.T, rdb redis.UniversalClient, o lualock.Options) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lkState is what a test compares to show that a call changed nothing: the
// data set and the number of commands miniredis received.
type lkState struct {
	dump     string
	commands int
}

func lkSnapshot(mr *miniredis.Miniredis) lkState {
	return lkState{dump: mr.Dump(), commands: mr.CommandCount()}
}

// lkSettled waits until the latches of the releases made so far are
// deleted (in the background, see Options.UnlockLatch), so that their
// deletion does not land between two snapshots.
func lkSettled(t *testing.T, mr *miniredis.Miniredis) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		latch := false
		for _, k := range mr.Keys() {
			latch = latch || strings.HasPrefix(k, "redisson_unlock_latch:")
		}
		if !latch {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("latches still in Redis after 2s: %q", mr.Keys())
		}
		time.Sleep(time.Millisecond)
	}
}

// lkCalls runs every method of l that reaches Redis and returns each one's
// error by name.
func lkCalls(ctx context.Context, l *lualock.Lock) map[string]error {
	errs := map[string]error{}
	errs["Lock"] = l.Lock(ctx)
	errs["LockLease"] = l.LockLease(ctx, time.Second)
	errs["TryLock"] = l.TryLock(ctx, 0)
	errs["TryLock(wait)"] = l.TryLock(ctx, 50*time.Millisecond)
	errs["TryLockLease"] = l.TryLockLease(ctx, 0, time.Second)
	errs["Unlock"] = l.Unlock(ctx)
	_, errs["ForceUnlock"] = l.ForceUnlock(ctx)
	_, errs["Status"] = l.Status(ctx)
	_, errs["IsLocked"] = l.IsLocked(ctx)
	_, errs["IsHeld"] = l.IsHeld(ctx)
	_, errs["HoldCount"] = l.HoldCount(ctx)
	_, errs["RemainingLease"] = l.RemainingLease(ctx)
	return errs
}

func TestClient_New_ring(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	c, err := lualock.New(ring, lualock.Options{})
	if !errors.Is(err, lualock.ErrInvalid) || c != nil {
		t.Fatalf("New(*redis.Ring) = %v, %v; want ErrInvalid: a Ring's pub/sub binds to one shard", c, err)
	}
}

func TestOptions_New_invalid(t *testing.T) {
	mr, rdb := lkMini(t)
	for _, tc := range []struct {
		field string
		opts  lualock.Options
	}{
		{"WatchdogLease", lualock.Options{WatchdogLease: -time.Second}},
		{"WatchdogLease", lualock.Options{WatchdogLease: time.Millisecond}}, // renewals every 0.33ms
		{"FairWait", lualock.Options{FairWait: -time.Second}},
		{"MaxWaitTimer", lualock.Options{MaxWaitTimer: -time.Second}},
		{"UnlockLatch", lualock.Options{UnlockLatch: -time.Second}},
		{"UnlockLatch", lualock.Options{UnlockLatch: time.Microsecond}}, // latch_ms would be 0
		{"FairWait", lualock.Options{FairWait: 100 * time.Millisecond}}, // under 2 x the 250ms floor
		{"RetryMin", lualock.Options{RetryMin: -time.Millisecond}},
		{"RetryMax", lualock.Options{RetryMax: -time.Millisecond}},
		{"RenewBatch", lualock.Options{RenewBatch: -1}},
		{"PubSub", lualock.Options{PubSub: lualock.PubSubBoth + 1}},
		{"PubSub", lualock.Options{PubSub: -1}},
		{"ReplySpin", lualock.Options{ReplySpin: 2 * time.Millisecond}},
	} {
		c, err := lualock.New(rdb, tc.opts)
		if !errors.Is(err, lualock.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", tc.opts, err)
		} else if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New(%+v) = %q, want the error to name %s", tc.opts, err, tc.field)
		}
		if c != nil {
			t.Errorf("New(%+v) returned a client with its error", tc.opts)
			_ = c.Close()
		}
	}
	if n := mr.CommandCount(); n != 0 {
		t.Errorf("New sent %d commands, want none", n)
	}
}

func TestOptions_New_valid(t *testing.T) {
	mr, rdb := lkMini(t)
	for _, o := range []lualock.Options{
		{},
		{WatchdogLease: 3 * time.Millisecond},
		{RetryMin: time.Second, RetryMax: time.Millisecond}, // RetryMax is raised to RetryMin
		{SubscriptionLinger: -1},                            // never linger
		{ReplySpin: -1},                                     // never spin
		{ReplySpin: time.Millisecond},
		{RenewBatch: 1, FairWait: time.Second, MaxWaitTimer: time.Second, UnlockLatch: time.Second},
	} {
		c, err := lualock.New(rdb, o)
		if err != nil {
			t.Errorf("New(%+v): %v", o, err)
			continue
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if n := mr.CommandCount(); n != 0 {
		t.Errorf("New and Close sent %d commands, want none", n)
	}
}

var lkUUID4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestOptions_New_defaults(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	lose := &lkLoseReply{sha: generated.LockReleaseSHA1}
	rdb.AddHook(lose)
	c := lkClient(t, rdb, lualock.Options{})
	c2 := lkClient(t, rdb, lualock.Options{})
	if !lkUUID4.MatchString(c.ID()) {
		t.Errorf("default client id %q is not a UUID v4", c.ID())
	}
	if c.ID() == c2.ID() {
		t.Errorf("two clients share the id %q", c.ID())
	}

	l := c.NewLock("defaults")
	for range 2 {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
	}
	// WatchdogLease: 30s, exactly, on a clock that stands still.
	if d := mr.TTL("defaults"); d != 30*time.Second {
		t.Errorf("lease of Lock = %v, want the default WatchdogLease 30s", d)
	}
	fields, _ := mr.HKeys("defaults")
	if len(fields) != 1 || !strings.HasPrefix(fields[0], c.ID()+":") {
		t.Errorf("owner fields %q, want one of the form %s:<holder id>", fields, c.ID())
	}
	// A release that leaves holds behind writes no unlock latch: its resend
	// finds the count one lower and replays "holds remain".
	lose.left.Store(1000) // every reply, past the generated layer's retries
	err := l.Unlock(ctx)
	lose.left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Unlock with its reply lost = %v, want io.EOF", err)
	}
	if latches := lkLatches(mr, "redisson_unlock_latch:{defaults}:"); len(latches) != 0 {
		t.Fatalf("latch keys %q after a release that leaves a hold, want none", latches)
	}
	if d := mr.TTL("defaults"); d != 30*time.Second {
		t.Errorf("lease after a partial Unlock = %v, want 30s", d)
	}
	if err := l.Unlock(ctx); err != nil { // replays the lost one
		t.Fatalf("Unlock: %v", err)
	}
	// UnlockLatch: the outcome of a last release whose reply is lost is
	// kept 10s. (A release that gets its reply has its latch deleted.)
	lose.left.Store(1000)
	err = l.Unlock(ctx)
	lose.left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("last Unlock with its reply lost = %v, want io.EOF", err)
	}
	latches := lkLatches(mr, "redisson_unlock_latch:{defaults}:")
	if len(latches) != 1 {
		t.Fatalf("latch keys %q, want one", latches)
	}
	if d := mr.TTL(latches[0]); d != 10*time.Second {
		t.Errorf("latch TTL = %v, want the default UnlockLatch 10s", d)
	}
	if err := l.Unlock(ctx); err != nil { // replays the lost last release
		t.Fatalf("Unlock: %v", err)
	}
}

// lkLatches lists the keys of mr that start with prefix.
func lkLatches(mr *miniredis.Miniredis, prefix string) []string {
	var latches []string
	for _, k := range mr.Keys() {
		if strings.HasPrefix(k, prefix) {
			latches = append(latches, k)
		}
	}
	return latches
}

// lkLoseReply is a go-redis hook that lets the next left calls of one
// script run and then reports io.EOF, as if the reply had been lost.
type lkLoseReply struct {
	sha  string
	left atomic.Int32
}

func (h *lkLoseReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lkLoseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *lkLoseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); len(a) > 1 && a[1] == h.sha && (err == nil || errors.Is(err, redis.Nil)) && h.left.Add(-1) >= 0 {
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return err
	}
}

func TestOptions_New_clientID(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	lose := &lkLoseReply{sha: generated.LockReleaseSHA1}
	rdb.AddHook(lose)
	c := lkClient(t, rdb, lualock.Options{ClientID: "orders-7", WatchdogLease: 5 * time.Second, UnlockLatch: 2 * time.Second})
	if c.ID() != "orders-7" {
		t.Errorf("ID() = %q, want orders-7", c.ID())
	}
	l := c.NewLock("withid")
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if fields, _ := mr.HKeys("withid"); len(fields) != 1 || !regexp.MustCompile(`^orders-7:\d+$`).MatchString(fields[0]) {
		t.Errorf("owner fields %q, want orders-7:<holder id>", fields)
	}
	if d := mr.TTL("withid"); d != 5*time.Second {
		t.Errorf("lease = %v, want WatchdogLease 5s", d)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil { // the first of two holds
		t.Fatalf("Unlock: %v", err)
	}
	lose.left.Store(1000) // every reply, past the generated layer's retries
	err := l.Unlock(ctx)
	lose.left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("last Unlock with its reply lost = %v, want io.EOF", err)
	}
	latches := lkLatches(mr, "redisson_unlock_latch:")
	for _, k := range latches {
		if d := mr.TTL(k); d != 2*time.Second {
			t.Errorf("latch %s TTL = %v, want UnlockLatch 2s", k, d)
		}
	}
	if len(latches) != 1 {
		t.Errorf("%d latches after a last release with a lost reply, want 1", len(latches))
	}
	if err := l.Unlock(ctx); err != nil { // replays the lost one
		t.Fatalf("Unlock: %v", err)
	}
}

func TestClient_New_nilClient(t *testing.T) {
	c, err := lualock.New(nil, lualock.Options{})
	if !errors.Is(err, lualock.ErrInvalid) || c != nil {
		t.Errorf("New(nil) = %v, %v; want nil, ErrInvalid", c, err)
	}
	// A nil *redis.Client in the interface is nil to the caller as well; it
	// would panic at the first call.
	var typed *redis.Client
	c, err = lualock.New(typed, lualock.Options{})
	if !errors.Is(err, lualock.ErrInvalid) || c != nil {
		t.Errorf("New((*redis.Client)(nil)) = %v, %v; want nil, ErrInvalid", c, err)
	}
	if c != nil {
		_ = c.Close()
	}
}

func TestLock_Lock_invalidName(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{})
	// Empty, too long, and braces without a hash tag (the lock and its other
	// keys would land in different cluster slots).
	for _, name := range []string{"", strings.Repeat("n", 64<<10+1), "a{b", "a}b", "a{}b", "}x{"} {
		before := lkSnapshot(mr)
		l := c.NewLock(name)
		for call, err := range lkCalls(ctx, l) {
			if !errors.Is(err, lualock.ErrInvalid) {
				t.Errorf("%s on a %d-byte name = %v, want ErrInvalid", call, len(name), err)
			}
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrNotHeld) {
			t.Errorf("Context of a handle with a bad name: cause %v, want ErrNotHeld", cause)
		}
		if after := lkSnapshot(mr); after != before {
			t.Errorf("calls on a %d-byte name reached Redis: %d commands, data %q -> %q",
				len(name), after.commands-before.commands, before.dump, after.dump)
		}
	}
	// 64 KiB is the longest name allowed.
	l := c.NewLock(strings.Repeat("n", 64<<10))
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock on a 64 KiB name: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on a 64 KiB name: %v", err)
	}
}

func TestLock_LockLease_invalidLease(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	// No hold tracker: miniredis refuses client-side caching, and the
	// tracker's one attempt (HELLO, CLIENT TRACKING), made in the
	// background after the first hold, could land between the snapshots.
	c := lkClient(t, rdb, lualock.Options{NoHoldTracking: true})
	holder := c.NewLock("lease")
	if err := holder.LockLease(ctx, time.Minute); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	other := c.NewLock("lease")
	before := lkSnapshot(mr)
	for _, lease := range []time.Duration{0, -time.Second, time.Millisecond - 1} {
		for _, l := range []*lualock.Lock{holder, other} { // a re-entry and a first acquisition
			if err := l.LockLease(ctx, lease); !errors.Is(err, lualock.ErrInvalid) {
				t.Errorf("LockLease(%v) = %v, want ErrInvalid", lease, err)
			}
			if err := l.TryLockLease(ctx, time.Second, lease); !errors.Is(err, lualock.ErrInvalid) {
				t.Errorf("TryLockLease(1s, %v) = %v, want ErrInvalid", lease, err)
			}
		}
	}
	if after := lkSnapshot(mr); after != before {
		t.Errorf("bad leases reached Redis: %d commands, data %q -> %q", after.commands-before.commands, before.dump, after.dump)
	}
	if n, err := holder.HoldCount(ctx); err != nil || n != 1 {
		t.Errorf("holder's HoldCount = %d, %v; want 1", n, err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

func TestLock_TryLock_negativeWait(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{})
	l := c.NewLock("wait")
	before := lkSnapshot(mr)
	if err := l.TryLock(ctx, -time.Nanosecond); !errors.Is(err, lualock.ErrInvalid) {
		t.Errorf("TryLock(-1ns) = %v, want ErrInvalid", err)
	}
	if err := l.TryLockLease(ctx, -time.Second, time.Second); !errors.Is(err, lualock.ErrInvalid) {
		t.Errorf("TryLockLease(-1s, 1s) = %v, want ErrInvalid", err)
	}
	if after := lkSnapshot(mr); after != before {
		t.Errorf("negative waits reached Redis: %d commands", after.commands-before.commands)
	}
}

func TestLock_Unlock_notLocked(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	// No hold tracker: miniredis refuses client-side caching, and the
	// tracker's one attempt (HELLO, CLIENT TRACKING), made in the
	// background after the first hold, could land between the snapshots.
	c := lkClient(t, rdb, lualock.Options{NoHoldTracking: true})
	l := c.NewLock("never")
	before := lkSnapshot(mr)
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock without Lock = %v, want ErrNotHeld", err)
	}
	if after := lkSnapshot(mr); after != before {
		t.Errorf("Unlock without Lock reached Redis: %d commands", after.commands-before.commands)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	lkSettled(t, mr)
	before = lkSnapshot(mr)
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}
	if after := lkSnapshot(mr); after != before {
		t.Errorf("second Unlock reached Redis: %d commands, data %q -> %q", after.commands-before.commands, before.dump, after.dump)
	}
}

func TestClient_Close_useAfterClose(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	c, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	watched, leased, idle := c.NewLock("watched"), c.NewLock("leased"), c.NewLock("idle")
	if err := watched.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := leased.LockLease(ctx, time.Minute); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	// A waiter blocked in Lock is woken by Close.
	waiter := make(chan error, 1)
	go func() { waiter <- c.NewLock("watched").Lock(ctx) }()
	for c.Stats().Waiters == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-waiter:
		if !errors.Is(err, lualock.ErrClosed) {
			t.Errorf("waiter's Lock after Close = %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Close did not wake the waiter")
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if s := c.Stats(); s != (lualock.Stats{}) {
		t.Errorf("Stats after Close = %+v, want all zero", s)
	}

	before := lkSnapshot(mr)
	for _, l := range []*lualock.Lock{watched, leased, idle, c.NewLock("new")} {
		for call, err := range lkCalls(ctx, l) {
			if !errors.Is(err, lualock.ErrClosed) {
				t.Errorf("%s on %q after Close = %v, want ErrClosed", call, l.Name(), err)
			}
		}
	}
	if after := lkSnapshot(mr); after != before {
		t.Errorf("calls after Close reached Redis: %d commands, data %q -> %q", after.commands-before.commands, before.dump, after.dump)
	}
	// Close leaves the locks to expire in Redis.
	if d := mr.TTL("watched"); d <= 0 {
		t.Errorf("watched lock's TTL after Close = %v, want it left to expire", d)
	}
	if d := mr.TTL("leased"); d != time.Minute {
		t.Errorf("leased lock's TTL after Close = %v, want 1m", d)
	}
	// The watched hold's Context ends with ErrClosed: nothing renews it any
	// more. The leased hold stays valid until its lease runs out (see Close
	// and Context).
	select {
	case <-watched.Done():
		if cause := context.Cause(watched.Context()); !errors.Is(cause, lualock.ErrClosed) {
			t.Errorf("watched: cause after Close = %v, want ErrClosed", cause)
		}
	case <-time.After(time.Second):
		t.Error("watched: the hold's Context was not cancelled by Close")
	}
	select {
	case <-leased.Done():
		t.Errorf("leased: the hold's Context ended at Close (cause %v), want it to last the lease", context.Cause(leased.Context()))
	default:
	}
}

func TestLock_RemainingLease_fastForward(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{})
	l, other := c.NewLock("ff"), c.NewLock("ff")
	expect := func(want time.Duration) {
		t.Helper()
		d, err := other.RemainingLease(ctx)
		if err != nil || d != want {
			t.Fatalf("RemainingLease = %v, %v; want %v", d, err, want)
		}
	}
	if err := l.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	expect(10 * time.Second)
	mr.FastForward(4 * time.Second)
	expect(6 * time.Second)
	if err := l.LockLease(ctx, 10*time.Second); err != nil { // a re-entry sets the lease again
		t.Fatalf("re-entry: %v", err)
	}
	expect(10 * time.Second)
	mr.FastForward(3 * time.Second)
	expect(7 * time.Second)
	if err := l.Unlock(ctx); err != nil { // so does a partial release
		t.Fatalf("Unlock: %v", err)
	}
	expect(10 * time.Second)
	if err := l.Lock(ctx); err != nil { // and a re-entry without lease: the watchdog's
		t.Fatalf("re-entry with the watchdog: %v", err)
	}
	expect(30 * time.Second)
	for range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	if d, err := other.RemainingLease(ctx); !errors.Is(err, lualock.ErrNotLocked) {
		t.Errorf("RemainingLease after the last Unlock = %v, %v; want ErrNotLocked", d, err)
	}

	// A lock set without an expiry by some other tool.
	mr.HSet("ff", "8f14e45f-ceea-467a-9575-d0b1a5d3e7b1:1", "1")
	if d, err := other.RemainingLease(ctx); err != nil || d != lualock.NoExpiry {
		t.Errorf("RemainingLease of a lock without expiry = %v, %v; want NoExpiry", d, err)
	}
	if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock on a foreign lock without expiry = %v, want ErrNotObtained", err)
	}
}

func TestLock_LockLease_expiredInRedis(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{})
	holder, next := c.NewLock("expire"), c.NewLock("expire")
	if err := holder.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	if err := next.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock while held = %v, want ErrNotObtained", err)
	}
	mr.FastForward(10 * time.Second) // the lease runs out in Redis (the Go timer has not fired)
	if err := next.TryLock(ctx, 0); err != nil {
		t.Fatalf("TryLock after the lease ran out: %v", err)
	}
	// The old holder's re-entry finds its hold gone: it is lost, and the new
	// owner's hold is untouched.
	if err := holder.LockLease(ctx, 10*time.Second); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("re-entry after the lease ran out = %v, want ErrLockLost", err)
	}
	if cause := context.Cause(holder.Context()); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("old holder's cause = %v, want ErrLockLost", cause)
	}
	if err := holder.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("old holder's Unlock = %v, want ErrLockLost", err)
	}
	if n, err := next.HoldCount(ctx); err != nil || n != 1 {
		t.Errorf("new owner's HoldCount = %d, %v; want 1", n, err)
	}
	if err := holder.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("old holder's TryLock = %v, want ErrNotObtained", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	// A holder that unlocks after its lease ran out gets ErrNotHeld.
	if err := holder.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	mr.FastForward(10 * time.Second)
	if err := holder.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
	}
	if keys := mr.Keys(); len(keys) != 0 && !strings.HasPrefix(keys[0], "redisson_unlock_latch:") {
		t.Errorf("keys left: %q", keys)
	}
}

// TestLock_Context_lostWhenExpired: a hold whose key expires in Redis
// before a renewal (miniredis's clock jumps) ends, with ErrLockLost, at
// the first renewal after the expiry: the renewal finds it gone. Judged by
// order (the end's reason and the renewals counted since the jump), not by
// wall time; the 3 s lease keeps a starved process's own lease timer from
// ending the hold first.
func TestLock_Context_lostWhenExpired(t *testing.T) {
	ctx := t.Context()
	const lease = 3 * time.Second
	var renewals atomic.Int64
	ends := make(chan lualock.EndReason, 4)
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{WatchdogLease: lease, Observer: lualock.Observer{
		Renew: func(lualock.RenewEvent) { renewals.Add(1) },
		HoldEnd: func(e lualock.HoldEndEvent) {
			select {
			case ends <- e.Reason:
			default:
			}
		},
	}})
	l := c.NewLock("expires")
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := l.Context()
	before := renewals.Load()
	mr.FastForward(lease) // Redis's clock jumps past the lease before a renewal
	select {
	case <-hold.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done did not fire after the lock expired in Redis")
	}
	// One renewal may have been in flight at the jump and renewed the
	// hold; the next one finds it gone.
	if n := renewals.Load() - before; n > 2 {
		t.Errorf("the hold ended after %d renewals since the expiry, want the first after it (one more may have been in flight)", n)
	}
	select {
	case r := <-ends:
		if r != lualock.LostGone {
			t.Errorf("the hold ended with %v, want LostGone (a renewal found it gone)", r)
		}
	case <-time.After(5 * time.Second):
		t.Error("no HoldEnd event for the lost hold")
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("cause = %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock = %v, want ErrLockLost", err)
	}
	if err := l.TryLock(ctx, 0); err != nil {
		t.Errorf("TryLock after the loss was reported: %v", err)
	} else if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// TestLock_Unlock_deletedBeforeRenewal: a hold under the watchdog whose key
// is deleted from outside, with Unlock coming before the next renewal,
// reports ErrLockLost (from Unlock and as the Context's cause), not
// ErrNotHeld: such a hold can only be gone because it was taken away.
func TestLock_Unlock_deletedBeforeRenewal(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{}) // renewals every 10s: none in this test
	l := c.NewLock("deleted")
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := l.Context()
	mr.Del("deleted")
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) || errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock of a deleted watchdog hold = %v, want ErrLockLost", err)
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("Context cause = %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("second Unlock = %v, want ErrNotHeld", err)
	}
	// A fixed lease that ran out is not a loss: ErrNotHeld.
	if err := l.LockLease(ctx, time.Minute); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	mr.FastForward(time.Minute)
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock after the fixed lease ran out = %v, want ErrNotHeld", err)
	}
}

// TestClient_Close_concurrent: a second Close that runs while the first is
// stopping the client returns only once the client is stopped: the
// watchdog has ended the holds it renewed (their Context is cancelled with
// ErrClosed) and the listener is gone. Waiters are woken with ErrClosed.
func TestClient_Close_concurrent(t *testing.T) {
	ctx := t.Context()
	_, rdb := lkMini(t)
	c, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	holder, waiter := c.NewLock("closing"), c.NewLock("closing")
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := holder.Context()
	waiting := make(chan error, 1)
	go func() { waiting <- waiter.Lock(ctx) }()
	for c.Stats().Waiters == 0 {
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- c.Close() }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case <-hold.Done():
		default:
			t.Fatal("a Close returned before the watchdog had ended the hold")
		}
		if s := c.Stats(); s.Watched != 0 || s.PubSubConns != 0 || s.Subscriptions != 0 {
			t.Errorf("Stats after Close returned = %+v, want nothing watched or subscribed", s)
		}
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrClosed) {
		t.Errorf("hold's cause = %v, want ErrClosed", cause)
	}
	if err := <-waiting; !errors.Is(err, lualock.ErrClosed) {
		t.Errorf("waiting Lock = %v, want ErrClosed", err)
	}
}

func TestLock_Lock_missedReleaseMaxWaitTimer(t *testing.T) {
	ctx := t.Context()
	const timer = 200 * time.Millisecond
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{MaxWaitTimer: timer})
	// A lock without expiry (a foreign tool's), deleted without a release
	// message: only the waiter's fallback timer can notice.
	mr.HSet("silent", "8f14e45f-ceea-467a-9575-d0b1a5d3e7b1:1", "1")
	canary := harness.StartCanary(t, 5*time.Millisecond, rdb)
	l := c.NewLock("silent")
	got := make(chan error, 1)
	go func() { got <- l.Lock(ctx) }()
	for c.Stats().Waiters == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	mr.Del("silent")
	start := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
	case <-time.After(5 * time.Second): // half the default timer's 10s
		t.Fatal("the waiter did not retry within 5s of a silent release")
	}
	took := time.Since(start)
	// The bound covers the fallback timer's wake-up, the retry's round
	// trip and this test's wake-up: the slack grows by what a canary
	// measured those cost in this run (a few ms on an idle machine), far
	// short of the 10s default timer a missing cap would wait.
	load := canary.Allowance(2, 1)
	t.Logf("acquired %v after a silent release (MaxWaitTimer %v, %v)", took, timer, canary)
	if took > timer+100*time.Millisecond+load {
		t.Errorf("acquired %v after a silent release, want within MaxWaitTimer %v + 100ms + %v for the load (%v)", took, timer, load, canary)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

func TestLock_Lock_expiringLeaseRetry(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{})
	holder, waiter := c.NewLock("expiring"), c.NewLock("expiring")
	if err := holder.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	for c.Stats().Waiters == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // asleep on its subscription
	// Wake the waiter when the lock has 1 ms left: it is told so.
	mr.FastForward(10*time.Second - time.Millisecond)
	sent := mr.CommandCount()
	mr.Publish("redisson_lock__channel:{expiring}", "0")
	for mr.CommandCount() == sent {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
	mr.FastForward(time.Millisecond) // the lease runs out, silently
	start := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter did not retry when the lease ran out")
	}
	took := time.Since(start)
	t.Logf("a waiter told the lease ends in 1ms acquired %v after it did", took)
	// Retrying after the remaining lease is no hot loop: the lease is over
	// then. Waiting the 50 ms retry floor instead adds 50 ms to every
	// hand-over by expiry whose retry lands in the lease's last millisecond
	// (Redis expires a key once its deadline has passed).
	if took > 25*time.Millisecond {
		t.Errorf("the waiter retried %v after the lease ran out, want about 1ms", took)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// lkGate is a go-redis hook that holds every EVALSHA while closed is set
// (pipelines of EVALSHA, the watchdog's renewals, while pipelines is set).
type lkGate struct {
	closed    atomic.Bool
	pipelines atomic.Bool
	entered   chan struct{}
	open      chan struct{}
}

func (g *lkGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *lkGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if g.pipelines.Load() && len(cmds) > 0 && cmds[0].Name() == "evalsha" {
			select {
			case g.entered <- struct{}{}:
			default:
			}
			select {
			case <-g.open:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmds)
	}
}
func (g *lkGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if g.closed.Load() && cmd.Name() == "evalsha" {
			g.entered <- struct{}{}
			<-g.open
		}
		return next(ctx, cmd)
	}
}

// A call on a handle whose previous call is still waiting for Redis gives
// up when its own context ends, and leaves the handle usable.
func TestLock_Unlock_busyHandleHonoursContext(t *testing.T) {
	ctx := t.Context()
	_, rdb := lkMini(t)
	gate := &lkGate{entered: make(chan struct{}, 1), open: make(chan struct{})}
	rdb.AddHook(gate)
	c := lkClient(t, rdb, lualock.Options{})
	l := c.NewLock("busy")
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	gate.closed.Store(true)
	first := make(chan error, 1)
	go func() { first <- l.Unlock(ctx) }()
	<-gate.entered // the first Unlock is in flight and holds the handle

	for name, call := range map[string]func(context.Context) error{
		"Unlock": l.Unlock,
		"Lock":   l.Lock,
		"ForceUnlock": func(ctx context.Context) error {
			_, err := l.ForceUnlock(ctx)
			return err
		},
	} {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := call(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on a busy handle = %v, want context.DeadlineExceeded", name, err)
		}
	}
	gate.closed.Store(false)
	close(gate.open)
	if err := <-first; err != nil {
		t.Fatalf("first Unlock: %v", err)
	}
	if held, err := l.IsLocked(ctx); err != nil || held {
		t.Fatalf("IsLocked after Unlock = %v, %v; want false", held, err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock after the busy spell: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// A renewal already sent when its hold is released must not stretch the
// fixed lease of the handle's next acquisition: the acquisition waits for
// it, and the lease in Redis is the one asked for.
func TestLock_LockLease_afterRenewalInFlight(t *testing.T) {
	ctx := t.Context()
	_, rdb := lkMini(t)
	gate := &lkGate{entered: make(chan struct{}, 1), open: make(chan struct{})}
	rdb.AddHook(gate)
	c := lkClient(t, rdb, lualock.Options{WatchdogLease: 3 * time.Second})
	l := c.NewLock("in-flight")
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	gate.pipelines.Store(true)
	select {
	case <-gate.entered: // the renewal round is sent and held
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal within 5s")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- l.LockLease(ctx, 500*time.Millisecond) }()
	select {
	case err := <-done:
		t.Fatalf("LockLease returned (%v) while a renewal of the handle was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	gate.pipelines.Store(false)
	close(gate.open)
	if err := <-done; err != nil {
		t.Fatalf("LockLease: %v", err)
	}
	pttl, err := rdb.PTTL(ctx, "in-flight").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 0 || pttl > 500*time.Millisecond {
		t.Errorf("PTTL after LockLease(500ms) = %v, want (0, 500ms]", pttl)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestLock_Lock_nilContext: every method that takes a context returns
// ErrInvalid for a nil one, without a panic and without reaching Redis, on
// reentrant and fair locks, held or not.
func TestLock_Lock_nilContext(t *testing.T) {
	ctx := t.Context()
	mr, rdb := lkMini(t)
	for _, kind := range []struct {
		name string
		new  func(*lualock.Client, string) *lualock.Lock
	}{{"reentrant", (*lualock.Client).NewLock}, {"fair", (*lualock.Client).NewFairLock}} {
		for _, held := range []bool{false, true} {
			// A client per case, closed at its end: Close sends the latch
			// deletions still pending, which must not land in the next
			// case's snapshot. No hold tracker: miniredis refuses
			// client-side caching, and the tracker's one attempt (HELLO,
			// CLIENT TRACKING), made in the background after the first
			// hold, could land between the snapshots.
			c, err := lualock.New(rdb, lualock.Options{NoHoldTracking: true})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			l := kind.new(c, "nil-ctx-"+kind.name)
			if held {
				if err := l.Lock(ctx); err != nil {
					t.Fatalf("%s: Lock: %v", kind.name, err)
				}
			}
			before := lkSnapshot(mr)
			//lint:ignore SA1012 a nil context is the bad input under test
			for call, err := range lkCalls(nil, l) {
				if !errors.Is(err, lualock.ErrInvalid) {
					t.Errorf("%s (held %v): %s(nil) = %v, want ErrInvalid", kind.name, held, call, err)
				}
			}
			if after := lkSnapshot(mr); after != before {
				t.Errorf("%s (held %v): calls with a nil context reached Redis: %d commands, data %q -> %q",
					kind.name, held, after.commands-before.commands, before.dump, after.dump)
			}
			if held {
				if n, err := l.HoldCount(ctx); err != nil || n != 1 {
					t.Errorf("%s: HoldCount after the nil-context calls = %d, %v; want 1", kind.name, n, err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("%s: Unlock: %v", kind.name, err)
				}
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	}
}
