package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/harness"
)

// The reentrant lock's scenarios, each written once as a function of
// (t, rdb, ...) and run on every backend by a TestLock_* / TestClient_*
// function. Tests whose bounds are in milliseconds stay sequential (they
// run before the parallel ones, on an otherwise idle machine); the load
// tests run their three backends in parallel.
//
// Helpers of this file start with lk so that they do not collide with the
// helpers of the other suites of this package.

// lkNew returns a lualock client on rdb, closed by the test's cleanup.
func lkNew(t *testing.T, rdb redis.UniversalClient, o lualock.Options) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// lkChannel is the release channel of lock name (a name without braces).
func lkChannel(name string) string { return "redisson_lock__channel:{" + name + "}" }

// lkGlob escapes s for a Redis glob pattern.
func lkGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// lkChannels lists the pub/sub channels matching pattern that have a
// subscriber, plain (PUBSUB CHANNELS) or sharded (PUBSUB SHARDCHANNELS: the
// default on a cluster), on every master of a cluster.
func lkChannels(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := func(ctx context.Context, c redis.UniversalClient) ([]string, error) {
		chs, err := c.PubSubChannels(ctx, pattern).Result()
		if err != nil {
			return nil, err
		}
		shard, err := c.PubSubShardChannels(ctx, pattern).Result()
		if lkNoShard(err) {
			return chs, nil
		}
		return append(chs, shard...), err
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var all []string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			chs, err := list(ctx, c)
			mu.Lock()
			all = append(all, chs...)
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatalf("PUBSUB CHANNELS %s: %v", pattern, err)
		}
		return all
	}
	chs, err := list(ctx, rdb)
	if err != nil {
		t.Fatalf("PUBSUB CHANNELS %s: %v", pattern, err)
	}
	return chs
}

// lkNoShard reports whether err says that the server has no sharded pub/sub
// (miniredis): it then has no sharded subscribers either.
func lkNoShard(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unknown subcommand")
}

// lkNumSub returns the number of subscribers of each channel, plain
// (PUBSUB NUMSUB) and sharded (PUBSUB SHARDNUMSUB, asked one channel at a
// time: the default on a cluster), summed over the masters of a cluster.
func lkNumSub(t *testing.T, rdb redis.UniversalClient, channels []string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sum := map[string]int64{}
	add := func(ctx context.Context, c redis.UniversalClient) error {
		m, err := c.PubSubNumSub(ctx, channels...).Result()
		for k, v := range m {
			sum[k] += v
		}
		if err != nil {
			return err
		}
		for _, ch := range channels {
			m, err := c.PubSubShardNumSub(ctx, ch).Result()
			if lkNoShard(err) {
				return nil
			}
			if err != nil {
				return err
			}
			sum[ch] += m[ch]
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return add(ctx, c)
		})
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		return sum
	}
	if err := add(ctx, rdb); err != nil {
		t.Fatalf("PUBSUB NUMSUB: %v", err)
	}
	return sum
}

// lkEventually polls cond every 10 ms until it holds or d has passed, and
// reports whether it held.
func lkEventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lkWaitDone waits up to d for ctx to end and returns how long it took,
// failing the test when it did not end.
func lkWaitDone(t *testing.T, ctx context.Context, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ctx.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: the hold's Done did not fire within %v", what, d)
		return 0
	}
}

// lkHolds reads the hold count of l in Redis, failing the test on error.
func lkHolds(t *testing.T, ctx context.Context, l *lualock.Lock) int {
	t.Helper()
	n, err := l.HoldCount(ctx)
	if err != nil {
		t.Fatalf("HoldCount: %v", err)
	}
	return n
}

// lkNoKeys fails the test when a key of name is left (latches excluded).
func lkNoKeys(t *testing.T, rdb redis.UniversalClient, name string) {
	t.Helper()
	if left := keysLeft(t, rdb, name, false); len(left) > 0 {
		t.Errorf("keys left behind: %q", left)
	}
}

