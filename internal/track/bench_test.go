package track_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lualock/lualock/internal/track"
	"github.com/lualock/lualock/tests/harness"
)

// benchKeys is how many keys each benchmark round renews or checks.
const benchKeys = 500

// The call sizes of the benchmarks: one key (a cluster's renewals, where
// names fall in slots of their own), a call tracked by its own reads, and
// larger ones tracked apart, up to the watchdog's default batch.
var benchCallKeys = []int{1, 8, 100, 500}

// BenchmarkRelay_renewal renews 500 held, watched locks on the tracking
// connection in calls of k keys, all calls of a round pipelined, and
// reports the server's CPU per lock renewed (redis-µs/key): what renewing
// and keeping the keys tracked costs Redis.
func BenchmarkRelay_renewal(b *testing.B) {
	for _, k := range benchCallKeys {
		b.Run("keys-"+strconv.Itoa(k), func(b *testing.B) {
			s, rdb := server(b)
			ctx := context.Background()
			tr := newTrackerWith(b, s.Addr(), track.Config{Ping: time.Minute, Batch: benchKeys})
			keys := make([]string, benchKeys)
			for i := range keys {
				keys[i] = "bench-" + strconv.Itoa(i)
				rdb.HSet(ctx, keys[i], "f", 1)
				rdb.PExpire(ctx, keys[i], time.Hour)
				watch(tr, keys[i])
			}
			barrier(b, tr)
			replies := make([]<-chan track.Reply, 0, benchKeys/k)
			cpu := harness.ServerCPU(b, rdb)
			b.ResetTimer()
			for b.Loop() {
				replies = replies[:0]
				for off := 0; off < benchKeys; off += k {
					args, targets := renewal(time.Hour, keys[off:min(off+k, benchKeys)]...)
					ch, _ := tr.Relay("", renewScript, args, targets, time.Hour)
					if ch == nil {
						b.Fatal("Relay refused with the connection up")
					}
					replies = append(replies, ch)
				}
				for _, ch := range replies {
					if r := <-ch; r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric((harness.ServerCPU(b, rdb)-cpu)*1e6/float64(b.N*benchKeys), "redis-µs/key")
		})
	}
}

// BenchmarkCheck_first watches 500 keys at once, checked in calls of k
// keys (Config.Batch), and reports the server's CPU per key checked
// (redis-µs/key). The keys are absent, so that every first check reports
// its watch lost and the round ends when all have.
func BenchmarkCheck_first(b *testing.B) {
	for _, k := range benchCallKeys {
		b.Run("keys-"+strconv.Itoa(k), func(b *testing.B) {
			s, rdb := server(b)
			tr := newTrackerWith(b, s.Addr(), track.Config{Ping: time.Minute, Batch: k, Gather: 20 * time.Millisecond})
			keys := make([]string, benchKeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("absent-%d", i)
			}
			barrier(b, tr) // the connection is up, the script loaded
			lost := make(chan track.Loss, benchKeys)
			cpu := harness.ServerCPU(b, rdb)
			b.ResetTimer()
			for b.Loop() {
				for _, key := range keys {
					tr.Watch(track.Target{Spec: check, Key: key, Field: "f"}, func(l track.Loss) { lost <- l })
				}
				for range keys {
					select {
					case <-lost:
					case <-time.After(10 * time.Second):
						b.Fatal("no loss reported in 10s")
					}
				}
			}
			b.StopTimer()
			b.ReportMetric((harness.ServerCPU(b, rdb)-cpu)*1e6/float64(b.N*benchKeys), "redis-µs/key")
		})
	}
}
