package lualock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// exampleClient starts an in-process miniredis and a Client on it; stop
// closes both.
func exampleClient() (c *lualock.Client, stop func()) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	c, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return c, func() { c.Close(); rdb.Close(); mr.Close() }
}

// Readers share a read-write lock, a writer is alone; the writer may take
// the read lock too and then leave the write lock (a downgrade), but a
// reader cannot take the write lock (no upgrade).
func ExampleClient_NewReadWriteLock() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()

	a := client.NewReadWriteLock("config")
	b := client.NewReadWriteLock("config")
	if err := a.ReadLock().Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("b reads too:", b.ReadLock().TryLock(ctx, 0) == nil)
	w := client.NewReadWriteLock("config")
	fmt.Println("w writes:", errors.Is(w.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained))
	fmt.Println("a upgrades:", errors.Is(a.WriteLock().TryLock(ctx, 0), lualock.ErrUpgrade))
	_ = a.ReadLock().Unlock(ctx)
	_ = b.ReadLock().Unlock(ctx)

	// Downgrade: write, read, leave the write lock: a keeps reading.
	_ = a.WriteLock().Lock(ctx)
	_ = a.ReadLock().Lock(ctx)
	_ = a.WriteLock().Unlock(ctx)
	fmt.Println("b reads beside a's downgraded hold:", b.ReadLock().TryLock(ctx, 0) == nil)
	_ = b.ReadLock().Unlock(ctx)
	_ = a.ReadLock().Unlock(ctx)
	// Output:
	// b reads too: true
	// w writes: true
	// a upgrades: true
	// b reads beside a's downgraded hold: true
}

// storage is a resource that fencing protects: it remembers the largest
// token it has accepted and refuses a write with a smaller one.
type storage struct {
	mu     sync.Mutex
	latest int64
	value  string
}

var errStale = errors.New("stale fencing token")

func (s *storage) write(token int64, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.latest {
		return fmt.Errorf("%w %d: %d was seen", errStale, token, s.latest)
	}
	s.latest, s.value = token, v
	return nil
}

// A holder paused past its lease (a long GC, a stopped VM) wakes up
// believing it still holds the lock; another owner took it meanwhile with
// a larger token, and the storage refuses the late holder's write.
func ExampleFencedLock() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()
	store := &storage{}

	slow := client.NewFencedLock("ledger")
	t1, err := slow.LockToken(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// slow pauses; its hold is lost (here: forced, as an expiry would).
	if _, err := slow.ForceUnlock(ctx); err != nil {
		log.Fatal(err)
	}

	fast := client.NewFencedLock("ledger")
	t2, err := fast.LockToken(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fast writes:", store.write(t2, "fast"))
	_ = fast.Unlock(ctx)

	// slow resumes and writes with its old token.
	err = store.write(t1, "slow")
	fmt.Println("slow writes:", err, errors.Is(err, errStale))
	fmt.Println("value:", store.value)
	// Output:
	// fast writes: <nil>
	// slow writes: stale fencing token 1: 2 was seen true
	// value: fast
}

// A spin lock waits without pub/sub: for Redis deployments that do not
// offer it, or ACL users denied SUBSCRIBE and PUBLISH.
func ExampleClient_NewSpinLock() {
	client, stop := exampleClient()
	defer stop()
	ctx := context.Background()

	lock := client.NewSpinLock("nightly-job")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	err := client.NewSpinLock("nightly-job").TryLock(ctx, 0)
	fmt.Println("another owner:", errors.Is(err, lualock.ErrNotObtained))
	_ = lock.Unlock(ctx)
	// Output:
	// another owner: true
}
