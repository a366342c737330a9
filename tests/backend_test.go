package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lualock/lualock/tests/harness"
)

// TestMain runs the integration tests, stops the shared servers and fails
// the run when a goroutine is left behind.
func TestMain(m *testing.M) {
	code := harness.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// backend is one kind of Redis the suites run on.
type backend struct {
	name string
	// new returns a client on a Redis of this kind; the test's cleanup closes
	// it. Keys of different tests never collide: use unique names.
	new func(t *testing.T) redis.UniversalClient
	// cluster is true for the 3-master Redis Cluster.
	cluster bool
	// mini is set for miniredis, whose clock the suite may drive.
	mini *miniredis.Miniredis
}

// backends returns miniredis (its clock following real time, as a real
// server's does), the shared standalone redis-server and the shared
// 3-master cluster. The real servers skip (or fail, with
// LUALOCK_REQUIRE_REDIS=1) when redis-server is not installed.
func backendList() []backend {
	return []backend{
		{name: "miniredis", new: newMini},
		{name: "standalone", new: func(t *testing.T) redis.UniversalClient {
			s := harness.SharedStandalone(t)
			c := redis.NewClient(&redis.Options{Addr: s.Addr()})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{name: "cluster", cluster: true, new: func(t *testing.T) redis.UniversalClient {
			cl := harness.SharedCluster(t)
			c := cl.Client()
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	}
}

// forEachBackend runs f as a subtest on every backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend, rdb redis.UniversalClient)) {
	for _, b := range backendList() {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.new(t)
			f(t, b, rdb)
		})
	}
}

// newMini starts a miniredis whose clock follows real time: miniredis does
// not expire keys by itself, so ClockTTL makes it advance every TTL by the
// wall-clock time elapsed, at each command; TIME inside scripts reads the
// real clock too.
func newMini(t *testing.T) redis.UniversalClient {
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// uniqueName returns a lock name no other test uses, with a hash tag or
// without one as the test name suggests.
func uniqueName(t *testing.T) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + fmt.Sprintf("_%d", time.Now().UnixNano())
}

// keysLeft lists the keys of a lock name that are still in Redis: the lock,
// and the fair lock's queue and deadlines. Latches are named with a request
// id and expire on their own; pass withLatches to count them as well.
func keysLeft(t *testing.T, rdb redis.UniversalClient, name string, withLatches bool) []string {
	t.Helper()
	ctx := context.Background()
	tagged := "{" + name + "}"
	if strings.Contains(name, "{") {
		tagged = name
	}
	var left []string
	for _, k := range []string{name, "redisson_lock_queue:" + tagged, "redisson_lock_timeout:" + tagged} {
		n, err := rdb.Exists(ctx, k).Result()
		if err != nil {
			t.Fatalf("EXISTS %s: %v", k, err)
		}
		if n > 0 {
			left = append(left, k)
		}
	}
	if withLatches {
		pattern := "redisson_unlock_latch:" + tagged + ":*"
		var keys []string
		var err error
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			var mu sync.Mutex
			err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				ks, err := c.Keys(ctx, pattern).Result()
				mu.Lock()
				keys = append(keys, ks...)
				mu.Unlock()
				return err
			})
		} else {
			keys, err = rdb.Keys(ctx, pattern).Result()
		}
		if err != nil {
			t.Fatalf("KEYS %s: %v", pattern, err)
		}
		left = append(left, keys...)
	}
	return left
}

// passHook is a redis.Hook that changes nothing: the test hooks embed it and
// override the methods they need.
type passHook struct{}

func (passHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (passHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (passHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// failScript fails the EVALSHA calls of one script without sending them,
// while armed: with io.EOF an outcome the client cannot know, with a Redis
// error reply (backends.RedisErr) a server that refuses the call. When field is
// set, only the calls whose ARGV[2] (the owner field of the acquire and
// release scripts) is field fail.
type failScript struct {
	passHook
	sha   string
	field string
	err   error
	armed atomic.Bool
	hits  atomic.Int32
}

func (h *failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() && h.matches(cmd.Args()) {
			h.hits.Add(1)
			cmd.SetErr(h.err)
			return h.err
		}
		return next(ctx, cmd)
	}
}

func (h *failScript) matches(args []any) bool {
	if len(args) < 3 || !strings.EqualFold(fmt.Sprint(args[0]), "evalsha") || args[1] != h.sha {
		return false
	}
	if h.field == "" {
		return true
	}
	numKeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	field := 3 + numKeys + 1 // ARGV[2]
	return err == nil && field < len(args) && fmt.Sprint(args[field]) == h.field
}
