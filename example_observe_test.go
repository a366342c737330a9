package lualock_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// Options.Logger reports what happens away from the caller's calls, here a
// wait that gave up. (The time is left out to keep the output stable.)
func ExampleOptions_logger() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	client, err := lualock.New(rdb, lualock.Options{ClientID: "worker-7", Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	holder, other := client.NewLock("jobs"), client.NewLock("jobs")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer holder.Unlock(ctx)
	_ = other.TryLock(ctx, 10*time.Millisecond) // held by holder: gives up
	// Output:
	// level=INFO msg="lualock: gave up waiting" kind=reentrant name=jobs owner=worker-7:2 wait=10ms
}

// An Observer receives every acquisition and the end of every hold, for
// metrics (the module extra/lualockotel records them with OpenTelemetry).
func ExampleObserver() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	client, err := lualock.New(rdb, lualock.Options{Observer: lualock.Observer{
		Acquire: func(ev lualock.AcquireEvent) {
			fmt.Printf("acquire %s (%v): err=%v\n", ev.Name, ev.Kind, ev.Err)
		},
		HoldEnd: func(ev lualock.HoldEndEvent) {
			fmt.Printf("hold of %s (%v) ended: %v (lost: %v)\n", ev.Name, ev.Kind, ev.Reason, ev.Reason.Lost())
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	lock := client.NewFairLock("reports")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// acquire reports (fair): err=<nil>
	// hold of reports (fair) ended: released (lost: false)
}