// lkUnlockLater unlocks l in the test's cleanup if it still holds it, under
// a fresh context (the test's own is cancelled by then).
func lkUnlockLater(t *testing.T, l *lualock.Lock) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for range 8 {
			if l.Unlock(ctx) != nil {
				return
			}
		}
	})
}

func TestLock_Lock_noChannelsLeft(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		// 32 x 5 000 tasks as the issue says on the real servers: with
		// -race on a 2-CPU machine ~22 s on the standalone server and ~26 s
		// on the cluster. miniredis (~4 ms a task: gopher-lua parses every
		// script call) gets 32 x 40. -short: 32 x 150 and 32 x 10.
		tasks := scale(5000, 150)
		if b.name == "miniredis" {
			tasks = scale(40, 10)
		}
		testNoChannelsLeft(t, rdb, 32, tasks, 5)
	})
}

// Scenario 12: workers x tasks Lock/Unlock on a few names; afterwards no
// channel of these locks is subscribed any more.
func testNoChannelsLeft(t *testing.T, rdb redis.UniversalClient, workers, tasks, names int) {
	ctx := t.Context()
	base := uniqueName(t)
	cs := []*lualock.Client{lkNew(t, rdb, lualock.Options{}), lkNew(t, rdb, lualock.Options{})}
	failures := make(chan string, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[w%len(cs)]
			for i := range tasks {
				l := c.NewLock(fmt.Sprintf("%s_%d", base, (w+i)%names))
				if err := l.Lock(ctx); err != nil {
					failures <- fmt.Sprintf("Lock: %v", err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					failures <- fmt.Sprintf("Unlock: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	t.Logf("%d workers x %d tasks on %d names in %v", workers, tasks, names, time.Since(start))
	for _, c := range cs {
		if s := c.Stats(); s.Waiters != 0 || s.Watched != 0 {
			t.Errorf("Stats after the run = %+v, want no waiter and no hold watched", s)
		}
		// Channels linger for Options.SubscriptionLinger after their last
		// waiter got the lock.
		if !lkEventually(2*time.Second, func() bool { return c.Stats().Subscriptions == 0 }) {
			t.Errorf("Stats 2s after the run = %+v, want no subscription", c.Stats())
		}
	}
	pattern := lkGlob(lkChannel(base)[:len(lkChannel(base))-1]) + "*"
	var left []string
	if !lkEventually(2*time.Second, func() bool {
		left = lkChannels(t, rdb, pattern)
		return len(left) == 0
	}) {
		t.Errorf("channels still subscribed 2s after the run: %q", left)
	}
	for i := range names {
		lkNoKeys(t, rdb, fmt.Sprintf("%s_%d", base, i))
	}
}

type lkServer interface {
	Kill()
	Restart() error
}

// lkMini makes a miniredis an lkServer: a restart comes back empty, as a
// redis-server without persistence.
type lkMini struct{ mr *miniredis.Miniredis }

func (m lkMini) Kill() { m.mr.Close() }
func (m lkMini) Restart() error {
	m.mr.Close() // does nothing when killed already
	m.mr.FlushAll()
	return m.mr.Restart()
}

// lkPrivate runs f on a private miniredis and a private redis-server; both
// can be killed and restarted. (The shared cluster cannot, and a private one
// costs several seconds to start; a cluster node's crash is the standalone
// case for the slots it serves.)
func lkPrivate(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, s lkServer)) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		f(t, rdb, lkMini{mr})
	})
	t.Run("standalone", func(t *testing.T) {
		s := harness.StartStandalone(t)
		rdb := s.Client()
		t.Cleanup(func() { _ = rdb.Close() })
		f(t, rdb, s)
	})
}

func TestLock_Lock_redisDown(t *testing.T) {
	shortParallel(t)
	lkPrivate(t, testRedisDown)
}

// Scenario 15: with Redis down, calls fail with a clear error within their
// deadline, the held lock is reported lost about one lease later, and after
// a restart without persistence the lock is gone.
func testRedisDown(t *testing.T, rdb redis.UniversalClient, s lkServer) {
	ctx := t.Context()
	const lease = 600 * time.Millisecond
	c, err := lualock.New(rdb, lualock.Options{WatchdogLease: lease})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()
	name := uniqueName(t)
	l := c.NewLock(name)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := l.Context()
	lostAt := make(chan time.Time, 1)
	go func() { // ends at the latest when Close ends the hold
		<-hold.Done()
		lostAt <- time.Now()
	}()
	s.Kill()
	killed := time.Now()

	// Unlock while the hold is not known lost yet: the release cannot reach
	// Redis. Its ctx ends meanwhile, so it stops the renewal, tries again
	// under its own 2s context, and ends the hold.
	uctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	start := time.Now()
	err = l.Unlock(uctx)
	cancel()
	took := time.Since(start)
	t.Logf("Unlock(500ms ctx) with Redis down: %v after %v", err, took)
	if err == nil {
		t.Fatal("Unlock with Redis down succeeded")
	}
	if !strings.Contains(err.Error(), "not confirmed") {
		t.Errorf("Unlock with Redis down = %v, want it to say the release was not confirmed", err)
	}
	if limit := 500*time.Millisecond + 2*time.Second + 300*time.Millisecond; took > limit {
		t.Errorf("Unlock with a 500ms context returned after %v, want within the ctx and the 2s release timeout (%v)", took, limit)
	}

	start = time.Now()
	err = c.NewLock(name).TryLock(ctx, 500*time.Millisecond)
	took = time.Since(start)
	t.Logf("TryLock(500ms) with Redis down: %v after %v", err, took)
	if err == nil {
		t.Fatal("TryLock with Redis down succeeded")
	}
	if took > 600*time.Millisecond {
		t.Errorf("TryLock(500ms) with Redis down returned after %v, want about 500ms", took)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not name the lock", err)
	}
	if !errors.Is(err, lualock.ErrUnavailable) || errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock with Redis down: %v, want ErrUnavailable (not ErrNotObtained)", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("TryLock's own wait reported as the caller's context: %v", err)
	}

	select {
	case at := <-lostAt:
		lost := at.Sub(killed)
		t.Logf("Done fired %v after the kill (lease %v)", lost, lease)
		if limit := lease + lease/3; lost > limit {
			t.Errorf("Done fired %v after the kill, want within about one lease (%v)", lost, limit)
		}
	case <-time.After(5 * lease):
		t.Fatalf("Done did not fire within %v of the kill", 5*lease)
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("cause = %v, want ErrLockLost", cause)
	}

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if !lkEventually(5*time.Second, func() bool { return rdb.Ping(ctx).Err() == nil }) {
		t.Fatal("Redis did not come back")
	}
	if n, err := rdb.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS after a restart without persistence = %d, %v; want 0", n, err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock after the unconfirmed Unlock = %v, want ErrNotHeld (that Unlock ended the hold)", err)
	}
	other := c.NewLock(name)
	if err := other.TryLock(ctx, 0); err != nil {
		t.Errorf("TryLock after the restart: %v", err)
	} else if err := other.Unlock(ctx); err != nil {
		t.Errorf("Unlock after the restart: %v", err)
	}
	closed = true
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Scenario 15, hung: a Redis that stops answering (SIGSTOP: connections
// stay open, nothing comes back). go-redis then holds a call until its
// ReadTimeout (3s) unless ContextTimeoutEnabled is set, yet a held lock must
// be reported lost about one lease after the pause, either way; with
// ContextTimeoutEnabled, TryLock also keeps to its wait.
func TestLock_Context_lostWhileRedisHangs(t *testing.T) {
	s := harness.StartStandalone(t)
	for _, ctxTimeout := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeout), func(t *testing.T) {
			ctx := t.Context()
			rdb := s.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = ctxTimeout })
			t.Cleanup(func() { _ = rdb.Close() })
			const lease = 600 * time.Millisecond
			c, err := lualock.New(rdb, lualock.Options{WatchdogLease: lease})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			name := uniqueName(t)
			l := c.NewLock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			hold := l.Context()
			if err := s.Pause(); err != nil {
				t.Fatalf("Pause: %v", err)
			}
			paused := time.Now()
			resumed := false
			resume := func() {
				if !resumed {
					resumed = true
					if err := s.Resume(); err != nil {
						t.Errorf("Resume: %v", err)
					}
				}
			}
			defer resume()

			if ctxTimeout {
				start := time.Now()
				err := c.NewLock(name).TryLock(ctx, 300*time.Millisecond)
				took := time.Since(start)
				t.Logf("TryLock(300ms) on a hung Redis: %v after %v", err, took)
				if !errors.Is(err, lualock.ErrUnavailable) {
					t.Errorf("TryLock on a hung Redis = %v, want ErrUnavailable", err)
				}
				if took > 450*time.Millisecond {
					t.Errorf("TryLock(300ms) on a hung Redis returned after %v", took)
				}
			}
			select {
			case <-hold.Done():
				lost := time.Since(paused)
				t.Logf("Done fired %v after the pause (lease %v)", lost, lease)
				if limit := lease + lease/3; lost > limit {
					t.Errorf("Done fired %v after the pause, want within about one lease (%v)", lost, limit)
				}
			case <-time.After(5 * lease):
				t.Fatalf("Done did not fire within %v of the pause", 5*lease)
			}
			if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
				t.Errorf("cause = %v, want ErrLockLost", cause)
			}
			if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
				t.Errorf("Unlock after the loss = %v, want ErrLockLost", err)
			}
			resume()
			// The lease ran out while Redis hung. An acquisition that TryLock
			// sent meanwhile may still run once Redis reads it and take the
			// lock; nothing renews it, so it lapses within one lease.
			if !lkEventually(lease+300*time.Millisecond, func() bool { return rdb.Exists(ctx, name).Val() == 0 }) {
				t.Errorf("the lock still exists %v after Redis answers again", lease+300*time.Millisecond)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestLock_Context_lostOnRestart(t *testing.T) {
	lkPrivate(t, testRedisRestart)
}

// Scenario 16: a restart without persistence while holding ends the hold
// with ErrLockLost within a renewal period + slack after the restart.
func testRedisRestart(t *testing.T, rdb redis.UniversalClient, s lkServer) {
	ctx := t.Context()
	const lease = 600 * time.Millisecond
	c := lkNew(t, rdb, lualock.Options{WatchdogLease: lease})
	name := uniqueName(t)
	l := c.NewLock(name)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	hold := l.Context()
	start := time.Now()
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	down := time.Since(start)
	elapsed := lkWaitDone(t, hold, 3*lease, "restart")
	t.Logf("Done fired %v after the restart (which took %v; renewal period %v)", elapsed, down, lease/3)
	if limit := lease/3 + 150*time.Millisecond; elapsed > limit {
		t.Errorf("Done fired %v after the restart, want within a renewal period + slack (%v)", elapsed, limit)
	}
	if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
		t.Errorf("cause = %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
		t.Errorf("Unlock after the loss = %v, want ErrLockLost", err)
	}
}

// lkLoseReplies is a go-redis hook that lets the first n EVALSHA calls of
// one script run and then reports io.EOF, as if the reply had been lost on
// the way back.
type lkLoseReplies struct {
	passHook
	sha  string
	left atomic.Int32
	lost atomic.Int32
}

func (h *lkLoseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && args[1] == h.sha &&
			(err == nil || errors.Is(err, redis.Nil)) && h.left.Add(-1) >= 0 {
			h.lost.Add(1)
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return err
	}
}

// lkHooked returns a new client on the same Redis as rdb, with hook.
func lkHooked(t *testing.T, rdb redis.UniversalClient, hook redis.Hook) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch r := rdb.(type) {
	case *redis.Client:
		c = redis.NewClient(&redis.Options{Addr: r.Options().Addr})
	case *redis.ClusterClient:
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Options().Addrs})
	default:
		t.Fatalf("unexpected client %T", rdb)
	}
	c.AddHook(hook)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lkSlowReplies is a go-redis hook that, while armed, holds back the reply
