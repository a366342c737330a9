package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// TestClient_ShardedPubSub_wakesWaiters runs the reentrant and the fair
// lock with Options.ShardedPubSub on the real servers (miniredis has no
// SPUBLISH): a waiter blocked in Lock is woken by the release's SPUBLISH long
// before its fallback timer, and every subscription is gone afterwards.
func TestClient_ShardedPubSub_wakesWaiters(t *testing.T) {
	for _, b := range backends() {
		if b.name == "miniredis" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			rdb := b.new(t)
			for _, fair := range []bool{false, true} {
				c, err := lualock.New(rdb, lualock.Options{ShardedPubSub: true, MaxWaitTimer: 5 * time.Second, SubscriptionLinger: -1})
				if err != nil {
					t.Fatal(err)
				}
				newLock := c.NewLock
				if fair {
					newLock = c.NewFairLock
				}
				ctx := context.Background()
				// Names in different slots, so a cluster needs several
				// sharded connections.
				for _, name := range []string{uniqueName(t) + "-a", uniqueName(t) + "-b", uniqueName(t) + "-c"} {
					holder, waiter := newLock(name), newLock(name)
					if err := holder.Lock(ctx); err != nil {
						t.Fatal(err)
					}
					got := make(chan time.Time, 1)
					errc := make(chan error, 1)
					go func() {
						err := waiter.Lock(ctx)
						got <- time.Now()
						errc <- err
					}()
					waitFor(t, func() bool { return c.Stats().Waiters == 1 })
					time.Sleep(20 * time.Millisecond) // let the waiter's retry after subscribing pass
					released := time.Now()
					if err := holder.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
					woke := <-got
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
					if d := woke.Sub(released); d > time.Second {
						t.Errorf("fair=%v %s: waiter acquired %v after the release: the SPUBLISH did not wake it", fair, name, d)
					}
					if err := waiter.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
					if left := keysLeft(t, rdb, name, false); len(left) > 0 {
						t.Errorf("keys left: %v", left)
					}
				}
				if st := c.Stats(); st.Subscriptions != 0 || st.Waiters != 0 {
					t.Errorf("fair=%v: stats after the waits: %+v", fair, st)
				}
				if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
					t.Fatal(err)
				}
			}
		})
	}
}

// waitFor polls cond for up to 2 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 2s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
