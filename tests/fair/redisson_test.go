package fair_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// ---------------------------------------------------------------------------
// Scenario 9: interop with a Redisson-style fair client.

// foreignAcquire is the acquire algorithm of docs/PROTOCOL.md
// (steps 1-5), as Redisson runs it: the caller's clock comes in ARGV[4].
// It stands for Java Redisson, which is why it is Lua in Go.
const foreignAcquire = `
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout ~= nil and timeout > tonumber(ARGV[4]) then break end
  redis.call('zrem', KEYS[3], first)
  redis.call('lpop', KEYS[2])
end
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
    or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local keys = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local timeout = redis.call('zscore', KEYS[3], ARGV[2])
if timeout ~= false then
  return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4])
end
local lastThreadId = redis.call('lindex', KEYS[2], -1)
local ttl
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
`

// foreignRelease is Redisson's fair unlock (ARGV lease, field, now): on
// full release it publishes 0 on the queue head's own channel.
const foreignRelease = `
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout ~= nil and timeout > tonumber(ARGV[3]) then break end
  redis.call('zrem', KEYS[3], first)
  redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 then
  local nextThreadId = redis.call('lindex', KEYS[2], 0)
  if nextThreadId ~= false then
    redis.call('publish', KEYS[4] .. ':' .. nextThreadId, 0)
  end
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
local nextThreadId = redis.call('lindex', KEYS[2], 0)
if nextThreadId ~= false then
  redis.call('publish', KEYS[4] .. ':' .. nextThreadId, 0)
end
return 1
`

// TestFairLock_Lock_redissonInterop: a Go waiter, a Redisson-style waiter
// and another Go waiter queue on one lock in that order and get it in that
// order. The Go side wakes the foreign waiter on its own channel within
// 50ms of Unlock, and the foreign unlock wakes the Go waiter behind it.
func TestFairLock_Lock_redissonInterop(t *testing.T) {
	backends.ShortParallel(t)
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		const (
			leaseMS = 30_000
			waitMS  = 300_000 // Redisson's default wait budget, and lualock's
		)
		name := backends.UniqueName(t)
		canary := backends.StartCanary(t, 5*time.Millisecond, rdb)
		k := keysOf(name)
		keys := []string{k.lock, k.queue, k.timeouts, k.channel}
		// The foreign scripts are Redisson 3.16.8's, which publish with
		// PUBLISH everywhere: on a cluster a Go client sharing the lock
		// with them sets PubSubPlain (the default there is sharded).
		c := newClient(t, rdb, lualock.Options{PubSub: lualock.PubSubPlain})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			order    []string
			errs     errList
			acquired = make(chan string, 3)
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		record := func(who string) {
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			acquired <- who
		}
		goWaiter := func(who string) *lualock.Lock {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Lock(ctx); err != nil {
					errs.add("%s: Lock: %w", who, err)
					return
				}
				record(who)
			}()
			return l
		}

		goA := goWaiter("go-A")
		waitQueued(t, rdb, k, 1)

		// The foreign waiter: subscribe to its own channel, then try, wait
		// for a message or its ttl, try again, as Redisson's tryLock does.
		const foreign = "00000000-0000-4000-8000-000000000000:7"
		// woken carries when the foreign waiter was first woken after armed,
		// and whether by a message (false: its own timer's retry took the
		// lock before it read the release's message).
		type wake struct {
			at  time.Time
			msg bool
		}
		woken := make(chan wake, 1)
		// armed is set just before go-A's Unlock: the wake-up measured is the
		// release's message, not the "you are next" sent when go-A took the
		// lock.
		var armed atomic.Bool
		ps := rdb.Subscribe(ctx, k.waiterChannel(foreign))
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("foreign subscribe: %v", err)
		}
		msgs := ps.Channel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for {
				now := time.Now().UnixMilli()
				ttl, err := rdb.Eval(ctx, foreignAcquire, keys, leaseMS, foreign, waitMS, now).Int64()
				if errors.Is(err, redis.Nil) {
					if first && armed.Load() {
						first = false
						woken <- wake{time.Now(), false}
					}
					break
				}
				if err != nil {
					errs.add("foreign acquire: %w", err)
					return
				}
				select {
				case <-msgs:
					if first && armed.Load() {
						first = false
						woken <- wake{time.Now(), true}
					}
				case <-time.After(time.Duration(max(ttl, 1)) * time.Millisecond):
				case <-ctx.Done():
					errs.add("foreign waiter: %w", ctx.Err())
					return
				}
			}
			record("foreign")
			time.Sleep(20 * time.Millisecond)
			now := time.Now().UnixMilli()
			r, err := rdb.Eval(ctx, foreignRelease, keys, leaseMS, foreign, now).Int64()
			if err != nil || r != 1 {
				errs.add("foreign release = %d, %v; want 1", r, err)
			}
		}()
		waitQueued(t, rdb, k, 2)
		goB := goWaiter("go-B")
		q := waitQueued(t, rdb, k, 3)
		if q[1] != foreign {
			t.Fatalf("queue %q: the foreign waiter is not second", q)
		}

		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		if who := <-acquired; who != "go-A" {
			t.Fatalf("%s got the lock first, want go-A", who)
		}
		time.Sleep(20 * time.Millisecond)
		armed.Store(true)
		unlocked := time.Now()
		if err := goA.Unlock(ctx); err != nil {
			t.Fatalf("go-A Unlock: %v", err)
		}
		select {
		case w := <-woken:
			// 50ms, + the release's round trip and two wake-ups (the
			// message's reader, the foreign waiter) as a canary measured
			// them in this test. A waiter whose own timer took the lock
			// before it read the message was handed the lock all the same
			// (the order is checked below), but its wake-up is not the
			// message's.
			if lat, load := w.at.Sub(unlocked), canary.Allowance(2, 1); !w.msg {
				t.Logf("foreign waiter took the lock on its timer %v after go-A's Unlock, before reading the message", lat)
			} else if lat > 50*time.Millisecond+load {
				t.Errorf("foreign waiter woken %v after go-A's Unlock, want < 50ms + %v for the load (%v)", lat, load, canary)
			} else {
				t.Logf("foreign waiter woken %v after go-A's Unlock (%v)", lat, canary)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("foreign waiter not woken within 5s of go-A's Unlock")
		}
		for range 2 {
			select {
			case <-acquired:
			case <-time.After(5 * time.Second):
				t.Fatalf("the lock was not handed on within 5s; order so far %v", order)
			}
		}
		if err := goB.Unlock(ctx); err != nil {
			t.Errorf("go-B Unlock: %v", err)
		}
		wg.Wait()
		errs.report(t)
		if want := []string{"go-A", "foreign", "go-B"}; !slices.Equal(order, want) {
			t.Errorf("acquisition order %v, want %v", order, want)
		}
		_ = ps.Close()
		checkClean(t, rdb, name, time.Second, c)
	})
}
