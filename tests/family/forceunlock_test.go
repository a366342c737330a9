package family

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// forceOp is one call that deletes or resets an object whoever holds it.
type forceOp struct {
	name string
	// rw: the read-write lock's (a reentrant lock's hash is foreign to it,
	// and the other way round); sem: the semaphore's (an integer string is
	// its own shape).
	rw, sem bool
	run     func(ctx context.Context, c *lualock.Client, key string) error
}

func forceUnlock(l *lualock.Lock) error {
	_, err := l.ForceUnlock(context.Background())
	return err
}

var forceOps = []forceOp{
	{name: "reentrant", run: func(_ context.Context, c *lualock.Client, k string) error { return forceUnlock(c.NewLock(k)) }},
	{name: "fair", run: func(_ context.Context, c *lualock.Client, k string) error { return forceUnlock(c.NewFairLock(k)) }},
	{name: "spin", run: func(_ context.Context, c *lualock.Client, k string) error { return forceUnlock(c.NewSpinLock(k)) }},
	{name: "fenced", run: func(_ context.Context, c *lualock.Client, k string) error {
		return forceUnlock(c.NewFencedLock(k).Handle())
	}},
	{name: "read", rw: true, run: func(_ context.Context, c *lualock.Client, k string) error {
		return forceUnlock(c.NewReadWriteLock(k).ReadLock())
	}},
	{name: "write", rw: true, run: func(_ context.Context, c *lualock.Client, k string) error {
		return forceUnlock(c.NewReadWriteLock(k).WriteLock())
	}},
	{name: "drain", sem: true, run: func(ctx context.Context, c *lualock.Client, k string) error {
		_, err := c.NewSemaphore(k).DrainPermits(ctx)
		return err
	}},
	{name: "expirable drain", sem: true, run: func(ctx context.Context, c *lualock.Client, k string) error {
		// The permit-expirable semaphore shares the count: its handle's
		// drain is the semaphore's, on the same key.
		_, err := c.NewSemaphore(c.NewPermitExpirableSemaphore(k).Name()).DrainPermits(ctx)
		return err
	}},
}

// foreignKey is a value at an object's key that is not that object.
type foreignKey struct {
	name string
	want string // what the error says the key is
	// semWant is what the semaphore's error says, when it says more or
	// less than want.
	semWant string
	// forLock, forRW, forSem: foreign to the locks, to the read-write
	// lock, to the semaphore.
	forLock, forRW, forSem bool
	make                   func(ctx context.Context, rdb redis.UniversalClient, k string) error
}

func hset(kv ...string) func(ctx context.Context, rdb redis.UniversalClient, k string) error {
	return func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.HSet(ctx, k, kv).Err()
	}
}

var foreignKeys = []foreignKey{
	{name: "string", want: "a string", semWant: `a string holding "important data"`, forLock: true, forRW: true, forSem: true, make: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.Set(ctx, k, "important data", 0).Err()
	}},
	{name: "integer string", want: "a string", forLock: true, forRW: true, make: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.Set(ctx, k, "12", 0).Err()
	}},
	{name: "fraction string", want: `a string holding "1.5"`, forSem: true, make: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.Set(ctx, k, "1.5", 0).Err()
	}},
	{name: "list", want: "a list", forLock: true, forRW: true, forSem: true, make: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.RPush(ctx, k, "a", "b").Err()
	}},
	{name: "set", want: "a set", forLock: true, forRW: true, forSem: true, make: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.SAdd(ctx, k, "a", "b").Err()
	}},
	{name: "zset", want: "a zset", forLock: true, forRW: true, forSem: true, make: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.ZAdd(ctx, k, redis.Z{Score: 1, Member: "a"}).Err()
	}},
	{name: "stream", want: "a stream", forLock: true, forRW: true, forSem: true, make: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
		return rdb.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: []string{"f", "v"}}).Err()
	}},
	{name: "hash of text", want: `a hash whose field "user" holds "alice"`, semWant: "a hash", forLock: true, forRW: true, forSem: true, make: hset("user", "alice")},
	{name: "hash of a zero count", want: `a hash whose field "c:1" holds "0"`, forLock: true, forRW: true, make: hset("c:1", "0")},
	{name: "hash of two counts", want: "a hash of 2 fields", forLock: true, make: hset("a:1", "1", "b:1", "2")},
	{name: "hash of a bad mode", want: `a hash whose field "mode" holds "other"`, forLock: true, forRW: true, make: hset("mode", "other", "c:1", "1")},
	{name: "read-write lock with text", want: `a hash whose field "c:1" holds "x"`, forRW: true, make: hset("mode", "read", "c:1", "x")},
	{name: "read-write lock", want: "a read-write lock", forLock: true, make: hset("mode", "read", "c:1", "1")},
	{name: "lock", want: "a lock", forRW: true, make: hset("c:1", "1")},
}

