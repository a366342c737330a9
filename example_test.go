package lualock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// The main flow: one Client per process, one handle per owner, Lock, work,
// Unlock. This example runs on an in-process miniredis.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	client, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	lock := client.NewLock("reports:daily")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked")

	other := client.NewLock("reports:daily")
	err = other.TryLock(ctx, 0)
	fmt.Println("another owner:", errors.Is(err, lualock.ErrNotObtained))

	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("unlocked")
	// Output:
	// locked
	// another owner: true
	// unlocked
}

// A Client on a Redis Cluster. Every key of one lock shares the lock's hash
// slot, so the scripts never fail with CROSSSLOT. ContextTimeoutEnabled
// lets contexts bound calls on a Redis that stops answering.
func ExampleNew_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"},
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
	client, err := lualock.New(rdb, lualock.Options{WatchdogLease: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	_ = client.NewLock("orders:{42}")
}

// Many goroutines locking at once: the lock scripts go through go-redis's
// auto-pipeliner (go-redis 9.22 or later), which sends the calls of
// concurrent goroutines to Redis together. Pub/sub and renewals still use
// rdb, which owns the auto-pipeliner and stops it when closed.
func ExampleOptions_scripter() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	defer rdb.Close()
	ap, err := rdb.AutoPipeline()
	if err != nil {
		log.Fatal(err)
	}
	client, err := lualock.New(rdb, lualock.Options{Scripter: ap})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	_ = client.NewLock("jobs:{7}")
}

// Re-entry goes through the same handle; each Lock needs its Unlock.
func ExampleClient_NewLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock := client.NewLock("inventory")
	_ = lock.Lock(ctx)
	_ = lock.Lock(ctx) // re-entry: hold count 2
	n, _ := lock.HoldCount(ctx)
	fmt.Println(n)
	_ = lock.Unlock(ctx)
	_ = lock.Unlock(ctx) // released: waiters are woken
}

// A fair lock serves waiters in the order they first asked, across
// processes.
func ExampleClient_NewFairLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{FairWait: time.Minute})
	defer client.Close()
	ctx := context.Background()

	lock := client.NewFairLock("printer")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
}

// A fair lock with its own wait budget: a waiter whose process dies holds
// the queue up for at most this long. Every client of this lock, a
// Redisson one included, must use the same budget.
func ExampleClient_NewFairLockWait() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock := client.NewFairLockWait("deploys", 30*time.Second)
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
}

// TryLock waits at most the given time; ErrNotObtained says it was not
// enough.
func ExampleLock_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock := client.NewLock("nightly-job")
	switch err := lock.TryLock(ctx, 2*time.Second); {
	case errors.Is(err, lualock.ErrNotObtained):
		fmt.Println("another instance runs the job")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	fmt.Println("running the job")
}

// Do the protected work under the hold's context: it ends when the lock is
// lost (deleted, expired, Redis restarted), and context.Cause says why.
func ExampleLock_Context() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock := client.NewLock("migration")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	work := lock.Context()
	select {
	case <-time.After(time.Minute): // the work
		_ = lock.Unlock(ctx)
	case <-work.Done():
		if errors.Is(context.Cause(work), lualock.ErrLockLost) {
			log.Print("lock lost: stop writing")
		}
	}
}

// LockLease takes the lock for a fixed time, with no watchdog: it expires
// then unless unlocked first.
func ExampleLock_LockLease() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock := client.NewLock("cache-refresh")
	if err := lock.LockLease(ctx, 5*time.Second); err != nil {
		log.Fatal(err)
	}
	if err := lock.Unlock(ctx); errors.Is(err, lualock.ErrNotHeld) {
		log.Print("took longer than the lease: someone else may have run too")
	}
}

// Unlock after an error: the outcome of a release whose reply was lost is
// unknown, and calling Unlock again replays it rather than releasing a
// second hold.
func ExampleLock_Unlock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock := client.NewLock("report")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	err := lock.Unlock(ctx)
	switch {
	case errors.Is(err, lualock.ErrLockLost):
		log.Print("the lock was lost before the unlock: check the work")
	case errors.Is(err, lualock.ErrNotHeld):
		log.Print("the lease had run out")
	case err != nil:
		err = lock.Unlock(ctx) // safe: replays the first outcome
	}
	_ = err
}

// ForceUnlock deletes a lock whoever holds it, for an operator's clean-up;
// the holder finds its hold lost at its next renewal.
func ExampleLock_ForceUnlock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()

	deleted, err := client.NewLock("stuck-job").ForceUnlock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted:", deleted)
}

// Status reads whether the lock is held, this handle's hold count and the
// remaining lease in one round trip.
func ExampleLock_Status() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	client, _ := lualock.New(rdb, lualock.Options{})
	defer client.Close()

	st, err := client.NewLock("reports:daily").Status(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("locked=%v holds=%d lease=%v\n", st.Locked, st.Holds, st.Lease)
}

// Close stops the client's goroutines and wakes its waiters with ErrClosed.
// It releases nothing: unlock first what should be free at once.
func ExampleClient_Close() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	defer rdb.Close()
	client, _ := lualock.New(rdb, lualock.Options{})

	lock := client.NewLock("shutdown-demo")
	if err := lock.Lock(context.Background()); err == nil {
		_ = lock.Unlock(context.Background())
	}
	if err := client.Close(); err != nil {
		log.Print(err)
	}
}
