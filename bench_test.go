package lualock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// BenchmarkLock_LockUnlock measures one uncontended Lock and Unlock on a
// private redis-server (tests/harness), with the allocations of the whole
// process per pair (go test -run - -bench LockUnlock -benchmem): the
// runtime's and go-redis's, the figure the side-by-side benchmark in bench/
// reports, which the issue bounds at 30. (On miniredis the in-process Lua
// interpreter's allocations would hide the runtime's.)
func BenchmarkLock_LockUnlock(b *testing.B) {
	srv := harness.StartStandalone(b)
	for _, fair := range []bool{false, true} {
		name := "reentrant"
		if fair {
			name = "fair"
		}
		b.Run(name, func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer func() { _ = rdb.Close() }()
			c, err := lualock.New(rdb, lualock.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			l := c.NewLock("bench")
			if fair {
				l = c.NewFairLock("bench")
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