// TestForceUnlock_wrongType: every call that deletes or resets an object
// whoever holds it (ForceUnlock of every lock kind, the semaphores' drain)
// leaves a key that is not that object byte for byte as it was (DUMP
// before and after; on miniredis its content read back), and its TTL, and
// returns ErrWrongType saying what the
// key is.
func TestForceUnlock_wrongType(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := t.Context()
		c := backends.NewClient(t, rdb, lualock.Options{})
		checked := 0
		for _, op := range forceOps {
			for _, fk := range foreignKeys {
				if (op.sem && !fk.forSem) || (op.rw && !fk.forRW) || (!op.sem && !op.rw && !fk.forLock) {
					continue
				}
				k := backends.UniqueName(t) + ":" + op.name + ":" + fk.name
				if err := fk.make(ctx, rdb, k); err != nil {
					t.Fatalf("%s: %v", fk.name, err)
				}
				if err := rdb.Expire(ctx, k, 24*time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
				before := snapshot(t, b, rdb, k)
				err := op.run(ctx, c, k)
				want := fk.want
				if op.sem && fk.semWant != "" {
					want = fk.semWant
				}
				if !errors.Is(err, lualock.ErrWrongType) || !strings.Contains(err.Error(), " is "+want+", not ") {
					t.Errorf("%s of %s: %v, want ErrWrongType saying it is %s", op.name, fk.name, err, want)
				}
				if after := snapshot(t, b, rdb, k); after != before {
					t.Errorf("%s of %s changed the key: before %q, after %q", op.name, fk.name, before, after)
				}
				if ttl := backends.PTTL(t, rdb, k); ttl <= (23 * time.Hour).Milliseconds() {
					t.Errorf("%s of %s changed the key's TTL: PTTL %d", op.name, fk.name, ttl)
				}
				checked++
			}
		}
		t.Logf("%d calls on keys that are not their object", checked)
	})
}

// snapshot is key's type and content: its DUMP on a real server (byte for
// byte), and on miniredis, whose DUMP takes strings only, the content read
// back by type.
func snapshot(t *testing.T, b backends.Backend, rdb redis.UniversalClient, k string) string {
	t.Helper()
	ctx := context.Background()
	if !b.Mini() {
		v, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		return v
	}
	typ, err := rdb.Type(ctx, k).Result()
	if err != nil {
		t.Fatalf("TYPE %s: %v", k, err)
	}
	var v any
	switch typ {
	case "string":
		v, err = rdb.Get(ctx, k).Result()
	case "list":
		v, err = rdb.LRange(ctx, k, 0, -1).Result()
	case "set":
		var m []string
		m, err = rdb.SMembers(ctx, k).Result()
		slices.Sort(m)
		v = m
	case "zset":
		v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
	case "stream":
		v, err = rdb.XRange(ctx, k, "-", "+").Result()
	case "hash":
		v, err = rdb.HGetAll(ctx, k).Result()
	}
	if err != nil {
		t.Fatalf("reading %s %s: %v", typ, k, err)
	}
	return fmt.Sprintf("%s %v", typ, v)
}

// TestForceUnlock_redisson: the shape checks let Redisson's own objects
// through: its RLock's hash, its read-write lock in either mode, a
// semaphore's count (negative too) are force-unlocked or drained.
func TestForceUnlock_redisson(t *testing.T) {
	const owner = "8f3b6c1e-3f2a-4c55-9e43-1b2a3c4d5e6f:57" // uuid:threadId
	backends.Each(t, func(t *testing.T, _ backends.Backend, rdb redis.UniversalClient) {
		ctx := t.Context()
		c := backends.NewClient(t, rdb, lualock.Options{})
		for _, tc := range []struct {
			name string
			make func(k string) error
			run  func(k string) (bool, error)
		}{
			{"RLock", func(k string) error { return rdb.HSet(ctx, k, owner, "3").Err() },
				func(k string) (bool, error) { return c.NewLock(k).ForceUnlock(ctx) }},
			{"fair RLock", func(k string) error { return rdb.HSet(ctx, k, owner, "1").Err() },
				func(k string) (bool, error) { return c.NewFairLock(k).ForceUnlock(ctx) }},
			{"read mode", func(k string) error { return rdb.HSet(ctx, k, "mode", "read", owner, "2", "other:1", "1").Err() },
				func(k string) (bool, error) { return c.NewReadWriteLock(k).ReadLock().ForceUnlock(ctx) }},
			{"write mode", func(k string) error { return rdb.HSet(ctx, k, "mode", "write", owner+":write", "1", owner, "1").Err() },
				func(k string) (bool, error) { return c.NewReadWriteLock(k).WriteLock().ForceUnlock(ctx) }},
			{"semaphore", func(k string) error { return rdb.Set(ctx, k, "-2", 0).Err() },
				func(k string) (bool, error) { n, err := c.NewSemaphore(k).DrainPermits(ctx); return n == -2, err }},
		} {
			k := backends.UniqueName(t) + ":" + tc.name
			if err := tc.make(k); err != nil {
				t.Fatal(err)
			}
			if ok, err := tc.run(k); err != nil || !ok {
				t.Errorf("%s: %v, %v; want it force-unlocked (drained)", tc.name, ok, err)
			}
		}
	})
}