// of one script's EVALSHA for delay after the script ran.
type lkSlowReplies struct {
	passHook
	sha   string
	delay time.Duration
	armed atomic.Bool
}

func (h *lkSlowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if h.armed.Load() && len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && args[1] == h.sha {
			time.Sleep(h.delay)
		}
		return err
	}
}

func TestLock_Unlock_racesRenewal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		testUnlockRacesRenewal(t, rdb)
	})
}

// An Unlock racing the watchdog (Redisson #7272): the release has deleted
// the lock but its reply is still on the way when a renewal finds the lock
// gone. That is a normal Unlock, not a loss: Unlock returns nil, the hold
// ends with ErrNotHeld, and the handle can lock again.
func testUnlockRacesRenewal(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	const lease = 150 * time.Millisecond // renewals every 50ms
	slow := &lkSlowReplies{sha: generated.LockReleaseSHA1, delay: 4 * lease / 3}
	c := lkNew(t, lkHooked(t, rdb, slow), lualock.Options{WatchdogLease: lease})
	name := uniqueName(t)
	l := c.NewLock(name)
	lkUnlockLater(t, l)
	for round := 1; round <= 3; round++ {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("round %d: Lock after a normal Unlock: %v", round, err)
		}
		hold := l.Context()
		slow.armed.Store(true)
		err := l.Unlock(ctx) // the reply comes back after four renewal periods
		slow.armed.Store(false)
		if err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) {
			t.Errorf("round %d: cause after a normal Unlock = %v, want ErrNotHeld", round, cause)
		}
		if w := c.Stats().Watched; w != 0 {
			t.Errorf("round %d: Stats.Watched after Unlock = %d, want 0", round, w)
		}
	}
	lkNoKeys(t, rdb, name)
}

