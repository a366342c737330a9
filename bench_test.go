package lualock_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/harness"
)

// BenchmarkLock_LockUnlock measures one uncontended Lock and Unlock on a
// private redis-server (tests/harness), with the allocations of the whole
// process per pair (go test -run - -bench LockUnlock -benchmem): the
// runtime's and go-redis's, the figure the side-by-side benchmark in bench/
// reports, which the issue bounds at 30. (On miniredis the in-process Lua
// interpreter's allocations would hide the runtime's.) Besides ns/op and
// allocs/op it reports, from INFO commandstats before and after (the
// client closed first, so that its background latch deletions count),
// the Redis commands per pair (cmds/op, a script's inner calls included,
// as Redis counts them) and the CPU time of the redis-server process per
// pair (redis-cpu-µs/op, INFO cpu: commands and socket I/O), the CPU time
// of the benchmark's own process per pair (client-cpu-µs/op, getrusage:
// lualock, go-redis, the Go runtime; on Unix); with -v it logs each
// command's calls and execution time per pair. The -plain runs send the
// scripts on the go-redis client itself (Options.Scripter = rdb).
func BenchmarkLock_LockUnlock(b *testing.B) {
	srv := harness.StartStandalone(b)
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			benchLockUnlockOpts(b, srv.Addr(), 1, kind, lualock.Options{})
		})
		if kind == "reentrant" || kind == "fair" {
			b.Run(kind+"-nospin", func(b *testing.B) {
				benchLockUnlockOpts(b, srv.Addr(), 1, kind, lualock.Options{ReplySpin: -1})
			})
			b.Run(kind+"-plain", func(b *testing.B) {
				benchLockUnlock(b, srv.Addr(), 1, kind, true)
			})
		}
	}
}

// BenchmarkLock_LockUnlockParallel is BenchmarkLock_LockUnlock with 32
// goroutines, each on a lock of its own (uncontended), sharing one Client:
// what a server handling concurrent requests does, and where the default
// scripter's pipelining (against -plain: go-redis's pool, one request per
// connection at a time) and the runtime's shared state (the watchdog, the
// latch sweeper) show.
func BenchmarkLock_LockUnlockParallel(b *testing.B) {
	srv := harness.StartStandalone(b)
	for _, kind := range benchKinds {
		b.Run(kind+"-32", func(b *testing.B) {
			benchLockUnlock(b, srv.Addr(), 32, kind, false)
		})
		if kind == "reentrant" || kind == "fair" {
			b.Run(kind+"-32-plain", func(b *testing.B) {
				benchLockUnlock(b, srv.Addr(), 32, kind, true)
			})
		}
	}
}

// benchKinds are the kinds of lock the lock+unlock benchmarks measure:
// the reentrant and the fair lock, a read-write lock's read and write
// sides, and the fenced lock.
var benchKinds = []string{"reentrant", "fair", "read", "write", "fenced"}

// benchLock returns c's lock of kind on name.
func benchLock(c *lualock.Client, kind, name string) *lualock.Lock {
	switch kind {
	case "fair":
		return c.NewFairLock(name)
	case "read":
		return c.NewReadWriteLock(name).ReadLock()
	case "write":
		return c.NewReadWriteLock(name).WriteLock()
	case "fenced":
		return c.NewFencedLock(name).Handle()
	}
	return c.NewLock(name)
}

// benchLockUnlock runs b.N lock+unlock pairs of a kind of lock split over
// g goroutines, each on its own lock, and reports commands and Redis
// execution time per pair. With plain set, the scripts go through the
// go-redis client itself (Options.Scripter = rdb), one call per
// connection, instead of the default pipelined connection.
func benchLockUnlock(b *testing.B, addr string, g int, kind string, plain bool) {
	benchLockUnlockWith(b, addr, g, kind, lualock.Options{}, plain)
}

// benchLockUnlockOpts is benchLockUnlock with the Client's options, on
// the default pipelined connection.
func benchLockUnlockOpts(b *testing.B, addr string, g int, kind string, opts lualock.Options) {
	benchLockUnlockWith(b, addr, g, kind, opts, false)
}

