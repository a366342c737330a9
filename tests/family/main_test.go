// Package family tests the scripts of Redisson's lock family (issue 14):
// the read-write lock (lua/rwlock_*.lua), the fenced lock
// (lua/fenced_acquire.lua) and the spin lock (the reentrant scripts with
// publish "none"), through their generated wrappers, on miniredis, a
// standalone redis-server and a 3-master cluster (tests/harness). Each test
// checks the exact keys, fields, values, expiries and messages that
// ../../../shared/docs/PROTOCOL-FAMILY.md (sections 2, 3 and 8) gives, so
// that Redisson's clients read what these scripts write.
package family

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/luart"
	"github.com/lualock/lualock/tests/harness"
)

// TestMain runs the tests, stops the shared servers and fails the run when
// a goroutine is left behind.
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

const (
	lease   int64 = 30_000 // lease of most calls, ms
	short   int64 = 2_000  // a lease that a later call visibly sets
	long    int64 = 60_000 // a lease longer than the others
	latchMS int64 = 10_000 // unlock latch lifetime, ms
	timeout       = 5 * time.Second
)

// backend is one kind of Redis the tests run on.
type backend struct {
	name    string
	cluster bool
	// publish is the scripts' publish argument on this backend: both kinds
	// on the cluster (the tests listen to both), PUBLISH elsewhere.
	publish string
	new     func(t *testing.T) redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{name: "miniredis", publish: "publish", new: func(t *testing.T) redis.UniversalClient {
			mr := miniredis.RunT(t)
			mr.ClockTTL(true) // TTLs follow the wall clock, as a real server's do
			c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{name: "standalone", publish: "publish", new: func(t *testing.T) redis.UniversalClient {
			c := harness.SharedStandalone(t).Client()
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{name: "cluster", cluster: true, publish: "both", new: func(t *testing.T) redis.UniversalClient {
			c := harness.SharedCluster(t).Client()
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
	}
}

// forEach runs f on every backend, for a lock name without a hash tag and
// one with a hash tag (whose derived keys are built differently).
func forEach(t *testing.T, f func(t *testing.T, b backend, rdb redis.UniversalClient, n names)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.new(t)
			for _, tagged := range []bool{false, true} {
				t.Run(map[bool]string{false: "plain", true: "tagged"}[tagged], func(t *testing.T) {
					f(t, b, rdb, newNames(uniqueName(t), tagged))
				})
			}
		})
	}
}

func uniqueName(t *testing.T) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// ---- key names, as PROTOCOL-FAMILY.md section 1 builds them ---------------

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

// ---- script calls -----------------------------------------------------------

func readAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) (int64, error) {
	return generated.RwlockReadAcquire(context.Background(), rdb,
		generated.RwlockReadAcquireKeys{Lock: n.name, Prefix: n.prefix},
		generated.RwlockReadAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func readRelease(rdb redis.Scripter, n names, latch, field string, before int64, publish string) (*int64, error) {
	return generated.RwlockReadRelease(context.Background(), rdb,
		generated.RwlockReadReleaseKeys{Lock: n.name, Prefix: n.prefix, Channel: n.rwlock, Latch: latch},
		generated.RwlockReadReleaseArgs{Field: field, LatchMS: latchMS, Publish: publish, Holds: before})
}

func writeAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) (int64, error) {
	return generated.RwlockWriteAcquire(context.Background(), rdb,
		generated.RwlockWriteAcquireKeys{Lock: n.name},
		generated.RwlockWriteAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func writeRelease(rdb redis.Scripter, n names, latch, field string, before, lease int64, publish string) (*int64, error) {
	return generated.RwlockWriteRelease(context.Background(), rdb,
		generated.RwlockWriteReleaseKeys{Lock: n.name, Channel: n.rwlock, Latch: latch},
		generated.RwlockWriteReleaseArgs{LeaseMS: lease, Field: field, LatchMS: latchMS, Publish: publish, Holds: before})
}

func forceRelease(rdb redis.Scripter, n names, latch, mode, publish string) (bool, error) {
	return generated.RwlockForceRelease(context.Background(), rdb,
		generated.RwlockForceReleaseKeys{Lock: n.name, Channel: n.rwlock, Latch: latch},
		generated.RwlockForceReleaseArgs{Mode: mode, LatchMS: latchMS, Publish: publish})
}

func readRenew(rdb redis.Scripter, lease int64, locks []names, fields ...string) ([]int64, error) {
	var keys []string
	for _, n := range locks {
		keys = append(keys, n.name, n.prefix)
	}
	return generated.RwlockReadRenew(context.Background(), rdb,
		generated.RwlockReadRenewKeys{Keys: keys}, generated.RwlockReadRenewArgs{LeaseMS: lease, Fields: fields})
}

func rwStatus(rdb redis.Scripter, n names, field string) ([]int64, error) {
	return generated.RwlockStatus(context.Background(), rdb,
		generated.RwlockStatusKeys{Lock: n.name}, generated.RwlockStatusArgs{Field: field})
}

func fencedAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) ([]int64, error) {
	return generated.FencedAcquire(context.Background(), rdb,
		generated.FencedAcquireKeys{Lock: n.name, Token: n.token},
		generated.FencedAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func lockAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) (int64, error) {
	return generated.LockAcquire(context.Background(), rdb,
		generated.LockAcquireKeys{Lock: n.name},
		generated.LockAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func lockRelease(rdb redis.Scripter, n names, latch, field string, before, lease int64, publish string) (*int64, error) {
	return generated.LockRelease(context.Background(), rdb,
		generated.LockReleaseKeys{Lock: n.name, Channel: n.channel, Latch: latch},
		generated.LockReleaseArgs{LeaseMS: lease, Field: field, LatchMS: latchMS, Publish: publish, Holds: before})
}

func lockForceRelease(rdb redis.Scripter, n names, latch, publish string) (bool, error) {
	return generated.LockForceRelease(context.Background(), rdb,
		generated.LockForceReleaseKeys{Lock: n.name, Channel: n.channel, Latch: latch},
		generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: publish})
}

// ---- checks -----------------------------------------------------------------

// acquired returns a check that an acquisition returned 0 and no error:
// acquired(t, "what")(call()).
func acquired(t *testing.T, what string) func(int64, error) {
	return func(got int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got != 0 {
			t.Fatalf("%s = %d, want 0 (acquired)", what, got)
		}
	}
}

// refused returns a check that an acquisition returned a wait in
// [1, maxWait] ms and no error.
func refused(t *testing.T, what string, maxWait int64) func(int64, error) {
	return func(got int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got < 1 || got > maxWait {
			t.Fatalf("%s = %d, want a wait (the lock's PTTL) in [1, %d]", what, got, maxWait)
		}
	}
}

// released returns a check that a release returned want (-1: nil) and no
// error.
func released(t *testing.T, what string, want int64) func(*int64, error) {
	return func(got *int64, err error) {
		t.Helper()
		releasedCheck(t, what, got, err, want)
	}
}

func releasedCheck(t *testing.T, what string, got *int64, err error, want int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	switch {
	case want == -1 && got != nil:
		t.Fatalf("%s = %d, want nil (not held)", what, *got)
	case want != -1 && got == nil:
		t.Fatalf("%s = nil, want %d", what, want)
	case want != -1 && *got != want:
		t.Fatalf("%s = %d, want %d", what, *got, want)
	}
}

// scriptErr fails unless err is a *luart.Error of script whose text
// contains want.
func scriptErr(t *testing.T, what string, err error, script, want string) {
	t.Helper()
	var se *luart.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v (%T), want a *luart.Error containing %q", what, err, err, want)
	}
	if se.Script != script || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: error %q of %s, want one of %s containing %q", what, err, se.Script, script, want)
	}
}

func wantHash(t *testing.T, rdb redis.UniversalClient, key string, want map[string]string) {
	t.Helper()
	got, err := rdb.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	if len(got) != len(want) {
		t.Fatalf("HGETALL %s = %v, want %v", key, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("HGETALL %s = %v, want %v", key, got, want)
		}
	}
}

// pttl is PTTL in ms: -2 when there is no key, -1 when it has no expiry.
func pttl(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	if d < 0 {
		return int64(d) // -1 and -2 come back unscaled
	}
	return d.Milliseconds()
}

// wantPTTL fails unless lo < PTTL(key) <= hi; it returns the PTTL.
func wantPTTL(t *testing.T, rdb redis.UniversalClient, key string, lo, hi int64) int64 {
	t.Helper()
	p := pttl(t, rdb, key)
	if p <= lo || p > hi {
		t.Fatalf("PTTL %s = %d, want in (%d, %d]", key, p, lo, hi)
	}
	return p
}

// wantString fails unless key holds the string want.
func wantString(t *testing.T, rdb redis.UniversalClient, key, want string) {
	t.Helper()
	got, err := rdb.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v (want %q)", key, err, want)
	}
	if got != want {
		t.Fatalf("GET %s = %q, want %q", key, got, want)
	}
}

// wantTimeout fails unless key is a read hold's timeout key (the string 1)
// expiring in (lo, hi] ms.
func wantTimeout(t *testing.T, rdb redis.UniversalClient, key string, lo, hi int64) {
	t.Helper()
	wantString(t, rdb, key, "1")
	wantPTTL(t, rdb, key, lo, hi)
}

func wantGone(t *testing.T, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if n, err := rdb.Exists(context.Background(), k).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS %s = %d, %v; want no key", k, n, err)
		}
	}
}

