package reentrant_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// The Redisson side of the interop test: Redisson 3.x's RedissonLock
// scripts, verbatim apart from the line breaks (tryLockInnerAsync and
// unlockInnerAsync). KEYS[1] is the lock, KEYS[2] its channel; the owner
// field is "<connection manager UUID>:<thread id>".
const (
	redissonTryLock = `if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ` +
		`redis.call('hincrby', KEYS[1], ARGV[2], 1); ` +
		`redis.call('pexpire', KEYS[1], ARGV[1]); ` +
		`return nil; ` +
		`end; ` +
		`return redis.call('pttl', KEYS[1]);`
	redissonUnlock = `if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ` +
		`return nil;` +
		`end; ` +
		`local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ` +
		`if (counter > 0) then ` +
		`redis.call('pexpire', KEYS[1], ARGV[2]); ` +
		`return 0; ` +
		`else ` +
		`redis.call('del', KEYS[1]); ` +
		`redis.call('publish', KEYS[2], ARGV[1]); ` +
		`return 1; ` +
		`end; ` +
		`return nil;`
)

// redissonClient is a foreign Redisson client on the same Redis.
type redissonClient struct {
	rdb redis.UniversalClient
	id  string // the connection manager's UUID
}

func (r redissonClient) field(thread int64) string { return r.id + ":" + strconv.FormatInt(thread, 10) }

// tryLock returns -1 when it took the lock, else the lock's PTTL.
func (r redissonClient) tryLock(ctx context.Context, name string, lease time.Duration, thread int64) (int64, error) {
	v, err := r.rdb.Eval(ctx, redissonTryLock, []string{name}, lease.Milliseconds(), r.field(thread)).Result()
	if errors.Is(err, redis.Nil) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// unlock returns nil when the thread held nothing, 0 when holds remain and
// 1 when it released the lock.
func (r redissonClient) unlock(ctx context.Context, name string, lease time.Duration, thread int64) (*int64, error) {
	v, err := r.rdb.Eval(ctx, redissonUnlock, []string{name, backends.Channel(name)}, 0, lease.Milliseconds(), r.field(thread)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n := v.(int64)
	return &n, nil
}

// Scenario 20: a Redisson client and a lualock client on one lock name
// exclude each other both ways, and a Go waiter is woken promptly by
// Redisson's release message.
func testRedissonInterop(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	const lease = 30 * time.Second
	// redissonClient runs Redisson 3.16.8's scripts, which publish with PUBLISH
	// on every topology: a Go client sharing its locks on a cluster sets
	// PubSubPlain (the default there is sharded, as Redisson 3.22+).
	c := backends.NewClient(t, rdb, lualock.Options{PubSub: lualock.PubSubPlain})
	java := redissonClient{rdb: rdb, id: "8f14e45f-ceea-467a-9575-d0b1a5d3e7b1"}
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	backends.UnlockLater(t, l)

	// Go holds: Redisson is refused, and sees the lease.
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if pttl, err := java.tryLock(ctx, name, lease, 1); err != nil || pttl <= 0 {
		t.Fatalf("Redisson tryLock while Go holds = %d, %v; want refused with the PTTL", pttl, err)
	}
	if r, err := java.unlock(ctx, name, lease, 1); err != nil || r != nil {
		t.Fatalf("Redisson unlock of a lock it does not hold = %v, %v; want nil", r, err)
	}
	// Go's release publishes 0 on the channel Redisson listens to.
	ps := rdb.Subscribe(ctx, backends.Channel(name))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case m := <-ps.Channel():
		if m.Channel != backends.Channel(name) || m.Payload != "0" {
			t.Errorf("release message = %q on %q, want \"0\" on %q", m.Payload, m.Channel, backends.Channel(name))
		}
	case <-time.After(2 * time.Second):
		t.Error("Go's Unlock published nothing on the Redisson channel")
	}
	_ = ps.Close()

	// Redisson holds (re-entrant), Go is refused and sees it locked.
	for range 2 {
		if pttl, err := java.tryLock(ctx, name, lease, 7); err != nil || pttl != -1 {
			t.Fatalf("Redisson tryLock = %d, %v; want acquired", pttl, err)
		}
	}
	if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("Go TryLock while Redisson holds = %v, want ErrNotObtained", err)
	}
	st, err := l.Status(ctx)
	if err != nil || !st.Locked || st.Holds != 0 || st.Lease <= lease-time.Second || st.Lease > lease {
		t.Errorf("Go Status while Redisson holds = %+v, %v; want locked, 0 holds, lease about %v", st, err, lease)
	}
	if r, err := java.unlock(ctx, name, lease, 7); err != nil || r == nil || *r != 0 {
		t.Fatalf("Redisson unlock of one of two holds = %v, %v; want 0", r, err)
	}
	if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("Go TryLock while Redisson holds once = %v, want ErrNotObtained", err)
	}

	// A Go waiter blocked in Lock is woken by Redisson's release message.
	type result struct {
		at  time.Time
		err error
	}
	res := make(chan result, 1)
	go func() {
		err := l.Lock(ctx)
		res <- result{time.Now(), err}
	}()
	if !backends.Eventually(2*time.Second, func() bool {
		return c.Stats().Waiters == 1 && backends.NumSub(t, rdb, []string{backends.Channel(name)})[backends.Channel(name)] == 1
	}) {
		t.Fatal("the Go waiter did not subscribe")
	}
	time.Sleep(50 * time.Millisecond) // let it go to sleep
	r, err := java.unlock(ctx, name, lease, 7)
	released := time.Now()
	if err != nil || r == nil || *r != 1 {
		t.Fatalf("Redisson unlock of its last hold = %v, %v; want 1", r, err)
	}
	select {
	case got := <-res:
		if got.err != nil {
			t.Fatalf("Go Lock: %v", got.err)
		}
		wake := got.at.Sub(released)
		t.Logf("Go waiter acquired %v after Redisson's unlock", wake)
		if wake > 50*time.Millisecond {
			t.Errorf("Go waiter acquired %v after Redisson's unlock, want < 50ms", wake)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Go waiter not woken by Redisson's release message")
	}
	if pttl, err := java.tryLock(ctx, name, lease, 7); err != nil || pttl <= 0 {
		t.Errorf("Redisson tryLock while Go holds = %d, %v; want refused", pttl, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
}
