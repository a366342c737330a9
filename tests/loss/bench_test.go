package loss_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// BenchmarkLossLatency measures, per backend and cause, the time from the
// change that ends a hold (sent by another connection just before the
// clock starts) to the holder's Done: b.N trials, reported as p50-ms and
// p99-ms. The hold is taken 20ms before the change (its tracking set up).
// The expiry is PEXPIRE 1 (its 1ms included). Restart: see
// BenchmarkLossLatencyRestart.
//
//	go test -run - -bench LossLatency -benchtime 200x ./tests/loss/
func BenchmarkLossLatency(b *testing.B) {
	for _, be := range append(backends.All(), backends.Backend{Name: "sentinel"}) {
		if be.Mini() {
			continue
		}
		b.Run(be.Name, func(b *testing.B) {
			rdb := benchClient(b, be)
			c, err := lualock.New(rdb, lualock.Options{WatchdogLease: lease})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			other, err := lualock.New(rdb, lualock.Options{NoHoldTracking: true})
			if err != nil {
				b.Fatal(err)
			}
			defer other.Close()
			ctx := context.Background()
			for _, cause := range []string{"del", "expiry", "force", "flushall", "overwrite"} {
				b.Run(cause, func(b *testing.B) {
					var took []time.Duration
					for i := range b.N {
						name := fmt.Sprintf("lat-%s-%d-%d", cause, time.Now().UnixNano(), i)
						l := c.NewLock(name)
						if err := l.Lock(ctx); err != nil {
							b.Fatal(err)
						}
						time.Sleep(20 * time.Millisecond)
						start := time.Now()
						switch cause {
						case "del":
							err = rdb.Del(ctx, name).Err()
						case "expiry":
							err = rdb.PExpire(ctx, name, time.Millisecond).Err()
						case "force":
							_, err = other.NewLock(name).ForceUnlock(ctx)
						case "flushall":
							err = flushAll(ctx, rdb)
						case "overwrite":
							err = rdb.Set(ctx, name, "x", 0).Err()
						}
						if err != nil {
							b.Fatal(err)
						}
						select {
						case <-l.Done():
						case <-time.After(waitLoss):
							b.Fatalf("%s: no loss in %v", cause, waitLoss)
						}
						took = append(took, time.Since(start))
						_ = l.Unlock(ctx)
						rdb.Del(ctx, name)
					}
					report(b, took)
				})
			}
		})
	}
}

// BenchmarkLossLatencyRestart measures the time from the first reply of
// the restarted node that held the lock which serves a key (EXISTS polled
// every 1ms) to the holder's Done, on a server, a cluster and a primary
// behind a Sentinel of its own (b.N restarts).
//
//	go test -run - -bench LossLatencyRestart -benchtime 20x ./tests/loss/
func BenchmarkLossLatencyRestart(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, rdb redis.UniversalClient, nodeOf func(name string) *harness.Server) {
		c, err := lualock.New(rdb, lualock.Options{WatchdogLease: lease})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		var took []time.Duration
		for i := range b.N {
			name := fmt.Sprintf("lat-restart-%d", i)
			l := c.NewLock(name)
			if err := backends.Eventually(10*time.Second, func() bool { return l.Lock(ctx) == nil }); !err {
				b.Fatal("Lock after the restart failed for 10s")
			}
			time.Sleep(20 * time.Millisecond)
			node := nodeOf(name)
			if err := node.Restart(); err != nil {
				b.Fatal(err)
			}
			// From the first reply that serves the key (a cluster's
			// restarted primary answers CLUSTERDOWN for its first 2s).
			direct := node.Client()
			for direct.Exists(ctx, name).Err() != nil {
				time.Sleep(time.Millisecond)
			}
			start := time.Now()
			direct.Close()
			select {
			case <-l.Done():
			case <-time.After(waitLoss):
				b.Fatalf("no loss in %v", waitLoss)
			}
			took = append(took, time.Since(start)) // ~0 when it ended before
			_ = l.Unlock(ctx)
		}
		report(b, took)
	}
	for _, cluster := range []bool{false, true} {
		b.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(b *testing.B) {
			rdb, nodeOf := ownServers(b, cluster)
			run(b, rdb, nodeOf)
		})
	}
	b.Run("sentinel", func(b *testing.B) {
		rdb, s := startSentinelPrimary(b)
		run(b, rdb, func(string) *harness.Server { return s })
	})
}