func del(t *testing.T, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := rdb.Del(context.Background(), k).Err(); err != nil {
			t.Fatalf("DEL %s: %v", k, err)
		}
	}
}

// ---- pub/sub ------------------------------------------------------------------

// listener records the messages of one channel, of each kind the backend's
// scripts publish with.
type listener struct {
	t       *testing.T
	rdb     redis.UniversalClient
	ch      string
	subs    []*redis.PubSub
	sharded []bool
}

// listen subscribes to ch (on the cluster also with SSUBSCRIBE) and waits
// for the confirmations; the test's cleanup closes it.
func listen(t *testing.T, b backend, rdb redis.UniversalClient, ch string) *listener {
	t.Helper()
	ctx := context.Background()
	l := &listener{t: t, rdb: rdb, ch: ch}
	kinds := []bool{false}
	if b.cluster {
		kinds = append(kinds, true)
	}
	for _, sharded := range kinds {
		var ps *redis.PubSub
		if sharded {
			ps = rdb.SSubscribe(ctx, ch)
		} else {
			ps = rdb.Subscribe(ctx, ch)
		}
		t.Cleanup(func() { _ = ps.Close() })
		m, err := ps.ReceiveTimeout(ctx, timeout)
		if err != nil {
			t.Fatalf("subscribe %s: %v", ch, err)
		}
		if _, ok := m.(*redis.Subscription); !ok {
			t.Fatalf("subscribe %s: got %T %v, want a confirmation", ch, m, m)
		}
		l.subs, l.sharded = append(l.subs, ps), append(l.sharded, sharded)
	}
	return l
}

