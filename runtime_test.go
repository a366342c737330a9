package lualock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// rtRedisErr is a Redis error reply made up by a test.
type rtRedisErr string

func (e rtRedisErr) Error() string { return string(e) }
func (rtRedisErr) RedisError()     {}

// rtFaults is a go-redis hook that fails the first n calls of one script
// with err, without sending them, and counts the calls of each script
// (single and pipelined) by SHA1.
type rtFaults struct {
	sha string
	err error

	mu        sync.Mutex
	n         int
	failed    int
	calls     map[string]int
	pipelines [][]string // the script SHAs of each pipeline
}

func (f *rtFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func rtSHA(cmd redis.Cmder) string {
	if a := cmd.Args(); len(a) > 1 && strings.HasPrefix(cmd.Name(), "evalsha") {
		s, _ := a[1].(string)
		return s
	}
	return ""
}

func (f *rtFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sha := rtSHA(cmd)
		f.mu.Lock()
		if f.calls == nil {
			f.calls = map[string]int{}
		}
		f.calls[sha]++
		fail := sha != "" && sha == f.sha && f.failed < f.n
		if fail {
			f.failed++
		}
		f.mu.Unlock()
		if fail {
			cmd.SetErr(f.err)
			return f.err
		}
		return next(ctx, cmd)
	}
}

func (f *rtFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var shas []string
		for _, c := range cmds {
			shas = append(shas, rtSHA(c))
		}
		f.mu.Lock()
		f.pipelines = append(f.pipelines, shas)
		f.mu.Unlock()
		return next(ctx, cmds)
	}
}

