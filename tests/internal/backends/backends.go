// Package backends is what the integration suites under tests/ share: the
// kinds of Redis every scenario runs on (miniredis, the harness's
// standalone redis-server and its 3-master cluster), the TestMain of every
// suite, client constructors, go-redis hooks that inject faults, and the
// waits and Redis probes that several suites use. A helper used by one
// suite only stays in that suite.
package backends

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/harness"
)

// Main is the TestMain of every suite: it runs the tests, stops the shared
// servers and fails the run when a goroutine is left behind.
func Main(m *testing.M) { harness.Main(m) }

// Backend is one kind of Redis the suites run on.
type Backend struct {
	Name string
	// New returns a client on a Redis of this kind; the test's cleanup
	// closes it. Keys of different tests never collide: use unique names.
	New func(t *testing.T) redis.UniversalClient
	// Cluster is true for the 3-master Redis Cluster.
	Cluster bool
}

// Mini reports whether b is miniredis (no sharded pub/sub, every script
// call parsed by gopher-lua: the load tests run fewer rounds there).
func (b Backend) Mini() bool { return b.Name == "miniredis" }

// All returns miniredis (its clock following real time, as a real
// server's does), the shared standalone redis-server and the shared
// 3-master cluster. The real servers skip (or fail, with
// LUALOCK_REQUIRE_REDIS=1) when redis-server is not installed.
func All() []Backend {
	return []Backend{
		{Name: "miniredis", New: newMini},
		{Name: "standalone", New: func(t *testing.T) redis.UniversalClient {
			s := harness.SharedStandalone(t)
			c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaintNotificationsConfig: harness.NoMaintNotifications()})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{Name: "cluster", Cluster: true, New: func(t *testing.T) redis.UniversalClient {
			cl := harness.SharedCluster(t)
			c := cl.Client()
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	}
}

// Each runs f as a subtest on every backend.
func Each(t *testing.T, f func(t *testing.T, b Backend, rdb redis.UniversalClient)) {
	for _, b := range All() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.New(t)
			f(t, b, rdb)
		})
	}
}

// Scenario is one row of a suite's table: a behaviour checked on every
// backend.
type Scenario struct {
	Name string
	// Parallel runs the scenario beside the other parallel ones of its
	// backend. Scenarios whose bounds are in milliseconds leave it false:
	// they run first, one at a time, on an otherwise idle process.
	Parallel bool
	Run      func(t *testing.T, b Backend, rdb redis.UniversalClient)
}

// Table runs every scenario on every backend, as subtests
// backend/scenario (go test -run 'TestX/standalone/name' runs one): the
// sequential scenarios first, in table order, then the parallel ones
// together. Each scenario gets its own client (and its own miniredis).
func Table(t *testing.T, scenarios []Scenario) {
	for _, b := range All() {
		t.Run(b.Name, func(t *testing.T) {
			for _, s := range scenarios {
				t.Run(s.Name, func(t *testing.T) {
					if s.Parallel {
						t.Parallel()
					}
					s.Run(t, b, b.New(t))
				})
			}
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
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaintNotificationsConfig: harness.NoMaintNotifications()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// OnClient adapts a scenario that needs only the client to Scenario.Run.
func OnClient(f func(t *testing.T, rdb redis.UniversalClient)) func(t *testing.T, b Backend, rdb redis.UniversalClient) {
	return func(t *testing.T, _ Backend, rdb redis.UniversalClient) { f(t, rdb) }
}
