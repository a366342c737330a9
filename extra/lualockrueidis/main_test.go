package lualockrueidis_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lualock/lualock/tests/harness"
)

// TestMain stops the shared servers after the tests and fails the run when
// a goroutine outlives them (a rueidis or lualock client left open).
func TestMain(m *testing.M) { harness.Main(m) }

// deployment is one Redis the tests run on, with a go-redis client and a
// rueidis client on it, both closed at the test's end.
type deployment struct {
	name string
	rdb  redis.UniversalClient
	rc   rueidis.Client
	// scripts counts the script calls rdb sent itself: with the Scripter
	// in place lualock must send none through it.
	scripts *atomic.Int64
}

// onEach runs f on the shared standalone server and on the shared
// 3-master cluster, as subtests.
func onEach(t *testing.T, f func(t *testing.T, d deployment)) {
	t.Helper()
	for _, name := range []string{"standalone", "cluster"} {
		t.Run(name, func(t *testing.T) {
			var addrs []string
			var rdb redis.UniversalClient
			if name == "standalone" {
				s := harness.SharedStandalone(t)
				addrs = []string{s.Addr()}
				rdb = redis.NewClient(&redis.Options{Addr: s.Addr(), MaintNotificationsConfig: harness.NoMaintNotifications()})
			} else {
				cl := harness.SharedCluster(t)
				addrs = cl.Addrs()
				rdb = cl.Client()
			}
			t.Cleanup(func() { _ = rdb.Close() })
			n := new(atomic.Int64)
			rdb.AddHook(scriptHook{n})
			f(t, deployment{name: name, rdb: rdb, rc: newRueidis(t, addrs...), scripts: n})
		})
	}
}

// newRueidis returns a rueidis client on addrs (a cluster when they are a
// cluster's nodes), closed at the test's end.
func newRueidis(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// scriptHook counts the script calls (EVAL, EVALSHA and their _RO forms) a
// go-redis client sends, alone or in pipelines.
type scriptHook struct{ n *atomic.Int64 }

func (h scriptHook) count(cmd redis.Cmder) {
	if strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") {
		h.n.Add(1)
	}
}

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// counting counts the commands sent through a rueidis client, by name.
type counting struct {
	rueidis.Client
	mu sync.Mutex
	n  map[string]int
}

func (c *counting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[strings.ToLower(cmd.Commands()[0])]++
	c.mu.Unlock()
	return c.Client.Do(ctx, cmd)
}

func (c *counting) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// uniqueName is a lock name (and key) of this test alone.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("lualockrueidis_%s_%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
}
