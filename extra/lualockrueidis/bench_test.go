package lualockrueidis_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/extra/lualockrueidis"
	"github.com/lualock/lualock/tests/harness"
)

// BenchmarkLock_uncontended is lock+unlock of a reentrant lock with its
// scripts sent by rueidis, by 1 goroutine and by 32 each on its own lock
// (as the root package's and tests/reentrant's benchmarks do with
// go-redis): go test -run '^$' -bench . ./extra/lualockrueidis.
func BenchmarkLock_uncontended(b *testing.B) {
	for _, g := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			s := harness.SharedStandalone(b)
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaintNotificationsConfig: harness.NoMaintNotifications()})
			b.Cleanup(func() { _ = rdb.Close() })
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(rc.Close)
			c, err := lualock.New(rdb, lualock.Options{Scripter: lualockrueidis.Scripter(rc)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			ctx := context.Background()
			prefix := fmt.Sprintf("lualockrueidis-bench-%d-%d-", g, time.Now().UnixNano())
			var next atomic.Int64
			b.ReportAllocs()
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((g + procs - 1) / procs)
			if g == 1 {
				l := c.NewLock(prefix + "0")
				for b.Loop() {
					if err := l.Lock(ctx); err != nil {
						b.Fatal(err)
					}
					if err := l.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				l := c.NewLock(prefix + strconv.FormatInt(next.Add(1), 10))
				for pb.Next() {
					if err := l.Lock(ctx); err != nil {
						b.Error(err)
						return
					}
					if err := l.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