// benchLockUnlockWith is benchLockUnlock with the Client's options; plain
// sets Options.Scripter to the go-redis client.
func benchLockUnlockWith(b *testing.B, addr string, g int, kind string, opts lualock.Options, plain bool) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: max(10, g)})
	defer func() { _ = rdb.Close() }()
	if plain {
		opts.Scripter = rdb
	}
	c, err := lualock.New(rdb, opts)
	if err != nil {
		b.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()
	locks := make([]*lualock.Lock, g)
	for i := range locks {
		locks[i] = benchLock(c, kind, "bench:"+kind+":"+strconv.Itoa(i))
		// Warm up: scripts loaded, connections dialled.
		if err := locks[i].Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := locks[i].Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	before := commandStats(b, rdb)
	cpu0, cpuOK := processCPU()
	b.ReportAllocs()
	b.ResetTimer()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	errs := make([]error, g) // one per goroutine: no allocation in the loop
	for i, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if errs[i] = l.Lock(ctx); errs[i] != nil {
					return
				}
				if errs[i] = l.Unlock(ctx); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu1, _ := processCPU()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	_ = c.Close()
	closed = true
	after := commandStats(b, rdb)
	b.ReportMetric(float64(after.calls-before.calls)/float64(b.N), "cmds/op")
	b.ReportMetric((after.cpu-before.cpu)*1e6/float64(b.N), "redis-cpu-µs/op")
	if cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "client-cpu-µs/op")
	}
	if testing.Verbose() {
		for _, name := range slices.Sorted(maps.Keys(after.per)) {
			d := after.per[name]
			d.calls -= before.per[name].calls
			d.usec -= before.per[name].usec
			if d.calls > 0 {
				b.Logf("%-8s %6.3f calls/op %7.3f µs/op %6.3f µs/call", name,
					float64(d.calls)/float64(b.N), float64(d.usec)/float64(b.N), float64(d.usec)/float64(d.calls))
			}
		}
	}
}

