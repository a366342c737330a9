package pubsub_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// With Options.WatchHolds, a hold learns of a force release from the
// message it publishes, well before its next renewal (10s with a 30s
// watchdog lease): within 100ms, on every backend, for both kinds of lock,
// + the force release's round trip and two wake-ups (the message's reader,
// this test) as a canary measured them in the same test, so that a loaded
// machine does not pass for a missed message (the renewal would be 10s
// late). Without the option it does not (the renewal is the fallback).
func TestWatchHolds_forceUnlockNoticed(t *testing.T) {
	backends.ShortParallel(t)
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		for _, kind := range []string{"reentrant", "fair"} {
			t.Run(kind, func(t *testing.T) {
				ctx := context.Background()
				holder := newWatchClient(t, rdb, true)
				other := newWatchClient(t, rdb, false)
				deaf := newWatchClient(t, rdb, false)
				newLock := func(c *lualock.Client, name string) *lualock.Lock {
					if kind == "fair" {
						return c.NewFairLock(name)
					}
					return c.NewLock(name)
				}
				name := backends.UniqueName(t)
				canary := backends.StartCanary(t, 5*time.Millisecond, rdb)
				l := newLock(holder, name)
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				waitSubscribed(t, rdb, name, 1)
				start := time.Now()
				if deleted, err := newLock(other, name).ForceUnlock(ctx); err != nil || !deleted {
					t.Fatalf("ForceUnlock: %v, %v", deleted, err)
				}
				select {
				case <-l.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("the hold did not end within 2s of the force unlock")
				}
				took := time.Since(start)
				load := canary.Allowance(2, 1)
				t.Logf("force unlock noticed after %v (%v)", took, canary)
				if took > 100*time.Millisecond+load {
					t.Errorf("force unlock noticed after %v, want within 100ms + %v for the load (%v)", took, load, canary)
				}
				if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrLockLost) {
					t.Errorf("cause %v, want ErrLockLost", cause)
				}
				if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
					t.Errorf("Unlock after the loss: %v, want ErrLockLost", err)
				}

				// Without the option: still held as far as the handle knows.
				name2 := backends.UniqueName(t) + "-deaf"
				l2 := newLock(deaf, name2)
				if err := l2.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := newLock(other, name2).ForceUnlock(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case <-l2.Done():
					t.Errorf("a hold without WatchHolds ended at once: %v", context.Cause(l2.Context()))
				case <-time.After(300 * time.Millisecond):
				}
				_ = l2.Unlock(ctx)
			})
		}
	})
}

// A hold that listens is not reported lost by its own releases, nor by the
// releases and hand-overs of other owners' holds on the same name; and it
// stops listening when it ends.
func TestWatchHolds_noFalseLoss(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		c1 := newWatchClient(t, rdb, true)
		c2 := newWatchClient(t, rdb, true)
		name := backends.UniqueName(t)
		for i := range 20 {
			for _, c := range []*lualock.Client{c1, c2} {
				l := c.NewLock(name)
				if err := l.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				if i%2 == 0 { // a re-entry, released: no message
					if err := l.Lock(ctx); err != nil {
						t.Fatal(err)
					}
					if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				}
				hold := l.Context()
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("round %d: Unlock: %v", i, err)
				}
				if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) || errors.Is(cause, lualock.ErrLockLost) {
					t.Fatalf("round %d: cause %v, want ErrNotHeld", i, cause)
				}
			}
		}
		backends.WaitFor(t, "no subscription left", 5*time.Second, func() bool {
			return c1.Stats().Subscriptions == 0 && c2.Stats().Subscriptions == 0
		})
	})
}