func TestLock_Unlock_lostReply(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		testLostReplies(t, rdb)
	})
}

// Scenario 18: a release or an acquisition that ran but whose reply was
// lost, sent again (by the script runner's retry or by the caller), must
// not release twice nor count a re-entry twice.
func testLostReplies(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	name := uniqueName(t)
	release := &lkLoseReplies{sha: generated.LockReleaseSHA1}
	acquire := &lkLoseReplies{sha: generated.LockAcquireSHA1}
	hooked := lkHooked(t, rdb, release)
	hooked.AddHook(acquire)
	c := lkNew(t, hooked, lualock.Options{})
	l := c.NewLock(name)
	lkUnlockLater(t, l)
	other := lkNew(t, rdb, lualock.Options{}).NewLock(name)

	// First acquisition and a re-entry, each with its first reply lost.
	for want := 1; want <= 2; want++ {
		acquire.left.Store(1)
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock %d with a lost reply: %v", want, err)
		}
		if acquire.lost.Load() != int32(want) {
			t.Fatalf("the hook lost %d replies, want %d", acquire.lost.Load(), want)
		}
		if n := lkHolds(t, ctx, l); n != want {
			t.Fatalf("hold count after acquisition %d with a lost reply = %d, want %d", want, n, want)
		}
	}

	// A release whose first reply is lost: the runner sends it again.
	release.left.Store(1)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with a lost reply: %v", err)
	}
	if release.lost.Load() != 1 {
		t.Fatalf("the hook lost %d replies, want 1", release.lost.Load())
	}
	if n := lkHolds(t, ctx, l); n != 1 {
		t.Fatalf("hold count after one Unlock with a lost reply = %d, want 1 (released twice?)", n)
	}
	if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock by another owner = %v, want ErrNotObtained", err)
	}

	// Every reply of one Unlock lost: the caller sees the error and calls
	// Unlock again, which replays the outcome instead of releasing again.
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	release.left.Store(100)
	err := l.Unlock(ctx)
	lost := release.lost.Load() - 1
	release.left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Unlock with every reply lost = %v, want io.EOF", err)
	}
	t.Logf("one Unlock sent the release %d times, each reply lost", lost)
	if n := lkHolds(t, ctx, l); n != 1 {
		t.Fatalf("hold count after an Unlock sent %d times = %d, want 1", lost, n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock sent again: %v", err)
	}
	if n := lkHolds(t, ctx, l); n != 1 {
		t.Fatalf("hold count after the replayed Unlock = %d, want 1", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("last Unlock: %v", err)
	}
	if n := lkHolds(t, ctx, l); n != 0 {
		t.Fatalf("hold count after the last Unlock = %d, want 0", n)
	}
	if err := other.TryLock(ctx, 0); err != nil {
		t.Fatalf("TryLock after the last Unlock: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	// A first acquisition with every reply lost: nothing may stay locked.
	acquire.left.Store(100)
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = l.Lock(actx)
	cancel()
	acquire.left.Store(0)
	if err == nil {
		t.Fatal("Lock with every reply lost succeeded")
	}
	if !lkEventually(time.Second, func() bool { return lkHolds(t, ctx, l) == 0 }) {
		t.Errorf("hold count after a failed Lock = %d, want 0", lkHolds(t, ctx, l))
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Errorf("Unlock after a failed Lock = %v, want ErrNotHeld", err)
	}
	if err := other.TryLock(ctx, 0); err != nil {
		t.Fatalf("TryLock after a failed Lock of another handle: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	// An Unlock with every reply lost, then a re-entry instead of another
	// Unlock: the re-entry settles the pending release first (it did
	// happen), so it is counted from the right hold count.
	for want := 1; want <= 2; want++ {
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock %d: %v", want, err)
		}
	}
	release.left.Store(100)
	err = l.Unlock(ctx)
	release.left.Store(0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Unlock with every reply lost = %v, want io.EOF", err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("re-entry after an Unlock with an unknown outcome: %v", err)
	}
	if n := lkHolds(t, ctx, l); n != 2 {
		t.Fatalf("hold count after the re-entry = %d, want 2 (1 left by the lost Unlock, +1)", n)
	}
	for range 2 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Fatalf("Unlock past the last hold = %v, want ErrNotHeld", err)
	}
	lkNoKeys(t, rdb, name)
}

// TestLock_Lock_settlesUnlockPastLatch: an Unlock of one of two holds runs
// in Redis but every reply is lost; the caller stays in its outer hold
// longer than the unlock latch lives, then re-enters. The re-entry settles
// the pending release without releasing a second hold (the release script
// checks the hold count past the latch): the lock stays held with 2 holds
// and no other owner gets in.
func TestLock_Lock_settlesUnlockPastLatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := t.Context()
		lose := &lkLoseReplies{sha: generated.LockReleaseSHA1}
		c := lkNew(t, lkHooked(t, rdb, lose), lualock.Options{UnlockLatch: 100 * time.Millisecond})
		name := uniqueName(t)
		l := c.NewLock(name)
		other := lkNew(t, rdb, lualock.Options{}).NewLock(name)
		for range 2 {
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
		}
		lose.left.Store(1000)
		err := l.Unlock(ctx)
		lose.left.Store(0)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("Unlock with every reply lost = %v, want io.EOF", err)
		}
		// Inside the outer hold, past the latch: its key is gone.
		waitFor(t, func() bool { return slices.Equal(keysLeft(t, rdb, name, true), []string{name}) })
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("re-entry after the lost Unlock: %v", err)
		}
		if n := lkHolds(t, ctx, l); n != 2 {
			t.Fatalf("hold count after the re-entry = %d, want 2 (the pending release counted once)", n)
		}
		if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("another owner's TryLock = %v, want ErrNotObtained", err)
		}
		for range 2 {
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		}
		if err := other.TryLock(ctx, 0); err != nil {
			t.Fatalf("TryLock after the last Unlock: %v", err)
		}
		if err := other.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		lkNoKeys(t, rdb, name)
	})
}