// BenchmarkLock_scriptsPipelined runs the acquire and release scripts of a
// kind without the runtime, 100 pairs to a pipeline, and reports the time
// Redis spends executing them per pair (script-µs/op: INFO commandstats'
// EVALSHA usec, the scripts' inner calls included). Redis runs pipelined
// calls back to back, so this figure moves less with the machine's load
// than the same one in BenchmarkLock_LockUnlock, where every call waits
// for a wake-up: it is the one to compare two versions of the scripts by
// (run at both commits, alternately).
func BenchmarkLock_scriptsPipelined(b *testing.B) {
	srv := harness.StartStandalone(b)
	const field = "9f0c2a6e1b7d4c3e8a5f6b1d2c3e4f5a:1"
	n := 0
	kinds := []struct {
		name string
		pair func(ctx context.Context, p redis.Pipeliner)
	}{
		{"reentrant", func(ctx context.Context, p redis.Pipeliner) {
			generated.LockAcquireCmd(ctx, p, generated.LockAcquireKeys{Lock: "bench:r"},
				generated.LockAcquireArgs{LeaseMS: 30_000, Field: field, Holds: 1})
			generated.LockReleaseCmd(ctx, p, generated.LockReleaseKeys{Lock: "bench:r",
				Channel: "redisson_lock__channel:{bench:r}", Latch: "redisson_unlock_latch:{bench:r}:0123456789abcdef0123456789abcdef"},
				generated.LockReleaseArgs{LeaseMS: 30_000, Field: field, LatchMS: 10_000, Publish: "publish", Holds: 1})
		}},
		{"fair", func(ctx context.Context, p redis.Pipeliner) {
			fk := generated.FairAcquireKeys{Lock: "bench:f", Queue: "redisson_lock_queue:{bench:f}",
				Timeouts: "redisson_lock_timeout:{bench:f}", Channel: "redisson_lock__channel:{bench:f}"}
			generated.FairAcquireCmd(ctx, p, fk,
				generated.FairAcquireArgs{LeaseMS: 30_000, Field: field, WaitMS: 300_000, Holds: 1, Publish: "publish"})
			generated.FairReleaseCmd(ctx, p, generated.FairReleaseKeys{Lock: fk.Lock, Queue: fk.Queue,
				Timeouts: fk.Timeouts, Channel: fk.Channel, Latch: "redisson_unlock_latch:{bench:f}:0123456789abcdef0123456789abcdef"},
				generated.FairReleaseArgs{LeaseMS: 30_000, Field: field, LatchMS: 10_000, WaitMS: 300_000, Publish: "publish", Holds: 1})
		}},
		{"read", func(ctx context.Context, p redis.Pipeliner) {
			generated.RwlockReadAcquireCmd(ctx, p, generated.RwlockReadAcquireKeys{Lock: "bench:rw", Prefix: "{bench:rw}"},
				generated.RwlockReadAcquireArgs{LeaseMS: 30_000, Field: field, Holds: 1})
			generated.RwlockReadReleaseCmd(ctx, p, generated.RwlockReadReleaseKeys{Lock: "bench:rw", Prefix: "{bench:rw}",
				Channel: "redisson_rwlock:{bench:rw}", Latch: "redisson_unlock_latch:{bench:rw}:0123456789abcdef0123456789abcdef"},
				generated.RwlockReadReleaseArgs{Field: field, LatchMS: 10_000, Publish: "publish", Holds: 1})
		}},
		{"write", func(ctx context.Context, p redis.Pipeliner) {
			generated.RwlockWriteAcquireCmd(ctx, p, generated.RwlockWriteAcquireKeys{Lock: "bench:w"},
				generated.RwlockWriteAcquireArgs{LeaseMS: 30_000, Field: field, Holds: 1})
			generated.RwlockWriteReleaseCmd(ctx, p, generated.RwlockWriteReleaseKeys{Lock: "bench:w",
				Channel: "redisson_rwlock:{bench:w}", Latch: "redisson_unlock_latch:{bench:w}:0123456789abcdef0123456789abcdef"},
				generated.RwlockWriteReleaseArgs{LeaseMS: 30_000, Field: field, LatchMS: 10_000, Publish: "publish", Holds: 1})
		}},
		{"semaphore", func(ctx context.Context, p redis.Pipeliner) {
			// Each acquisition needs a request latch of its own, or it
			// replays the first one's outcome.
			n++
			req := "lualock_request:{bench:s}:" + strconv.Itoa(n)
			generated.SemaphoreAcquireCmd(ctx, p, generated.SemaphoreAcquireKeys{Sem: "bench:s", Request: req,
				Claim: "lualock_semaphore_claim:{bench:s}"}, generated.SemaphoreAcquireArgs{Permits: 1, LatchMS: 1_000})
			generated.SemaphoreReleaseCmd(ctx, p, generated.SemaphoreReleaseKeys{Sem: "bench:s",
				Channel: "redisson_sc:{bench:s}", Request: req + "r"}, generated.SemaphoreReleaseArgs{Permits: 1, LatchMS: 1_000, Publish: "publish"})
		}},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer func() { _ = rdb.Close() }()
			if err := generated.LoadAll(ctx, rdb); err != nil {
				b.Fatal(err)
			}
			if err := rdb.Set(ctx, "bench:s", 1, 0).Err(); err != nil {
				b.Fatal(err)
			}
			const batch = 100
			pairs := (b.N + batch - 1) / batch * batch
			before := commandStats(b, rdb)
			b.ResetTimer()
			for i := 0; i < pairs; i += batch {
				p := rdb.Pipeline()
				for range batch {
					k.pair(ctx, p)
				}
				cmds, err := p.Exec(ctx)
				if err != nil && err != redis.Nil {
					b.Fatal(err)
				}
				for _, c := range cmds {
					if err := c.Err(); err != nil && err != redis.Nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			after := commandStats(b, rdb)
			us := after.per["evalsha"].usec - before.per["evalsha"].usec
			b.ReportMetric(float64(us)/float64(pairs), "script-µs/op")
			b.ReportMetric(float64(after.calls-before.calls)/float64(pairs), "cmds/op")
		})
	}
}

// cmdStats sums INFO commandstats over every command but INFO itself (a
// script's inner calls included: Redis counts them), keeps each command's
// figures (a script's usec includes its inner calls'), and has the server
// process's CPU time (INFO cpu, user + sys, in seconds).
type cmdStats struct {
	calls int64
	cpu   float64
	per   map[string]cmdStat
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

func commandStats(b *testing.B, rdb *redis.Client) cmdStats {
	info, err := rdb.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	s := cmdStats{per: map[string]cmdStat{}}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, _ := strconv.ParseFloat(rest, 64)
			s.cpu += f
			continue
		}
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		var c cmdStat
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				c.calls = n
			case "usec":
				c.usec = n
			}
		}
		s.per[strings.TrimPrefix(name, "cmdstat_")] = c
		s.calls += c.calls
	}
	return s
}
