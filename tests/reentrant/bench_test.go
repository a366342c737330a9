package reentrant_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

// Benchmarks run against the shared standalone redis-server. Each reports
// its rate beside a reference measured in the same run (go-redis PING), so
// the ratios hold on a noisy machine:
//
//	go test ./tests/reentrant -run '^$' -bench . -benchtime 3s -count 5

// pingRate measures go-redis PING round trips per second over d with g
// goroutines.
func pingRate(rdb redis.UniversalClient, g int, d time.Duration) float64 {
	var n atomic.Int64
	ctx := context.Background()
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				_ = rdb.Ping(ctx).Err()
				n.Add(1)
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// BenchmarkLock_uncontended is lock+unlock of a free lock (watchdog mode),
// by 1 and by 32 goroutines each on its own lock. It reports ops/s and
// xPING: that rate over go-redis PING/s with as many goroutines, measured
// right after. Two round trips per op make 0.5 the ceiling; the target is
// 0.45, and at most 30 allocations per op. The scripter=autopipeline runs
// send the scripts through go-redis's auto-pipeliner (Options.Scripter);
// their PING rate is still a plain client's.
func BenchmarkLock_uncontended(b *testing.B) {
	for _, tc := range []struct {
		g  int
		ap bool
	}{{1, false}, {32, false}, {1, true}, {32, true}} {
		g := tc.g
		name := fmt.Sprintf("goroutines=%d", g)
		if tc.ap {
			name += "/scripter=autopipeline"
		}
		b.Run(name, func(b *testing.B) {
			rdb, c := backends.BenchClient(b, tc.ap)
			ctx := context.Background()
			prefix := fmt.Sprintf("bench-uncontended-%d-%d-", g, time.Now().UnixNano())
			var next atomic.Int64
			b.ReportAllocs()
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((g + procs - 1) / procs)
			start := time.Now()
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
			} else {
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
			}
			elapsed := time.Since(start)
			b.StopTimer()
			rate := float64(b.N) / elapsed.Seconds()
			ping := pingRate(rdb, g, min(max(elapsed, 200*time.Millisecond), 2*time.Second))
			b.ReportMetric(rate, "ops/s")
			b.ReportMetric(ping, "ping/s")
			b.ReportMetric(rate/ping, "xPING")
		})
	}
}
