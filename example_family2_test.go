package lualock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/lualock/lualock"
)

// A semaphore bounds how many workers use a resource at once, across
// processes and Redisson's clients. Permits taken by a process that dies
// are lost: see ExampleClient_NewPermitExpirableSemaphore.
func ExampleClient_NewSemaphore() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	sem := client.NewSemaphore("exports:slots")
	if _, err := sem.TrySetPermits(ctx, 2); err != nil { // once, by anyone
		log.Fatal(err)
	}
	if err := sem.Acquire(ctx, 2); err != nil {
		log.Fatal(err)
	}
	err := sem.TryAcquire(ctx, 1, 10*time.Millisecond)
	fmt.Println("third worker:", errors.Is(err, lualock.ErrNotObtained))
	if err := sem.Release(ctx, 2); err != nil {
		log.Fatal(err)
	}
	n, _ := sem.AvailablePermits(ctx)
	fmt.Println("available:", n)
	// Output:
	// third worker: true
	// available: 2
}

// A permit-expirable semaphore's permits come back when their holder stops
// renewing them. Acquire's permit is renewed until Release; its Context
// ends if the permit is lost.
func ExampleClient_NewPermitExpirableSemaphore() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	sem := client.NewPermitExpirableSemaphore("render:slots")
	if _, err := sem.TrySetPermits(ctx, 1); err != nil {
		log.Fatal(err)
	}
	permit, err := sem.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("id length:", len(permit.ID()))
	// Work under permit.Context(): it ends if the permit is lost.
	if err := permit.Release(ctx); err != nil {
		log.Fatal(err)
	}
	available, held, _ := sem.AvailablePermits(ctx)
	fmt.Println("available:", available, "held:", held)
	// Output:
	// id length: 32
	// available: 1 held: 0
}

// A count-down latch lets goroutines anywhere wait until N others are done.
func ExampleClient_NewCountDownLatch() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	latch := client.NewCountDownLatch("migration:shards")
	if _, err := latch.TrySetCount(ctx, 2); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		go func() { _ = latch.CountDown(ctx) }()
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := latch.Await(wctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("all shards done")
	// Output:
	// all shards done
}

// A multi-lock takes several locks all or nothing, here on two names.
func ExampleClient_NewMultiLock() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	m := client.NewMultiLock(client.NewLock("account:1"), client.NewLock("account:2"))
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("both accounts locked")
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// both accounts locked
}