// TestLock_Lock_reentryIntoLostHold: with two holds, an Unlock fails before
// reaching Redis and the lock is then deleted from outside. The re-entry
// settles the pending Unlock, finds the hold lost and returns ErrLockLost,
// as a re-entry without a pending Unlock does; the remaining hold's Unlock
// returns ErrLockLost too, and only then ErrNotHeld.
func TestLock_Lock_reentryIntoLostHold(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := t.Context()
		drop := &failScript{sha: generated.LockReleaseSHA1, err: io.EOF}
		c := lkNew(t, lkHooked(t, rdb, drop), lualock.Options{})
		name := uniqueName(t)
		l := c.NewLock(name)
		for range 2 {
			if err := l.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
		}
		hold := l.Context()
		drop.armed.Store(true)
		err := l.Unlock(ctx)
		drop.armed.Store(false)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("Unlock that never reached Redis = %v, want io.EOF", err)
		}
		if err := rdb.Del(ctx, name).Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.Lock(ctx); !errors.Is(err, lualock.ErrLockLost) {
			t.Fatalf("re-entry into the deleted hold = %v, want ErrLockLost", err)
		}
		if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrLockLost) {
			t.Errorf("hold's cause = %v, want ErrLockLost", cause)
		}
		if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
			t.Errorf("Unlock of the remaining hold = %v, want ErrLockLost", err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
			t.Errorf("Unlock past the holds = %v, want ErrNotHeld", err)
		}
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock afresh: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		lkNoKeys(t, rdb, name)
	})
}

