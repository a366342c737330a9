package interop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// TestRedissonFairDepth: the real Redisson client (each jar of
// LUALOCK_REDISSON_JARS) and lualock share one fair queue, on standalone
// Redis and the cluster. Behind a Go holder, waiters arrive one
// at a time in a fixed pattern: a Redisson waiter that waits, a Go waiter
// that waits, a Redisson waiter that gives up (tryLock's wait runs out:
// Redisson's give-up, which reads the whole list and moves everyone behind
// it up one budget), a Go waiter that gives up (its context ends: from the
// middle of the queue, a tombstone). Then 2 000 fake entries are queued
// behind them all, so that every script runs on a deep queue. Once the
// give-ups are over the holder releases: the waiters that stayed must get
// the lock in their order of arrival, Redisson's and Go's mixed, each
// woken in turn (a Redisson waiter that missed its message would wait for
// its 30s lease timer and fail the bound).
func TestRedissonFairDepth(t *testing.T) {
	for _, j := range redissonJars(t) {
		for i, newBackend := range backends(t) {
			t.Run(j.String()+"/"+backendNames[i], func(t *testing.T) {
				b := newBackend(t)
				var opts lualock.Options
				if b.cluster && !j.atLeast(3, 22) {
					opts.PubSub = lualock.PubSubBoth
				}
				ag := startAgent(t, j, b.cluster, javaWatchdog, b.addrs)
				fairDepth(t, b, ag, opts)
			})
		}
	}
}

func fairDepth(t *testing.T, b backend, ag *agent, opts lualock.Options) {
	const (
		waiters = 16
		fakes   = 2000
		// giveUp is how long the Redisson waiters that give up wait: past
		// the arrivals of all the others.
		giveUp = 8 * time.Second
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rdb := b.rdb
	c := newClient(t, rdb, opts)
	name := uniqueName(t)
	queue, timeouts := queueKey(name), "redisson_lock_timeout:{"+name+"}"
	list := name + ":order"
	defer rdb.Del(context.Background(), list, queue, timeouts)
	holder := c.NewFairLock(name)
	if err := holder.LockLease(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	var (
		want      []string
		java      []<-chan reply // the waiters that stay
		javaGone  []<-chan reply // the ones that give up
		goCancels []context.CancelFunc
		wg        sync.WaitGroup
		errs      = make(chan error, waiters)
	)
	start := time.Now()
	queued := int64(0)
	for i := range waiters {
		var label string
		switch i % 4 {
		case 0:
			label = fmt.Sprintf("java%d", i)
			java = append(java, ag.send(label, "push", name, "f", list, label, 10))
			want = append(want, label)
		case 1:
			label = fmt.Sprintf("go%d", i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := c.NewFairLock(name)
				if err := l.Lock(ctx); err != nil {
					errs <- fmt.Errorf("%s: Lock: %w", label, err)
					return
				}
				rdb.RPush(ctx, list, label)
				time.Sleep(10 * time.Millisecond)
				if err := l.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("%s: Unlock: %w", label, err)
				}
			}()
			want = append(want, label)
		case 2:
			label = fmt.Sprintf("javaGone%d", i)
			javaGone = append(javaGone, ag.send(label, "trylock", name, "f", giveUp.Milliseconds(), 30_000))
		case 3:
			label = fmt.Sprintf("goGone%d", i)
			gctx, gcancel := context.WithCancel(ctx)
			goCancels = append(goCancels, gcancel)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := c.NewFairLock(name).Lock(gctx)
				if !errors.Is(err, context.Canceled) {
					errs <- fmt.Errorf("%s: Lock = %v, want context.Canceled", label, err)
				}
			}()
		}
		queued++
		waitUntil(t, 10*time.Second, label+" queued", func() bool { return rdb.LLen(ctx, queue).Val() == queued })
	}
	if time.Since(start) > giveUp/2 {
		t.Fatalf("the arrivals took %v, too close to the Redisson give-ups' %v wait", time.Since(start), giveUp)
	}
	appendFakes(t, ctx, rdb, queue, timeouts, fakes)

	// The give-ups: Go's first (tombstones in the middle), then Redisson's.
	for _, gc := range goCancels {
		gc()
	}
	for i, ch := range javaGone {
		if r := ag.await(t, ch, fmt.Sprintf("give-up %d", i), giveUp+30*time.Second); r.val != "false" {
			t.Fatalf("Redisson waiter %d that should give up got the lock (%s)", i, r.val)
		}
	}
	q := rdb.LRange(ctx, queue, 0, -1).Val()
	if len(q) != waiters/2+waiters/4+fakes {
		t.Logf("queue length %d after the give-ups (%d live, up to %d tombstones, %d fakes)", len(q), waiters/2, waiters/4, fakes)
	}

	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, ch := range java {
		ag.await(t, ch, fmt.Sprintf("push %d", i), time.Minute)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	took := time.Since(released)
	got := rdb.LRange(ctx, list, 0, -1).Val()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order of acquisition %v, want the order of arrival %v", got, want)
	}
	// Eight handoffs of 10ms holds, each woken by its message: a missed
	// wake-up would cost a 30s lease timer.
	if took > 15*time.Second {
		t.Errorf("the %d waiters took %v to pass the lock on: a wake-up was missed", len(want), took)
	}
	t.Logf("%d waiters (Redisson and Go) handed the lock on in %v with %d entries behind them", len(want), took.Round(time.Millisecond), fakes)
}

// appendFakes queues n fake waiters at the back, each deadline one budget
// (Redisson's default, 5 min) after the one ahead: a deep queue that never
// asks and is not due during the test.
func appendFakes(t *testing.T, ctx context.Context, rdb redis.UniversalClient, queue, timeouts string, n int) {
	t.Helper()
	last, err := rdb.LIndex(ctx, queue, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	score, err := rdb.ZScore(ctx, timeouts, last).Result()
	if err != nil {
		t.Fatal(err)
	}
	fields := make([]any, n)
	zs := make([]redis.Z, n)
	for i := range n {
		score += 300_000
		f := fmt.Sprintf("%08x-0000-4000-8000-00000000fake:%d", i, i)
		fields[i] = f
		zs[i] = redis.Z{Score: score, Member: f}
	}
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, queue, fields...)
		p.ZAdd(ctx, timeouts, zs...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