func newWatchClient(t *testing.T, rdb redis.UniversalClient, watch bool) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, lualock.Options{WatchHolds: watch, SubscriptionLinger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitSubscribed waits until n clients listen on the lock's channel.
func waitSubscribed(t *testing.T, rdb redis.UniversalClient, name string, n int64) {
	t.Helper()
	ch := "redisson_lock__channel:{" + name + "}"
	backends.WaitFor(t, "subscribed to "+ch, 5*time.Second, func() bool {
		return backends.NumSub(t, rdb, []string{ch})[ch] >= n // plain or sharded: the default on a cluster is sharded
	})
}

// TestWatchHolds_cost measures what Options.WatchHolds costs, for the
// README: the delay from a force unlock to the holder's Done, Redis memory
// and channels per held lock, client heap per held lock, and lock/unlock
// round trips with and without it. It runs only with
// LUALOCK_MEASURE_WATCH=1, on the standalone redis-server.
func TestWatchHolds_cost(t *testing.T) {
	if os.Getenv("LUALOCK_MEASURE_WATCH") != "1" {
		t.Skip("set LUALOCK_MEASURE_WATCH=1 to measure")
	}
	rdb := backends.All()[1].New(t)
	ctx := context.Background()
	info := func(field string) int64 {
		s, err := rdb.Info(ctx, "memory", "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(s, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatalf("no %s in INFO", field)
		return 0
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 10000
	for _, watch := range []bool{false, true} {
		c := newWatchClient(t, rdb, watch)
		prefix := fmt.Sprintf("cost-%v-%d-", watch, time.Now().UnixNano())
		mem0, chans0, h0 := info("used_memory"), info("pubsub_channels"), heap()
		locks := make([]*lualock.Lock, n)
		for i := range locks {
			locks[i] = c.NewLock(prefix + strconv.Itoa(i))
			if err := locks[i].Lock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if watch {
			backends.WaitFor(t, "subscribed", 30*time.Second, func() bool { return info("pubsub_channels")-chans0 >= n })
		}
		mem1, chans1, h1 := info("used_memory"), info("pubsub_channels"), heap()
		t.Logf("WatchHolds=%v: %d held locks: Redis used_memory +%d B (%d B/lock), pubsub_channels +%d, client heap +%d B (%d B/lock)",
			watch, n, mem1-mem0, (mem1-mem0)/n, chans1-chans0, int64(h1)-int64(h0), (int64(h1)-int64(h0))/n)
		for _, l := range locks {
			_ = l.Unlock(ctx)
		}
		// Lock/unlock round trips on distinct names, one goroutine.
		const rounds = 2000
		calls0 := commandCalls(t, rdb)
		start := time.Now()
		for i := range rounds {
			l := c.NewLock(prefix + "rt-" + strconv.Itoa(i))
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(start)
		calls1 := commandCalls(t, rdb)
		t.Logf("WatchHolds=%v: lock+unlock of a new name: %v per pair, %.2f Redis commands per pair (%d pairs)", watch, took/rounds, float64(calls1-calls0)/rounds, rounds)
	}
	// The delay from force unlock to Done.
	c := newWatchClient(t, rdb, true)
	other := newWatchClient(t, rdb, false)
	var delays []time.Duration
	for i := range 200 {
		name := fmt.Sprintf("cost-delay-%d-%d", time.Now().UnixNano(), i)
		l := c.NewLock(name)
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		waitSubscribed(t, rdb, name, 1)
		start := time.Now()
		if _, err := other.NewLock(name).ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		<-l.Done()
		delays = append(delays, time.Since(start))
		_ = l.Unlock(ctx)
	}
	slices.Sort(delays)
	t.Logf("force unlock -> Done: p50 %v, p99 %v, max %v (%d trials; the ForceUnlock round trip included)",
		delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1], len(delays))
}

// commandCalls is the number of commands Redis has run (INFO commandstats),
// minus the INFO calls themselves.
func commandCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(s, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok || strings.HasPrefix(rest, "info:") {
			continue
		}
		_, v, _ := strings.Cut(rest, "calls=")
		v, _, _ = strings.Cut(v, ",")
		c, _ := strconv.ParseInt(v, 10, 64)
		n += c
	}
	return n
}

// slowReply runs the matching script, then waits and, with drop, loses
// its reply (io.EOF): the script ran, the caller does not know it.
type slowReply struct {
	backends.PassHook
	sha   string
	delay time.Duration
	drop  bool
	armed atomic.Bool
}

func (h *slowReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if !h.armed.Load() || len(a) < 2 || !strings.EqualFold(fmt.Sprint(a[0]), "evalsha") || a[1] != h.sha {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		time.Sleep(h.delay)
		if h.drop {
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return nil
	}
}

// With Options.WatchHolds, the handle's own releases publish on the
// channel its hold listens on: neither its last Unlock whose reply is lost
// nor its own ForceUnlock may be taken for another client's force unlock
// (ErrLockLost). Both failed before the hold stopped listening first.
func TestWatchHolds_ownReleaseIsNoLoss(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		t.Run("unlockReplyLost", func(t *testing.T) {
			h := &slowReply{sha: generated.LockReleaseSHA1, delay: 300 * time.Millisecond, drop: true}
			rdb.AddHook(h)
			c := newWatchClient(t, rdb, true)
			name := backends.UniqueName(t)
			l := c.NewLock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			waitSubscribed(t, rdb, name, 1)
			hold := l.Context()
			h.armed.Store(true)
			err := l.Unlock(ctx)
			h.armed.Store(false)
			if err == nil {
				t.Fatal("Unlock with its reply lost returned nil")
			}
			err2 := l.Unlock(ctx) // settles the first: the lock is gone either way
			if errors.Is(err2, lualock.ErrLockLost) || errors.Is(context.Cause(hold), lualock.ErrLockLost) {
				t.Errorf("own release with a lost reply reported as a loss: second Unlock %v, hold's cause %v", err2, context.Cause(hold))
			}
		})
		t.Run("ownForceUnlock", func(t *testing.T) {
			h := &slowReply{sha: generated.LockForceReleaseSHA1, delay: 50 * time.Millisecond}
			rdb.AddHook(h)
			c := newWatchClient(t, rdb, true)
			name := backends.UniqueName(t)
			l := c.NewLock(name)
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			waitSubscribed(t, rdb, name, 1)
			hold := l.Context()
			h.armed.Store(true)
			_, err := l.ForceUnlock(ctx)
			h.armed.Store(false)
			if err != nil {
				t.Fatal(err)
			}
			if cause := context.Cause(hold); !errors.Is(cause, lualock.ErrNotHeld) {
				t.Errorf("own ForceUnlock ended the hold with %v, want ErrNotHeld", cause)
			}
		})
	})
}