func TestClient_Stats_sharedPubSub(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		// 10 000 waiters on 100 locks as the issue says on the real
		// servers; miniredis (gopher-lua parses every script call) gets
		// 2 000. -short: 1 000 and 300.
		waiters := scale(10000, 1000)
		if b.name == "miniredis" {
			waiters = scale(2000, 300)
		}
		testStatsSharedPubSub(t, b, rdb, waiters, 100)
	})
}

// Scenario 19: many goroutines waiting on many locks share one pub/sub
// connection and one subscription per lock.
func testStatsSharedPubSub(t *testing.T, b backend, rdb redis.UniversalClient, waiters, locks int) {
	ctx := t.Context()
	clientName := ""
	if r, ok := rdb.(*redis.Client); ok && b.name == "standalone" {
		// A dedicated client with a name, to find our connections in
		// CLIENT LIST on the shared server.
		clientName = uniqueName(t)
		rdb = redis.NewClient(&redis.Options{Addr: r.Options().Addr, ClientName: clientName})
		t.Cleanup(func() { _ = rdb.Close() })
	}
	holders := lkNew(t, rdb, lualock.Options{})
	c := lkNew(t, rdb, lualock.Options{})
	base := uniqueName(t)
	names := make([]string, locks)
	channels := make([]string, locks)
	for i := range names {
		names[i] = fmt.Sprintf("%s_%d", base, i)
		channels[i] = lkChannel(names[i])
		l := holders.NewLock(names[i])
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		lkUnlockLater(t, l)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, waiters)
	start := time.Now()
	for i := range waiters {
		go func() { errs <- c.NewLock(names[i%locks]).Lock(wctx) }()
	}
	var s lualock.Stats
	if !lkEventually(30*time.Second, func() bool {
		s = c.Stats()
		return s.Waiters == waiters
	}) {
		t.Errorf("Stats = %+v, want %d waiters", s, waiters)
	}
	t.Logf("%d waiters on %d locks after %v: %+v", waiters, locks, time.Since(start), s)
	maxConns := 1
	if b.cluster {
		maxConns = 3 // sharded pub/sub, the default on a cluster: one per primary
	}
	if s.PubSubConns < 1 || s.PubSubConns > maxConns || s.Subscriptions > locks || s.Subscriptions < 1 {
		t.Errorf("Stats = %+v, want 1 to %d pub/sub connections and at most %d subscriptions", s, maxConns, locks)
	}
	// A waiter counts as one as soon as it is registered; its channel's
	// SUBSCRIBE is sent by the subscriber's sender goroutine meanwhile, so
	// the server's counts may lag behind for a moment (with few waiters,
	// when Waiters is reached quickly).
	var numsub map[string]int64
	lkEventually(5*time.Second, func() bool {
		numsub = lkNumSub(t, rdb, channels)
		for _, n := range numsub {
			if n != 1 {
				return false
			}
		}
		return len(numsub) == len(channels)
	})
	for ch, n := range numsub {
		if n != 1 {
			t.Errorf("PUBSUB NUMSUB %s = %d, want 1", ch, n)
		}
	}
	if clientName != "" {
		list, err := rdb.ClientList(ctx).Result()
		if err != nil {
			t.Fatalf("CLIENT LIST: %v", err)
		}
		subscribers := 0
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					f[k] = v
				}
			}
			if f["name"] == clientName && f["sub"] != "" && f["sub"] != "0" {
				subscribers++
				if f["sub"] != strconv.Itoa(locks) {
					t.Errorf("our pub/sub connection has sub=%s, want %d", f["sub"], locks)
				}
			}
		}
		if subscribers != 1 {
			t.Errorf("CLIENT LIST shows %d of our connections subscribed, want 1", subscribers)
		}
	}

	cancel()
	for range waiters {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("waiter's Lock = %v, want context.Canceled", err)
		}
	}
	if s := c.Stats(); s.Waiters != 0 || s.Subscriptions != 0 {
		t.Errorf("Stats after cancelling the waiters = %+v, want none", s)
	}
}

