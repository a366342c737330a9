package backends

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// BenchClient returns a client of the shared standalone redis-server
// (pool of 64) and a lualock client on it, both closed by the benchmark's
// cleanup. With autoPipeline, the lock scripts go through go-redis's
// auto-pipeliner (Options.Scripter).
func BenchClient(b *testing.B, autoPipeline bool) (redis.UniversalClient, *lualock.Client) {
	b.Helper()
	s := harness.SharedStandalone(b)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 64})
	var opts lualock.Options
	if autoPipeline {
		opts.Scripter = AutoPipeliner(b, rdb)
	}
	c, err := lualock.New(rdb, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = c.Close()
		_ = rdb.Close()
	})
	return rdb, c
}
