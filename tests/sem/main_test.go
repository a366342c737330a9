// Package sem tests the scripts of Redisson's semaphore, permit-expirable
// semaphore and count-down latch (lua/semaphore_*.lua,
// lua/expirable_semaphore_*.lua, lua/latch_*.lua) through their
// generated wrappers, on miniredis (whose clock the tests drive), a
// standalone redis-server and a 3-master cluster (tests/harness): the keys,
// values, scores and messages each script leaves, as
// docs/PROTOCOL-PRIMITIVES.md sections 4 to 6 give Redisson's layout;
// bad input refused with nothing changed; resent calls (a lost reply)
// counted once; expired permits coming back; and an over-subscription
// detector under load.
//
// The runtime objects (Semaphore, PermitExpirableSemaphore,
// CountDownLatch) come on the new engine; this suite checks the data
// contract they will rely on.
package sem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestMain is the suites' shared one (harness and goleak).
func TestMain(m *testing.M) { backends.Main(m) }

const (
	latchMS = 10_000 // request latch lifetime, ms
	timeout = 5 * time.Second
)

// backend is one kind of Redis the scripts run on.
type backend struct {
	name    string
	rdb     redis.UniversalClient
	mini    *miniredis.Miniredis // set for miniredis, whose clock a test may drive
	cluster bool
	// publish is the scripts' publish argument: miniredis has no SPUBLISH,
	// the real servers (Redis 7) get both kinds.
	publish string
}

// forEachBackend runs f as a subtest on miniredis, the shared standalone
// server and the shared cluster. The real servers skip (or fail, with
// LUALOCK_REQUIRE_REDIS=1) when redis-server is not installed.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		f(t, backend{name: "miniredis", rdb: c, mini: mr, publish: "publish"})
	})
	t.Run("standalone", func(t *testing.T) {
		s := harness.SharedStandalone(t)
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		f(t, backend{name: "standalone", rdb: c, publish: "both"})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := harness.SharedCluster(t)
		c := cl.Client()
		t.Cleanup(func() { _ = c.Close() })
		f(t, backend{name: "cluster", rdb: c, cluster: true, publish: "both"})
	})
}

// ctx returns a context for one test's calls.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// uniqueName returns a name no other test uses; braced puts it under a
// hash tag of its own.
func uniqueName(t *testing.T, braced bool) string {
	n := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + fmt.Sprintf("_%d", time.Now().UnixNano())
	if braced {
		return "{app}:" + n
	}
	return n
}

// tag is the contract's tag(p, N).
func tag(p, n string) string {
	if strings.Contains(n, "{") {
		return p + ":" + n
	}
	return p + ":{" + n + "}"
}

// sfx is the contract's sfx(N, s).
func sfx(n, s string) string {
	if strings.Contains(n, "{") {
		return n + ":" + s
	}
	return "{" + n + "}:" + s
}

// requestKey returns a fresh request latch key of name n.
func requestKey(n string) string {
	return tag("lualock_request", n) + ":" + hex.EncodeToString(newID())
}

// newID returns 16 random bytes: a permit id, as Redisson 4.x stores it.
func newID() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}

// semKeys holds the key names of one semaphore (plain or expirable).
type semKeys struct {
	name, channel, timeouts, claim string
}

func newSemKeys(n string) semKeys {
	return semKeys{name: n, channel: tag("redisson_sc", n), timeouts: sfx(n, "timeout"), claim: tag("lualock_semaphore_claim", n)}
}

// latchChannel is Redisson's count-down latch channel, braces always added.
func latchChannel(n string) string { return "redisson_countdownlatch__channel__{" + n + "}" }

// get reads a string key; "" when missing.
func get(t *testing.T, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// pttl reads a key's PTTL.
func pttl(t *testing.T, rdb redis.UniversalClient, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return d
}

// redisNow returns the server's clock (TIME), which the scripts read; on
// miniredis, whose clock a test may set, the wall clock unless it did.
func redisNow(t *testing.T, b backend, key string) time.Time {
	t.Helper()
	if b.mini != nil {
		return time.Now()
	}
	var now time.Time
	var err error
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		var node *redis.Client
		node, err = cc.MasterForKey(context.Background(), key)
		if err == nil {
			now, err = node.Time(context.Background()).Result()
		}
	} else {
		now, err = b.rdb.Time(context.Background()).Result()
	}
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// listener collects the messages of one channel, from a plain subscriber
// (every backend gets PUBLISH; the real ones get SPUBLISH too).
type listener struct {
	ps *redis.PubSub
	ch <-chan *redis.Message
}

func listen(t *testing.T, b backend, channel string) *listener {
	t.Helper()
	ps := b.rdb.Subscribe(context.Background(), channel)
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatalf("SUBSCRIBE %s: %v", channel, err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	return &listener{ps: ps, ch: ps.Channel()}
}

// next returns the next message's payload, failing after limit.
func (l *listener) next(t *testing.T, limit time.Duration) string {
	t.Helper()
	select {
	case m := <-l.ch:
		return m.Payload
	case <-time.After(limit):
		t.Fatalf("no message within %v", limit)
		return ""
	}
}

// none checks that no message comes within d.
func (l *listener) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-l.ch:
		t.Fatalf("unexpected message %q on %s", m.Payload, m.Channel)
	case <-time.After(d):
	}
}

// wantErr checks that err is a script error reply containing sub.
func wantErr(t *testing.T, err error, sub string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %v, want one containing %q", err, sub)
	}
}

// dump returns the keys of a name with their type and value, to compare a
// state before and after a refused call.
func dump(t *testing.T, rdb redis.UniversalClient, keys ...string) string {
	t.Helper()
	c := context.Background()
	var sb strings.Builder
	for _, k := range keys {
		typ, err := rdb.Type(c, k).Result()
		if err != nil {
			t.Fatalf("TYPE %s: %v", k, err)
		}
		fmt.Fprintf(&sb, "%s %s ", k, typ)
		switch typ {
		case "string":
			sb.WriteString(get(t, rdb, k))
		case "zset":
			zs, err := rdb.ZRangeWithScores(c, k, 0, -1).Result()
			if err != nil {
				t.Fatalf("ZRANGE %s: %v", k, err)
			}
			fmt.Fprint(&sb, zs)
		}
		fmt.Fprintf(&sb, " ttl=%v\n", pttl(t, rdb, k) > 0)
	}
	return sb.String()
}