func benchClient(b *testing.B, be backends.Backend) redis.UniversalClient {
	var rdb redis.UniversalClient
	if be.Name == "sentinel" {
		return startSentinel(b) // closed by its cleanup
	}
	if be.Cluster {
		rdb = harness.SharedCluster(b).Client()
	} else {
		rdb = harness.SharedStandalone(b).Client()
	}
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func flushAll(ctx context.Context, rdb redis.UniversalClient) error {
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		return cl.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushAll(ctx).Err() })
	}
	return rdb.FlushAll(ctx).Err()
}

// report reports the p50 and p99 of took, in milliseconds.
func report(b *testing.B, took []time.Duration) {
	b.StopTimer()
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[min(len(took)-1, len(took)*99/100)]), "p99-ms")
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
	b.ReportMetric(0, "ns/op")
}

// TestLoss_cost measures what the hold tracker costs, with and without
// it (Options.NoHoldTracking), for docs/BENCHMARKS.md: Redis commands per
// lock+unlock, commands per held lock per renewal period, Redis memory
// and client heap per held lock, and the tracker's connections. It runs
// only with LUALOCK_MEASURE_LOSS=1, on the standalone server, the cluster
// and behind a Sentinel.
//
//	LUALOCK_MEASURE_LOSS=1 go test -run TestLoss_cost -v ./tests/loss/
func TestLoss_cost(t *testing.T) {
	if os.Getenv("LUALOCK_MEASURE_LOSS") != "1" {
		t.Skip("set LUALOCK_MEASURE_LOSS=1 to measure")
	}
	realBackends(t, measureCost)
	t.Run("sentinel", func(t *testing.T) { measureCost(t, backends.Backend{Name: "sentinel"}, startSentinel(t)) })
}