// Transient errors met while acquiring (LOADING, TRYAGAIN, CLUSTERDOWN,
// READONLY, a connection reset) are retried by the acquisition loop, one
// call per attempt, until the lock is taken; a non-transient error is
// returned at once and leaves nothing in Redis.
func TestLock_Lock_transientErrorsRetried(t *testing.T) {
	for _, ferr := range []error{
		rtRedisErr("LOADING Redis is loading the dataset in memory"),
		rtRedisErr("TRYAGAIN Multiple keys request during rehashing of slot"),
		rtRedisErr("CLUSTERDOWN The cluster is down"),
		rtRedisErr("READONLY You can't write against a read only replica."),
		io.EOF,
	} {
		t.Run(strings.Fields(ferr.Error())[0], func(t *testing.T) {
			ctx := t.Context()
			_, rdb := lkMini(t)
			// 7 failures, each costing one call of the acquisition loop
			// (luart's retry is off under it).
			f := &rtFaults{sha: generated.LockAcquireSHA1, err: ferr, n: 7}
			rdb.AddHook(f)
			c := lkClient(t, rdb, lualock.Options{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
			l := c.NewLock("transient")
			if err := l.TryLock(ctx, 5*time.Second); err != nil {
				t.Fatalf("TryLock through 7 %q errors: %v", ferr, err)
			}
			f.mu.Lock()
			failed, calls := f.failed, f.calls[generated.LockAcquireSHA1]
			f.mu.Unlock()
			// 8 calls, or 9 when the first one sent met NOSCRIPT and
			// was run again after SCRIPT LOAD.
			if failed != 7 || calls < 8 || calls > 9 {
				t.Errorf("acquire script: %d failures, %d calls; want 7 and 8 (9 with a NOSCRIPT)", failed, calls)
			}
			if held, err := l.IsHeld(ctx); err != nil || !held {
				t.Errorf("IsHeld = %v, %v; want true", held, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("Unlock: %v", err)
			}
		})
	}

	t.Run("ERR", func(t *testing.T) {
		ctx := t.Context()
		_, rdb := lkMini(t)
		boom := rtRedisErr("ERR boom")
		f := &rtFaults{sha: generated.LockAcquireSHA1, err: boom, n: 100}
		rdb.AddHook(f)
		c := lkClient(t, rdb, lualock.Options{})
		start := time.Now()
		err := c.NewLock("fatal").TryLock(ctx, 5*time.Second)
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "fatal") {
			t.Errorf("TryLock with ERR: %v, want the Redis error, naming the lock", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("TryLock with ERR returned after %v, want at once", took)
		}
		if f.failed != 1 {
			t.Errorf("acquire script called %d times, want 1 (no retry)", f.failed)
		}
		if n, err := rdb.Exists(ctx, "fatal").Result(); err != nil || n != 0 {
			t.Errorf("EXISTS fatal = %v, %v; want 0", n, err)
		}
	})
}

// The watchdog renews all the locks of a client with one script call per
// batch of Options.RenewBatch locks, the batches of a round in one pipeline.
func TestLock_Lock_watchdogBatches(t *testing.T) {
	ctx := t.Context()
	_, rdb := lkMini(t)
	f := &rtFaults{}
	rdb.AddHook(f)
	const locks, batch = 250, 100
	// A 1.5s lease is renewed every 500ms, and each renewal call may take
	// that long. What the test counts (calls per round) does not depend on
	// the lease; a short one only makes a loss likely: miniredis runs the
	// Lua in this process, under -race, and on a loaded machine a round of
	// 250 renewals could miss a 600ms lease, and a 900ms one now and then.
	c := lkClient(t, rdb, lualock.Options{WatchdogLease: 1500 * time.Millisecond, RenewBatch: batch})
	var held []*lualock.Lock
	for i := range locks {
		l := c.NewLock(fmt.Sprint("batched-", i))
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock %d: %v", i, err)
		}
		held = append(held, l)
	}
	// Rounds that ran while the locks were being taken renewed fewer; so
	// may the first one after, planned before the last Lock returned.
	f.mu.Lock()
	before := len(f.pipelines)
	f.mu.Unlock()
	rounds := func() []int { // renewal calls per round since before
		f.mu.Lock()
		defer f.mu.Unlock()
		var out []int
		for _, p := range f.pipelines[before:] {
			n := 0
			for _, sha := range p {
				if sha == generated.LockRenewSHA1 {
					n++
				}
			}
			if n > 0 {
				out = append(out, n)
			}
		}
		return out
	}
	waitUntil(t, func() bool { return len(rounds()) >= 3 }) // every 500ms
	got := rounds()
	for i, n := range got[1:] {
		if want := (locks + batch - 1) / batch; n != want {
			t.Errorf("round %d sent %d renewal calls for %d locks, want %d", i+1, n, locks, want)
		}
	}
	f.mu.Lock()
	single := f.calls[generated.LockRenewSHA1]
	f.mu.Unlock()
	if single != 0 {
		t.Errorf("%d renewal calls outside a round's pipeline", single)
	}
	t.Logf("%d locks, batches of %d: renewal calls per round %v", locks, batch, got)
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
}

// rtHold is a go-redis hook that holds the calls of one script until open
// is closed or the call's context ends.
type rtHold struct {
	sha     string
	entered chan struct{}
	open    chan struct{}
}

func (h *rtHold) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *rtHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *rtHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if rtSHA(cmd) == h.sha {
			h.entered <- struct{}{}
			select {
			case <-h.open:
			case <-ctx.Done():
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

// A waiter that was woken by a release but gives up before acting on it
// (here: its handle is busy with another call, and its context ends) hands
// the wake-up to another waiter of the lock, which takes the lock at once
// rather than at its fallback timer.
func TestLock_Lock_unusedWakeUpPassedOn(t *testing.T) {
	ctx := t.Context()
	_, rdb := lkMini(t)
	hold := &rtHold{sha: generated.LockForceReleaseSHA1, entered: make(chan struct{}, 1), open: make(chan struct{})}
	rdb.AddHook(hold)
	c := lkClient(t, rdb, lualock.Options{MaxWaitTimer: 30 * time.Second})
	const name = "pass-on"
	holder, first, second := c.NewLock(name), c.NewLock(name), c.NewLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	firstCtx, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Lock(firstCtx) }()
	waitUntil(t, func() bool { return c.Stats().Waiters == 1 })
	secondDone := make(chan error, 1)
	go func() { secondDone <- second.Lock(ctx) }()
	waitUntil(t, func() bool { return c.Stats().Waiters == 2 })

	// Keep the first waiter's handle busy: its next attempt will wait for it.
	busyCtx, cancelBusy := context.WithCancel(ctx)
	busyDone := make(chan error, 1)
	go func() { _, err := first.ForceUnlock(busyCtx); busyDone <- err }()
	<-hold.entered
	// The release wakes the first waiter, the longest waiting; it then
	// waits for its busy handle and gives up.
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cancelFirst()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("first waiter: %v, want context.Canceled", err)
	}
	select {
	case err := <-secondDone:
		if err != nil {
			t.Fatalf("second waiter: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the second waiter did not get the free lock within 3s: the first waiter's wake-up was lost")
	}
	cancelBusy()
	if err := <-busyDone; !errors.Is(err, context.Canceled) {
		t.Errorf("ForceUnlock held by the hook: %v, want context.Canceled", err)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