// The Redisson side of the interop test: Redisson 3.x's RedissonLock
// scripts, verbatim apart from the line breaks (tryLockInnerAsync and
// unlockInnerAsync). KEYS[1] is the lock, KEYS[2] its channel; the owner
// field is "<connection manager UUID>:<thread id>".
func TestLock_Lock_fallbackTimerAfterHandoff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := t.Context()
		c := lkNew(t, rdb, lualock.Options{MaxWaitTimer: 5 * time.Second})
		name := uniqueName(t)
		const lease = 300 * time.Millisecond
		if err := c.NewLock(name).LockLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got := make(chan time.Duration, 2)
		for range 2 {
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 4*time.Second)
				defer cancel()
				if err := c.NewLock(name).LockLease(wctx, lease); err != nil {
					got <- -1
					return
				}
				got <- time.Since(start)
			}()
		}
		// Three leases run out one after another: about 0.3s, 0.6s.
		for i := range 2 {
			d := <-got
			if d < 0 || d > time.Duration(i+1)*lease+time.Second {
				t.Errorf("waiter %d acquired after %v, want about %v (a waiter went without a timer)", i, d, time.Duration(i+1)*lease)
			}
		}
		if st := c.Stats(); st.Waiters != 0 {
			t.Errorf("waiters left: %+v", st)
		}
	})
}