// measureCost is TestLoss_cost on one deployment.
func measureCost(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	ctx := context.Background()
	for _, tracked := range []bool{false, true} {
		// Lock+unlock pairs on distinct names, one goroutine.
		c := newClient(t, rdb, lualock.Options{NoHoldTracking: !tracked})
		const pairs = 2000
		calls0 := commands(t, rdb)
		for i := range pairs {
			l := c.NewLock(fmt.Sprintf("cost-%v-%d-%d", tracked, time.Now().UnixNano(), i))
			if err := l.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond) // the background latch deletions
		calls1 := commands(t, rdb)
		t.Logf("tracked=%v: %.2f Redis commands per lock+unlock (%d pairs)", tracked, float64(calls1-calls0)/pairs, pairs)

		// Held locks: memory, heap, connections (no renewal meanwhile).
		const n = 10000
		c2 := newClient(t, rdb, lualock.Options{NoHoldTracking: !tracked})
		mem0, keys0, h0 := info(t, rdb, "used_memory"), info(t, rdb, "tracking_total_keys"), heap()
		locks := make([]*lualock.Lock, n)
		for i := range locks {
			locks[i] = c2.NewLock(fmt.Sprintf("held-%v-%d-%d", tracked, time.Now().UnixNano(), i))
			if err := locks[i].Lock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		backends.WaitFor(t, "tracked", 30*time.Second, func() bool {
			return !tracked || info(t, rdb, "tracking_total_keys")-keys0 >= n
		})
		mem1, keys1, h1 := info(t, rdb, "used_memory"), info(t, rdb, "tracking_total_keys"), heap()
		st := c2.Stats()
		t.Logf("tracked=%v: %d held locks: Redis used_memory +%d B (%d B/lock), tracking_total_keys +%d, client heap +%d B (%d B/lock); tracker: %d watches, %d connections",
			tracked, n, mem1-mem0, (mem1-mem0)/n, keys1-keys0, int64(h1)-int64(h0), (int64(h1)-int64(h0))/n, st.Tracked, st.TrackingConns)
		for _, l := range locks {
			_ = l.Unlock(ctx)
		}

		// Commands per held lock per renewal period.
		const m, periods = 2000, 5
		const period = time.Second // lease 3s
		var renewErrs atomic.Int64
		var renewErr atomic.Value
		c3 := newClient(t, rdb, lualock.Options{NoHoldTracking: !tracked, WatchdogLease: 3 * period,
			Observer: lualock.Observer{Renew: func(e lualock.RenewEvent) {
				if e.Err != nil {
					renewErrs.Add(1)
					renewErr.Store(e.Err.Error())
				}
			}}})
		defer func() { t.Logf("renew errors %d, last %v", renewErrs.Load(), renewErr.Load()) }()
		renewed := make([]*lualock.Lock, m)
		for i := range renewed {
			renewed[i] = c3.NewLock(fmt.Sprintf("renewed-%v-%d-%d", tracked, time.Now().UnixNano(), i))
			if err := renewed[i].Lock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(period)
		calls0, scripts0 := commands(t, rdb), scriptCalls(t, rdb)
		time.Sleep(periods * period)
		calls1, scripts1 := commands(t, rdb), scriptCalls(t, rdb)
		t.Logf("tracked=%v: %d held locks over %d renewal periods, per held lock per period: %.4f script calls (EVALSHA, EVALSHA_RO), %.3f commands (those inside scripts included)",
			tracked, m, periods, float64(scripts1-scripts0)/m/periods, float64(calls1-calls0)/m/periods)
		ended := 0
		for _, l := range renewed {
			if l.Context().Err() != nil {
				if ended++; ended == 1 {
					t.Logf("first ended: %v", context.Cause(l.Context()))
				}
			}
			_ = l.Unlock(ctx)
		}
		if ended > 0 {
			t.Errorf("tracked=%v: %d of %d renewed holds ended", tracked, ended, m)
		}
		t.Logf("stats %+v", c3.Stats())
	}
}

// commands is the number of commands Redis has run (INFO commandstats,
// every primary), less the INFO and CLUSTER calls.
func commands(t *testing.T, rdb redis.UniversalClient) int64 {
	return calls(t, rdb, func(cmd string) bool { return cmd != "info" && !strings.HasPrefix(cmd, "cluster|") })
}

// scriptCalls is the number of EVALSHA and EVALSHA_RO calls Redis has
// run, on every primary.
func scriptCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	return calls(t, rdb, func(cmd string) bool { return cmd == "evalsha" || cmd == "evalsha_ro" })
}

// calls sums the calls of the commands that count, on every primary.
func calls(t *testing.T, rdb redis.UniversalClient, counts func(cmd string) bool) int64 {
	var n int64
	each(t, rdb, func(r *redis.Client) {
		s, err := r.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(s, "\r\n") {
			rest, ok := strings.CutPrefix(line, "cmdstat_")
			cmd, v, _ := strings.Cut(rest, ":calls=")
			if !ok || !counts(cmd) {
				continue
			}
			v, _, _ = strings.Cut(v, ",")
			c, _ := strconv.ParseInt(v, 10, 64)
			n += c
		}
	})
	return n
}

// info sums an INFO field over every primary.
func info(t *testing.T, rdb redis.UniversalClient, field string) int64 {
	var n int64
	each(t, rdb, func(r *redis.Client) {
		s, err := r.Info(context.Background(), "memory", "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(s, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
	})
	return n
}

// each calls f for every primary, one at a time.
func each(t *testing.T, rdb redis.UniversalClient, f func(*redis.Client)) {
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		if err := r.ForEachMaster(context.Background(), func(_ context.Context, n *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			f(n)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	case *redis.Client:
		f(r)
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
