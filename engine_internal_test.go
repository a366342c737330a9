package lualock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// noChannel is the reentrant protocol without pub/sub, as a spin lock's.
type noChannel struct{ *reentrant }

func (noChannel) channel(string) string { return "" }

// A protocol without a channel is polled with the bounded backoff: the
// engine never subscribes, and the waiter still gets the lock once it is
// released.
func TestEngine_noChannel_backsOff(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, Options{RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	holder := c.NewLock("spin")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	spin := c.newLock("spin", KindSpin, noChannel{newReentrant(c.env, "spin", c.cfg.MaxWaitTimer)})
	before := mr.CommandCount()
	if err := spin.TryLock(ctx, 150*time.Millisecond); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("TryLock on a held lock: %v", err)
	}
	// With a 1ms..20ms backoff a 150ms wait makes more than 4 attempts
	// and, bounded, far fewer than 150.
	if n := mr.CommandCount() - before; n < 5 || n > 150 {
		t.Errorf("%d commands in a 150ms wait, want a bounded backoff's", n)
	}
	if s := c.Stats(); s.Subscriptions != 0 || s.Waiters != 0 {
		t.Errorf("stats %+v: a protocol without a channel subscribed", s)
	}
	done := make(chan error, 1)
	go func() { done <- spin.TryLock(ctx, 5*time.Second) }()
	time.Sleep(30 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	if err := spin.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