// want checks that each kind of subscription received exactly msgs since
// the last call, in order. It publishes a barrier on the channel and reads
// up to it, so no sleep is needed to show that nothing else came.
func (l *listener) want(msgs ...string) {
	l.t.Helper()
	ctx := context.Background()
	for i, ps := range l.subs {
		barrier := fmt.Sprintf("barrier-%d", time.Now().UnixNano())
		var err error
		if l.sharded[i] {
			err = l.rdb.SPublish(ctx, l.ch, barrier).Err()
		} else {
			err = l.rdb.Publish(ctx, l.ch, barrier).Err()
		}
		if err != nil {
			l.t.Fatalf("publish barrier: %v", err)
		}
		var got []string
		for {
			m, err := ps.ReceiveTimeout(ctx, timeout)
			if err != nil {
				l.t.Fatalf("%s (sharded %v): waiting for messages (so far %q): %v", l.ch, l.sharded[i], got, err)
			}
			msg, ok := m.(*redis.Message)
			if !ok {
				continue
			}
			if msg.Payload == barrier {
				break
			}
			got = append(got, msg.Payload)
		}
		if !slices.Equal(got, msgs) && !(len(got) == 0 && len(msgs) == 0) {
			l.t.Fatalf("%s (sharded %v): messages %q, want %q", l.ch, l.sharded[i], got, msgs)
		}
	}
}

func readRenewRaw(rdb redis.Scripter, keys []string, lease int64, fields ...string) ([]int64, error) {
	return generated.RwlockReadRenew(context.Background(), rdb,
		generated.RwlockReadRenewKeys{Keys: keys}, generated.RwlockReadRenewArgs{LeaseMS: lease, Fields: fields})
}
