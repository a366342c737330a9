// Package family tests the scripts of Redisson's read-write, fenced and spin locks:
// the read-write lock (lua/rwlock_*.lua), the fenced lock
// (lua/fenced_acquire.lua) and the spin lock (the reentrant scripts with
// publish "none"), through their generated wrappers, on miniredis, a
// standalone redis-server and a 3-master cluster (tests/harness). Each test
// checks the exact keys, fields, values, expiries and messages that
// docs/PROTOCOL-PRIMITIVES.md (sections 2, 3 and 8) gives, so
// that Redisson's clients read what these scripts write. forceunlock_test.go
// checks that every force release (and the semaphore's drain) leaves a key
// that is not its object as it was.
package family

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

func TestMain(m *testing.M) { backends.Main(m) }

const (
	lease   int64 = 30_000 // lease of most calls, ms
	short   int64 = 2_000  // a lease that a later call visibly sets
	long    int64 = 60_000 // a lease longer than the others
	latchMS int64 = 10_000 // unlock latch lifetime, ms
)

// pub is the scripts' publish argument on backend b: both kinds on the
// cluster (the tests listen to both), PUBLISH elsewhere.
func pub(b backends.Backend) string {
	if b.Cluster {
		return "both"
	}
	return "publish"
}

// bothNames adapts a scenario over one lock's keys to Scenario.Run: it
// runs as subtest plain, for a lock name without a hash tag, then as
// tagged, for one with a hash tag (whose derived keys are built
// differently), on the same client.
func bothNames(f func(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names)) func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	return func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		for _, tagged := range []bool{false, true} {
			t.Run(map[bool]string{false: "plain", true: "tagged"}[tagged], func(t *testing.T) {
				f(t, b, rdb, newNames(backends.UniqueName(t), tagged))
			})
		}
	}
}

// ---- key names, as PROTOCOL-PRIMITIVES.md section 1 builds them -----------

// tag is tag(p, N).
func tag(p, n string) string {
	if strings.Contains(n, "{") {
		return p + ":" + n
	}
	return p + ":{" + n + "}"
}

// names are the keys and channels of one lock name.
type names struct {
	name     string
	prefix   string // P: {N}, or N when N has a hash tag
	rwlock   string // the read-write lock's channel
	channel  string // the reentrant (fenced, spin) lock's channel
	token    string // the fenced lock's token counter
	latchPfx string
	reqs     int
}

func newNames(base string, tagged bool) names {
	n := base
	if tagged {
		n = "rw-" + base[len(base)/2:] + "{" + base + "}x"
	}
	p := "{" + n + "}"
	if strings.Contains(n, "{") {
		p = n
	}
	return names{
		name:     n,
		prefix:   p,
		rwlock:   tag("redisson_rwlock", n),
		channel:  tag("redisson_lock__channel", n),
		token:    tag("redisson_lock_token", n),
		latchPfx: tag("redisson_unlock_latch", n) + ":",
	}
}

// timeoutKey is the timeout key of read hold i of owner field f.
func (n names) timeoutKey(f string, i int) string {
	return n.prefix + ":" + f + ":rwlock_timeout:" + strconv.Itoa(i)
}

// latch names a new release request's latch: 32 hex characters, as
// Redisson's request ids.
func (n *names) latch() string {
	n.reqs++
	return n.latchPfx + fmt.Sprintf("%032x", time.Now().UnixNano()+int64(n.reqs))
}