// TestClient_pubsubReconnect: when Redis drops the shared pub/sub
// connection (CLIENT KILL TYPE pubsub), the channels are subscribed again
// on a new connection and a waiter is still woken by the release message,
// long before its fallback timer.
func TestClient_pubsubReconnect(t *testing.T) {
	ctx := t.Context()
	s := harness.StartStandalone(t)
	rdb := s.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	admin := s.Client()
	t.Cleanup(func() { _ = admin.Close() })
	c, err := lualock.New(rdb, lualock.Options{MaxWaitTimer: 30 * time.Second, SubscriptionLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	name := uniqueName(t)
	holder, waiter := c.NewLock(name), c.NewLock(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	subscribers := func() int64 {
		m, err := admin.PubSubNumSub(ctx, lkChannel(name)).Result()
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		return m[lkChannel(name)]
	}
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		err := waiter.Lock(ctx)
		done <- result{time.Now(), err}
	}()
	waitFor(t, func() bool { return subscribers() == 1 })
	killed, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	if err != nil || killed != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1 connection killed", killed, err)
	}
	waitFor(t, func() bool { return subscribers() == 1 }) // subscribed again
	time.Sleep(50 * time.Millisecond)                     // let a retry the reconnect caused pass
	select {
	case r := <-done:
		t.Fatalf("waiter returned while the lock was held: %v", r.err)
	default:
	}
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("waiter Lock: %v", r.err)
		}
		t.Logf("waiter woken %v after the release, on the new connection", r.at.Sub(released))
		if d := r.at.Sub(released); d > time.Second {
			t.Errorf("waiter took the lock %v after the release, want well under its 30s timer", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken within 5s of the release after the reconnect")
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
