package tests

// Tests of the generated script wrappers (package generated) on every
// backend: what each script returns, as its header and
// ../shared/docs/PROTOCOL.md say, and exactly which keys, values, expiries
// and messages it leaves behind. The fair scripts get a sanity check of the
// wrapper contract only; the fair lock's algorithm has its own suite.
//
// Top-level identifiers of this file start with "sc" (helpers) or
// "TestScript" (tests), since other files share the package.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/gen"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/luart"
	"github.com/lualock/lualock/tests/harness"
)

const (
	scLease   int64 = 30_000 // lease of most calls, ms
	scShort   int64 = 2_000  // a lease that a later call visibly refreshes
	scLatchMS int64 = 10_000 // unlock latch lifetime, ms
	scWait    int64 = 60_000 // fair wait budget, ms
	scTimeout       = 5 * time.Second
)

// scTag is the protocol's tag(prefix, N).
func scTag(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// scLock holds the protocol's key names of one lock name.
type scLock struct {
	name, channel, queue, timeouts string
}

func scNewLock(name string) scLock {
	return scLock{
		name:     name,
		channel:  scTag("redisson_lock__channel", name),
		queue:    scTag("redisson_lock_queue", name),
		timeouts: scTag("redisson_lock_timeout", name),
	}
}

func (l scLock) latch(req string) string {
	return scTag("redisson_unlock_latch", l.name) + ":" + req
}

func (l scLock) waiterChannel(field string) string { return l.channel + ":" + field }

func (l scLock) acquireKeys() generated.LockAcquireKeys {
	return generated.LockAcquireKeys{Lock: l.name}
}

func (l scLock) releaseKeys(req string) generated.LockReleaseKeys {
	return generated.LockReleaseKeys{Lock: l.name, Channel: l.channel, Latch: l.latch(req)}
}

// forceKeys names a new force-release request (a fresh latch) each call.
func (l scLock) forceKeys() generated.LockForceReleaseKeys {
	return generated.LockForceReleaseKeys{Lock: l.name, Channel: l.channel, Latch: l.latch("force-" + strconv.FormatInt(scForceReqs.Add(1), 10))}
}

// fairForceKeys is forceKeys for the fair lock.
func (l scLock) fairForceKeys() generated.FairForceReleaseKeys {
	k := l.fairKeys()
	return generated.FairForceReleaseKeys{Lock: k.Lock, Queue: k.Queue, Timeouts: k.Timeouts, Channel: k.Channel,
		Latch: l.latch("force-" + strconv.FormatInt(scForceReqs.Add(1), 10))}
}

var scForceReqs atomic.Int64

func (l scLock) fairKeys() generated.FairAcquireKeys {
	return generated.FairAcquireKeys{Lock: l.name, Queue: l.queue, Timeouts: l.timeouts, Channel: l.channel}
}

func (l scLock) fairReleaseKeys(req string) generated.FairReleaseKeys {
	return generated.FairReleaseKeys{Lock: l.name, Queue: l.queue, Timeouts: l.timeouts, Channel: l.channel, Latch: l.latch(req)}
}

// ---- calls -----------------------------------------------------------------

func scAcquire(rdb redis.Scripter, l scLock, field string, holds, lease int64) (int64, error) {
	return generated.LockAcquire(context.Background(), rdb, l.acquireKeys(),
		generated.LockAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func scRelease(rdb redis.Scripter, l scLock, field, req string, lease int64, publish string) (*int64, error) {
	return generated.LockRelease(context.Background(), rdb, l.releaseKeys(req),
		generated.LockReleaseArgs{LeaseMS: lease, Field: field, LatchMS: scLatchMS, Publish: publish})
}

func scFairAcquire(rdb redis.Scripter, l scLock, field string, holds int64) (int64, error) {
	return generated.FairAcquire(context.Background(), rdb, l.fairKeys(),
		generated.FairAcquireArgs{LeaseMS: scLease, Field: field, WaitMS: scWait, Holds: holds, Publish: "publish"})
}

func scFairLeave(rdb redis.Scripter, l scLock, field string) (bool, error) {
	return generated.FairLeave(context.Background(), rdb, generated.FairLeaveKeys(l.fairKeys()),
		generated.FairLeaveArgs{Field: field, WaitMS: scWait, Publish: "publish"})
}

func scFairRelease(rdb redis.Scripter, l scLock, field, req string) (*int64, error) {
	return generated.FairRelease(context.Background(), rdb, l.fairReleaseKeys(req),
		generated.FairReleaseArgs{LeaseMS: scLease, Field: field, LatchMS: scLatchMS, WaitMS: scWait, Publish: "publish"})
}

func scFairForce(rdb redis.Scripter, l scLock) (bool, error) {
	return generated.FairForceRelease(context.Background(), rdb, l.fairForceKeys(),
		generated.FairForceReleaseArgs{LatchMS: scLatchMS, WaitMS: scWait, Publish: "publish"})
}

// scNil returns a check that a call returned a nil *int64 and no error:
// scNil(t, "what")(call()).
func scNil(t *testing.T, what string) func(*int64, error) {
	return func(got *int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		if got != nil {
			t.Fatalf("%s = %d, want nil", what, *got)
		}
	}
}

// scInt returns a check that a call returned a non-nil *int64 and no
// error, which it returns: scInt(t, "what")(call()).
func scInt(t *testing.T, what string) func(*int64, error) int64 {
	return func(got *int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		if got == nil {
			t.Fatalf("%s = nil, want an integer", what)
		}
		return *got
	}
}

// scZero returns a check that an acquisition returned 0 (acquired) and no
// error: scZero(t, "what")(call()).
func scZero(t *testing.T, what string) func(int64, error) {
	return func(got int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		if got != 0 {
			t.Fatalf("%s = %d, want 0 (acquired)", what, got)
		}
	}
}

// scOK returns a check that a call returned no error; it returns the reply.
func scOK(t *testing.T, what string) func(int64, error) int64 {
	return func(got int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return got
	}
}

// scScriptErr fails unless err is a *luart.Error naming script whose
// text contains want; it returns the error.
func scScriptErr(t *testing.T, what string, err error, script, want string) *luart.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one containing %q", what, want)
	}
	var se *luart.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v (%T) is not a *luart.Error", what, err, err)
	}
	if se.Script != script {
		t.Fatalf("%s: error names script %q, want %q", what, se.Script, script)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: error %q does not contain %q", what, err, want)
	}
	return se
}

// ---- inspection ------------------------------------------------------------

func scHash(t *testing.T, rdb redis.UniversalClient, key string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	return m
}

func scWantHash(t *testing.T, rdb redis.UniversalClient, key string, want map[string]string) {
	t.Helper()
	if got := scHash(t, rdb, key); !scMapEq(got, want) {
		t.Fatalf("HGETALL %s = %v, want %v", key, got, want)
	}
}

func scMapEq[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// scPTTL returns PTTL in ms: -2 when there is no key, -1 when it has no expiry.
func scPTTL(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	if d < 0 {
		return int64(d) // go-redis returns -1 and -2 as nanoseconds, unscaled
	}
	return d.Milliseconds()
}

// scWantPTTL fails unless lo < PTTL(key) <= hi.
func scWantPTTL(t *testing.T, rdb redis.UniversalClient, key string, lo, hi int64) int64 {
	t.Helper()
	p := scPTTL(t, rdb, key)
	if p <= lo || p > hi {
		t.Fatalf("PTTL %s = %d, want in (%d, %d]", key, p, lo, hi)
	}
	return p
}

func scList(t *testing.T, rdb redis.UniversalClient, key string) []string {
	t.Helper()
	l, err := rdb.LRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", key, err)
	}
	return l
}

func scWantList(t *testing.T, rdb redis.UniversalClient, key string, want ...string) {
	t.Helper()
	if got := scList(t, rdb, key); !slices.Equal(got, want) {
		t.Fatalf("LRANGE %s = %q, want %q", key, got, want)
	}
}

func scZSet(t *testing.T, rdb redis.UniversalClient, key string) map[string]int64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE %s WITHSCORES: %v", key, err)
	}
	m := make(map[string]int64, len(zs))
	for _, z := range zs {
		m[z.Member.(string)] = int64(z.Score)
	}
	return m
}

func scGet(t *testing.T, rdb redis.UniversalClient, key string) (string, bool) {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v, true
}

func scExists(t *testing.T, rdb redis.UniversalClient, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

func scWantGone(t *testing.T, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if scExists(t, rdb, k) {
			t.Fatalf("key %s exists, want none", k)
		}
	}
}

// scWantLatch checks the latch's value and that it expires within latch_ms.
func scWantLatch(t *testing.T, rdb redis.UniversalClient, key, want string) {
	t.Helper()
	v, ok := scGet(t, rdb, key)
	if !ok || v != want {
		t.Fatalf("GET %s = %q (exists %v), want %q", key, v, ok, want)
	}
	scWantPTTL(t, rdb, key, 0, scLatchMS)
}

func scWantNoKeysLeft(t *testing.T, rdb redis.UniversalClient, name string) {
	t.Helper()
	if left := keysLeft(t, rdb, name, false); len(left) > 0 {
		t.Fatalf("keys left behind: %q", left)
	}
}

// scServerMS is Redis's clock (TIME) in ms since the epoch.
func scServerMS(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now.UnixMilli()
}

// ---- pub/sub ---------------------------------------------------------------

// scSubscribe subscribes to channels (SSUBSCRIBE when sharded) and waits
// for every confirmation; the test's cleanup closes it.
func scSubscribe(t *testing.T, rdb redis.UniversalClient, sharded bool, channels ...string) *redis.PubSub {
	t.Helper()
	ctx := context.Background()
	var ps *redis.PubSub
	if sharded {
		ps = rdb.SSubscribe(ctx, channels...)
	} else {
		ps = rdb.Subscribe(ctx, channels...)
	}
	t.Cleanup(func() { _ = ps.Close() })
	for range channels {
		m, err := ps.ReceiveTimeout(ctx, scTimeout)
		if err != nil {
			t.Fatalf("subscribe %q: %v", channels, err)
		}
		if _, ok := m.(*redis.Subscription); !ok {
			t.Fatalf("subscribe %q: got %T %v, want a confirmation", channels, m, m)
		}
	}
	return ps
}

// scMessages returns every message ps received so far, as "channel=payload",
// in order. It publishes a barrier on barrier (a channel of the same slot
// as the script's, so it passes through the same node after them) and
// collects up to it, so no sleeping is needed to prove that nothing else
// was published.
func scMessages(t *testing.T, rdb redis.UniversalClient, ps *redis.PubSub, sharded bool, barrier string) []string {
	t.Helper()
	ctx := context.Background()
	token := fmt.Sprintf("barrier-%d", time.Now().UnixNano())
	var err error
	if sharded {
		err = rdb.SPublish(ctx, barrier, token).Err()
	} else {
		err = rdb.Publish(ctx, barrier, token).Err()
	}
	if err != nil {
		t.Fatalf("publish barrier: %v", err)
	}
	var got []string
	for {
		m, err := ps.ReceiveTimeout(ctx, scTimeout)
		if err != nil {
			t.Fatalf("waiting for messages (so far %q): %v", got, err)
		}
		switch m := m.(type) {
		case *redis.Message:
			if m.Channel == barrier && m.Payload == token {
				return got
			}
			got = append(got, m.Channel+"="+m.Payload)
		case *redis.Pong:
		default:
			t.Fatalf("unexpected pub/sub item %T %v", m, m)
		}
	}
}

func scWantMessages(t *testing.T, rdb redis.UniversalClient, ps *redis.PubSub, sharded bool, barrier string, want ...string) {
	t.Helper()
	if got := scMessages(t, rdb, ps, sharded, barrier); !slices.Equal(got, want) {
		t.Fatalf("messages = %q, want %q", got, want)
	}
}

// ---- script cache ----------------------------------------------------------

// scMasters runs f on every master of a cluster, or on the one server.
func scMasters(t *testing.T, rdb redis.UniversalClient, f func(c redis.Cmdable) error) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return f(c) })
	} else {
		err = f(rdb)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// scFlush runs SCRIPT FLUSH on every master.
func scFlush(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	scMasters(t, rdb, func(c redis.Cmdable) error { return c.ScriptFlush(context.Background()).Err() })
}

// scCached reports, for every master, whether each sha is in its script cache.
func scCached(t *testing.T, rdb redis.UniversalClient, shas ...string) [][]bool {
	t.Helper()
	var mu sync.Mutex
	var out [][]bool
	scMasters(t, rdb, func(c redis.Cmdable) error {
		ex, err := c.ScriptExists(context.Background(), shas...).Result()
		mu.Lock()
		out = append(out, ex)
		mu.Unlock()
		return err
	})
	return out
}

func scWantCached(t *testing.T, rdb redis.UniversalClient, want bool, shas ...string) {
	t.Helper()
	masters := scCached(t, rdb, shas...)
	if len(masters) == 0 {
		t.Fatal("no master answered SCRIPT EXISTS")
	}
	for i, ex := range masters {
		for j, e := range ex {
			if e != want {
				t.Fatalf("master %d: SCRIPT EXISTS %s = %v, want %v", i, shas[j], e, want)
			}
		}
	}
}

func scAllSHAs() []string {
	var shas []string
	for _, s := range generated.Scripts {
		shas = append(shas, s.SHA1)
	}
	return shas
}

// ---- a Scripter that records and fails -------------------------------------

// scRedisErr is a Redis error reply ("LOADING ...", "ERR ...") made up by a test.
type scRedisErr string

func (e scRedisErr) Error() string { return string(e) }
func (scRedisErr) RedisError()     {}

// scScripter wraps a real client: it counts the script commands sent
// through it and makes the first `fail` EVALSHA / EVALSHA_RO calls fail with
// failErr without sending them, calling onFail after each.
type scScripter struct {
	redis.Scripter
	mu      sync.Mutex
	calls   map[string]int
	fail    int
	failErr error
	onFail  func()
}

func (s *scScripter) record(name string, failable bool) error {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[name]++
	var err error
	f := s.onFail
	if failable && s.fail > 0 {
		s.fail--
		err = s.failErr
	}
	s.mu.Unlock()
	if err != nil && f != nil {
		f()
	}
	return err
}

func (s *scScripter) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

func scFailed(ctx context.Context, name, sha string, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx, name, sha)
	cmd.SetErr(err)
	return cmd
}

func (s *scScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if err := s.record("evalsha", true); err != nil {
		return scFailed(ctx, "evalsha", sha, err)
	}
	return s.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (s *scScripter) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if err := s.record("evalsha_ro", true); err != nil {
		return scFailed(ctx, "evalsha_ro", sha, err)
	}
	return s.Scripter.EvalShaRO(ctx, sha, keys, args...)
}

func (s *scScripter) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	_ = s.record("eval", false)
	return s.Scripter.Eval(ctx, src, keys, args...)
}

func (s *scScripter) EvalRO(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	_ = s.record("eval_ro", false)
	return s.Scripter.EvalRO(ctx, src, keys, args...)
}

func (s *scScripter) ScriptLoad(ctx context.Context, src string) *redis.StringCmd {
	_ = s.record("script load", false)
	return s.Scripter.ScriptLoad(ctx, src)
}

func (s *scScripter) ScriptExists(ctx context.Context, shas ...string) *redis.BoolSliceCmd {
	_ = s.record("script exists", false)
	return s.Scripter.ScriptExists(ctx, shas...)
}

// scWantCalls compares the recorded calls with want (missing names: 0).
func scWantCalls(t *testing.T, s *scScripter, want map[string]int) {
	t.Helper()
	s.mu.Lock()
	got := scNonZero(s.calls)
	s.mu.Unlock()
	if !scMapEq(got, scNonZero(want)) {
		t.Fatalf("script commands sent = %v, want %v", got, want)
	}
}

// scNonZero drops zero counts.
func scNonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// ============================================================================
// Reentrant lock scripts
// ============================================================================

func TestScriptLockAcquire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		l := scNewLock(uniqueName(t))

		// Bad arguments: an error naming the script, and no key created.
		for _, c := range []struct {
			what         string
			lease, holds int64
			field, want  string
		}{
			{"lease 0", 0, 1, "c1:1", "lease_ms must be a positive integer"},
			{"negative lease", -5, 1, "c1:1", "lease_ms must be a positive integer"},
			{"holds 0", scLease, 0, "c1:1", "holds must be a positive integer"},
			{"negative holds", scLease, -1, "c1:1", "holds must be a positive integer"},
			{"empty field", scLease, 1, "", "field must not be empty"},
		} {
			_, err := scAcquire(rdb, l, c.field, c.holds, c.lease)
			scScriptErr(t, c.what, err, "lock_acquire", c.want)
			if redis.HasErrorPrefix(err, "LOST") {
				t.Fatalf("%s: %v is a LOST error", c.what, err)
			}
			scWantGone(t, rdb, l.name)
		}

		// First acquisition.
		scZero(t, "first acquire")(scAcquire(rdb, l, "c1:1", 1, scLease))
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		scWantPTTL(t, rdb, l.name, scLease-2000, scLease)

		// The same call again (its reply was lost): count unchanged, lease set.
		scZero(t, "replayed acquire")(scAcquire(rdb, l, "c1:1", 1, scShort))
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		scWantPTTL(t, rdb, l.name, 0, scShort)

		// Re-entry, and its replay.
		scZero(t, "re-entry")(scAcquire(rdb, l, "c1:1", 2, scLease))
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
		scWantPTTL(t, rdb, l.name, scLease-2000, scLease)
		scZero(t, "replayed re-entry")(scAcquire(rdb, l, "c1:1", 2, scLease))
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		// Another owner: the lock's PTTL (at least 1), nothing changed.
		before := scPTTL(t, rdb, l.name)
		pttl := scOK(t, "other owner")(scAcquire(rdb, l, "c2:7", 1, scShort))
		if pttl < 1 || pttl > before {
			t.Fatalf("other owner got %d, want the PTTL in [1, %d]", pttl, before)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
		scWantPTTL(t, rdb, l.name, scShort, before) // not set to the caller's lease

		// A count that skips one: an error, not LOST, nothing changed.
		_, err := scAcquire(rdb, l, "c1:1", 4, scLease)
		scScriptErr(t, "holds 4 on count 2", err, "lock_acquire", "hold count of c1:1 is 2, caller expected 3")
		if redis.HasErrorPrefix(err, "LOST") {
			t.Fatalf("holds 4 on count 2: %v is a LOST error", err)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		// Re-entry of an owner whose holds are gone: LOST, nothing changed.
		_, err = scAcquire(rdb, l, "c2:7", 2, scLease)
		se := scScriptErr(t, "re-entry without holds", err, "lock_acquire", "LOST")
		if !redis.HasErrorPrefix(err, "LOST") || !redis.HasErrorPrefix(se.Err, "LOST") || !redis.HasErrorPrefix(errors.Unwrap(err), "LOST") {
			t.Fatalf("re-entry without holds: %v does not start with LOST", err)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		// ... also when the whole lock is gone (expired): no key created.
		if err := rdb.Del(context.Background(), l.name).Err(); err != nil {
			t.Fatal(err)
		}
		_, err = scAcquire(rdb, l, "c1:1", 3, scLease)
		scScriptErr(t, "re-entry on a deleted lock", err, "lock_acquire", "LOST lualock: the earlier holds of c1:1 are gone")
		if !redis.HasErrorPrefix(err, "LOST") {
			t.Fatalf("re-entry on a deleted lock: %v does not start with LOST", err)
		}
		scWantGone(t, rdb, l.name)

		// A lock without expiry (set by hand): PTTL -1, as the header says.
		if err := rdb.HSet(context.Background(), l.name, "c9:9", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if got := scOK(t, "lock without expiry")(scAcquire(rdb, l, "c1:1", 1, scLease)); got != -1 {
			t.Fatalf("lock without expiry: got %d, want -1", got)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c9:9": "1"})
		scWantPTTL(t, rdb, l.name, -2, -1)
		if err := rdb.Del(context.Background(), l.name).Err(); err != nil {
			t.Fatal(err)
		}
		scWantNoKeysLeft(t, rdb, l.name)
	})
}

// TestScriptRelease_holdsPastLatch: a release resent after its latch
// expired names the same hold count as the first; the script sees the count
// one lower already and replays "holds remain" instead of releasing a
// second hold. Without a count (0) it releases, as before. Both the
// reentrant and the fair release.
func TestScriptRelease_holdsPastLatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		for _, fair := range []bool{false, true} {
			l := scNewLock(uniqueName(t) + map[bool]string{false: "-reentrant", true: "-fair"}[fair])
			release := func(req string, holds int64) (*int64, error) {
				if fair {
					return generated.FairRelease(ctx, rdb, l.fairReleaseKeys(req),
						generated.FairReleaseArgs{LeaseMS: scLease, Field: "c1:1", LatchMS: scLatchMS, WaitMS: scWait, Publish: "publish", Holds: holds})
				}
				return generated.LockRelease(ctx, rdb, l.releaseKeys(req),
					generated.LockReleaseArgs{LeaseMS: scLease, Field: "c1:1", LatchMS: scLatchMS, Publish: "publish", Holds: holds})
			}
			for holds := int64(1); holds <= 3; holds++ {
				if fair {
					scZero(t, "acquire")(scFairAcquire(rdb, l, "c1:1", holds))
				} else {
					scZero(t, "acquire")(scAcquire(rdb, l, "c1:1", holds, scLease))
				}
			}
			if got := scInt(t, "release 3 -> 2")(release("req-1", 3)); got != 0 {
				t.Fatalf("fair=%v: release = %d, want 0", fair, got)
			}
			if err := rdb.Del(ctx, l.latch("req-1")).Err(); err != nil { // the latch expires
				t.Fatal(err)
			}
			if got := scInt(t, "the same release past its latch")(release("req-1", 3)); got != 0 {
				t.Fatalf("fair=%v: resent release = %d, want 0 (replayed)", fair, got)
			}
			scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
			// A count of 0 (unknown) releases without the check.
			if got := scInt(t, "release without a count")(release("req-2", 0)); got != 0 {
				t.Fatalf("fair=%v: release = %d, want 0", fair, got)
			}
			scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
			if got := scInt(t, "last release")(release("req-3", 1)); got != 1 {
				t.Fatalf("fair=%v: last release = %d, want 1", fair, got)
			}
			scWantGone(t, rdb, l.name)
			// A negative count is refused.
			_, err := release("req-4", -1)
			scScriptErr(t, "negative holds", err, map[bool]string{false: "lock_release", true: "fair_release"}[fair], "holds must be a whole number")
		}
	})
}

func TestScriptLockRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		l := scNewLock(uniqueName(t))
		ps := scSubscribe(t, rdb, false, l.channel)

		scZero(t, "acquire")(scAcquire(rdb, l, "c1:1", 1, scShort))
		scZero(t, "re-enter")(scAcquire(rdb, l, "c1:1", 2, scShort))

		// Not held by the caller: nil, no latch, nothing changed.
		scNil(t, "release by another owner")(scRelease(rdb, l, "c2:1", "req-other", scLease, "publish"))
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
		scWantPTTL(t, rdb, l.name, 0, scShort)
		scWantGone(t, rdb, l.latch("req-other"))

		// No lock at all: nil, and no key of any kind appears.
		free := scNewLock(uniqueName(t) + "-free")
		scNil(t, "release of a free lock")(scRelease(rdb, free, "c1:1", "req-free", scLease, "publish"))
		scWantNoKeysLeft(t, rdb, free.name)
		scWantGone(t, rdb, free.latch("req-free"))

		// Bad arguments: an error, nothing changed, nothing published.
		for _, c := range []struct {
			what, publish string
			lease         int64
			latch         int64
			want          string
		}{
			{"bad publish", "notify", scLease, scLatchMS, "publish must be publish, spublish or both"},
			{"upper-case publish", "PUBLISH", scLease, scLatchMS, "publish must be publish, spublish or both"},
			{"lease 0", "publish", 0, scLatchMS, "lease_ms must be a positive integer"},
			{"latch 0", "publish", scLease, 0, "latch_ms must be a positive integer"},
		} {
			_, err := generated.LockRelease(context.Background(), rdb, l.releaseKeys("req-bad"),
				generated.LockReleaseArgs{LeaseMS: c.lease, Field: "c1:1", LatchMS: c.latch, Publish: c.publish})
			scScriptErr(t, c.what, err, "lock_release", c.want)
			scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})
			scWantPTTL(t, rdb, l.name, 0, scShort)
			scWantGone(t, rdb, l.latch("req-bad"))
		}

		// Partial release: 0, count down by one, lease refreshed, latch 0.
		if got := scInt(t, "partial release")(scRelease(rdb, l, "c1:1", "req-1", scLease, "publish")); got != 0 {
			t.Fatalf("partial release = %d, want 0", got)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		scWantPTTL(t, rdb, l.name, scLease-2000, scLease)
		scWantLatch(t, rdb, l.latch("req-1"), "0")

		// The same request again: the same answer, counted once.
		if got := scInt(t, "replayed partial release")(scRelease(rdb, l, "c1:1", "req-1", scLease, "publish")); got != 0 {
			t.Fatalf("replayed partial release = %d, want 0", got)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		scWantMessages(t, rdb, ps, false, l.channel) // nothing published so far

		// Full release: 1, lock deleted, "0" published once, latch 1.
		if got := scInt(t, "full release")(scRelease(rdb, l, "c1:1", "req-2", scLease, "publish")); got != 1 {
			t.Fatalf("full release = %d, want 1", got)
		}
		scWantGone(t, rdb, l.name)
		scWantLatch(t, rdb, l.latch("req-2"), "1")
		// Replayed: 1 again, no second message, nothing recreated.
		if got := scInt(t, "replayed full release")(scRelease(rdb, l, "c1:1", "req-2", scLease, "publish")); got != 1 {
			t.Fatalf("replayed full release = %d, want 1", got)
		}
		scWantGone(t, rdb, l.name)
		scWantMessages(t, rdb, ps, false, l.channel, l.channel+"=0")
		// A new request of the owner that no longer holds it: nil.
		scNil(t, "release after the last hold")(scRelease(rdb, l, "c1:1", "req-3", scLease, "publish"))
		scWantGone(t, rdb, l.latch("req-3"))
		scWantNoKeysLeft(t, rdb, l.name)

		// SPUBLISH (Redis 7 sharded pub/sub; miniredis has none).
		if b.name == "miniredis" {
			return
		}
		sl := scNewLock(uniqueName(t) + "-sharded")
		sps := scSubscribe(t, rdb, true, sl.channel)
		scZero(t, "acquire")(scAcquire(rdb, sl, "c1:1", 1, scLease))
		if got := scInt(t, "full release with spublish")(scRelease(rdb, sl, "c1:1", "req-s", scLease, "spublish")); got != 1 {
			t.Fatalf("full release with spublish = %d, want 1", got)
		}
		scWantMessages(t, rdb, sps, true, sl.channel, sl.channel+"=0")
		scWantMessages(t, rdb, ps, false, l.channel) // not on classic pub/sub
		scWantNoKeysLeft(t, rdb, sl.name)
	})
}

func TestScriptLockRenew(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		// One call's keys must share a slot: one hash tag for the group.
		group := "{" + uniqueName(t) + "}"
		la, lb, lc := scNewLock(group+"a"), scNewLock(group+"b"), scNewLock(group+"c")
		scZero(t, "acquire a")(scAcquire(rdb, la, "c1:1", 1, scShort))
		scZero(t, "acquire b")(scAcquire(rdb, lb, "c2:1", 1, scShort))
		locks := []string{la.name, lb.name, lc.name}

		renew := func(lease int64, locks []string, fields ...string) ([]int64, error) {
			return generated.LockRenew(ctx, rdb, generated.LockRenewKeys{Locks: locks},
				generated.LockRenewArgs{LeaseMS: lease, Fields: fields})
		}

		// Bad calls: an error, no lease touched.
		_, err := renew(scWait, locks[:2], "c1:1")
		scScriptErr(t, "fewer fields than locks", err, "lock_renew", "one field per lock is required")
		_, err = renew(scWait, locks[:2], "c1:1", "c2:1", "c3:1")
		scScriptErr(t, "more fields than locks", err, "lock_renew", "one field per lock is required")
		_, err = renew(0, locks, "c1:1", "c2:1", "c3:1")
		scScriptErr(t, "lease 0", err, "lock_renew", "lease_ms must be a positive integer")
		scWantPTTL(t, rdb, la.name, 0, scShort)
		scWantPTTL(t, rdb, lb.name, 0, scShort)

		// Only a lock that still has the owner's field is renewed.
		got, err := renew(scWait, locks, "c1:1", "c1:1", "c1:1")
		if err != nil || !slices.Equal(got, []int64{1, 0, 0}) {
			t.Fatalf("renew = %v, %v; want [1 0 0]", got, err)
		}
		scWantPTTL(t, rdb, la.name, scWait-2000, scWait)
		scWantPTTL(t, rdb, lb.name, 0, scShort)
		scWantGone(t, rdb, lc.name) // not created
		scWantHash(t, rdb, la.name, map[string]string{"c1:1": "1"})
		scWantHash(t, rdb, lb.name, map[string]string{"c2:1": "1"})

		got, err = renew(scLease, locks, "c1:1", "c2:1", "c3:1")
		if err != nil || !slices.Equal(got, []int64{1, 1, 0}) {
			t.Fatalf("renew = %v, %v; want [1 1 0]", got, err)
		}
		scWantPTTL(t, rdb, la.name, scLease-2000, scLease) // reset, here downwards
		scWantPTTL(t, rdb, lb.name, scLease-2000, scLease)

		// No locks: an empty answer.
		got, err = renew(scLease, nil)
		if err != nil || len(got) != 0 {
			t.Fatalf("renew of nothing = %v, %v; want []", got, err)
		}

		if err := rdb.Del(ctx, la.name).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, lb.name).Err(); err != nil {
			t.Fatal(err)
		}

		// On the cluster, locks of different slots in one call are refused.
		if b.cluster {
			x, y := scNewLock("{a}"+uniqueName(t)), scNewLock("{b}"+uniqueName(t))
			_, err := renew(scLease, []string{x.name, y.name}, "c1:1", "c1:1")
			if !redis.HasErrorPrefix(err, "CROSSSLOT") {
				t.Fatalf("renew across slots: %v, want CROSSSLOT", err)
			}
			scScriptErr(t, "renew across slots", err, "lock_renew", "CROSSSLOT")
		}
	})
}

func TestScriptLockForceRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := scNewLock(uniqueName(t))
		ps := scSubscribe(t, rdb, false, l.channel)
		scZero(t, "acquire")(scAcquire(rdb, l, "c1:1", 1, scLease))
		scZero(t, "re-enter")(scAcquire(rdb, l, "c1:1", 2, scLease))

		_, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "notify"})
		scScriptErr(t, "bad publish", err, "lock_force_release", "publish must be publish, spublish or both")
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"})

		ok, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"})
		if err != nil || !ok {
			t.Fatalf("force release = %v, %v; want true", ok, err)
		}
		scWantGone(t, rdb, l.name)
		ok, err = generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"})
		if err != nil || ok {
			t.Fatalf("force release of nothing = %v, %v; want false", ok, err)
		}
		scWantMessages(t, rdb, ps, false, l.channel, l.channel+"=0")

		// A resent force release (its reply was lost) replays its outcome:
		// it does not delete the lock of the owner that came next.
		keys := l.forceKeys()
		if ok, err := generated.LockForceRelease(ctx, rdb, keys, generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"}); err != nil || ok {
			t.Fatalf("force release of nothing = %v, %v; want false", ok, err)
		}
		scZero(t, "c2 acquires")(scAcquire(rdb, l, "c2:1", 1, scLease))
		first := l.forceKeys()
		if ok, err := generated.LockForceRelease(ctx, rdb, first, generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"}); err != nil || !ok {
			t.Fatalf("force release = %v, %v; want true", ok, err)
		}
		scZero(t, "c3 acquires")(scAcquire(rdb, l, "c3:1", 1, scLease))
		if ok, err := generated.LockForceRelease(ctx, rdb, first, generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"}); err != nil || !ok {
			t.Fatalf("resent force release = %v, %v; want the first outcome, true", ok, err)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c3:1": "1"})
		_ = scMessages(t, rdb, ps, false, l.channel)
		if ok, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"}); err != nil || !ok {
			t.Fatalf("final force release = %v, %v; want true", ok, err)
		}
		scWantNoKeysLeft(t, rdb, l.name)
	})
}

func TestScriptLockStatus(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := scNewLock(uniqueName(t))
		rec := &scScripter{Scripter: rdb}
		status := func(field string) []int64 {
			t.Helper()
			got, err := generated.LockStatus(ctx, rec, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: field})
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			if len(got) != 3 {
				t.Fatalf("status = %v, want 3 numbers", got)
			}
			return got
		}
		if got := status("c1:1"); !slices.Equal(got, []int64{0, 0, -2}) {
			t.Fatalf("status of no lock = %v, want [0 0 -2]", got)
		}
		scWantGone(t, rdb, l.name)

		scZero(t, "acquire")(scAcquire(rdb, l, "c1:1", 1, scLease))
		scZero(t, "re-enter")(scAcquire(rdb, l, "c1:1", 2, scLease))
		got := status("c1:1")
		if got[0] != 1 || got[1] != 2 || got[2] <= scLease-2000 || got[2] > scLease {
			t.Fatalf("status of the holder = %v, want [1 2 ~%d]", got, scLease)
		}
		got = status("c2:1")
		if got[0] != 1 || got[1] != 0 || got[2] <= 0 || got[2] > scLease {
			t.Fatalf("status of another owner = %v, want [1 0 ~%d]", got, scLease)
		}
		if err := rdb.Persist(ctx, l.name).Err(); err != nil {
			t.Fatal(err)
		}
		if got := status("c1:1"); !slices.Equal(got, []int64{1, 2, -1}) {
			t.Fatalf("status of a lock without expiry = %v, want [1 2 -1]", got)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "2"}) // read only

		// It runs as EVALSHA_RO, never EVALSHA or EVAL (the script was
		// loaded by a call before this test, or by lock_acquire's NOSCRIPT
		// recovery; SCRIPT LOAD shows up when it had to be loaded).
		if rec.count("evalsha_ro") < 4 || rec.count("evalsha") != 0 || rec.count("eval") != 0 || rec.count("eval_ro") != 0 {
			t.Fatalf("script commands sent = %v, want EVALSHA_RO only", rec.calls)
		}
		if err := rdb.Del(ctx, l.name).Err(); err != nil {
			t.Fatal(err)
		}
	})
}

// ============================================================================
// Fair lock scripts: the wrapper contract on every backend
// ============================================================================

func TestScriptFairSanity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		l := scNewLock(uniqueName(t))
		ps := scSubscribe(t, rdb, false, l.channel, l.waiterChannel("c2:1"), l.waiterChannel("c3:1"), l.waiterChannel("c4:1"))

		// c1 takes the free lock: nothing queued.
		scZero(t, "c1 acquires")(scFairAcquire(rdb, l, "c1:1", 1))
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		scWantPTTL(t, rdb, l.name, scLease-2000, scLease)
		scWantGone(t, rdb, l.queue, l.timeouts)

		// c2 queues: it waits the lock's PTTL, deadline = now + PTTL + wait.
		t0 := scServerMS(t, rdb)
		ttl2 := scOK(t, "c2 queues")(scFairAcquire(rdb, l, "c2:1", 1))
		t1 := scServerMS(t, rdb)
		if ttl2 <= scLease-2000 || ttl2 > scLease {
			t.Fatalf("c2 waits %d, want ~the lock's PTTL %d", ttl2, scLease)
		}
		scWantList(t, rdb, l.queue, "c2:1")
		z := scZSet(t, rdb, l.timeouts)
		if d := z["c2:1"]; len(z) != 1 || d < t0+ttl2+scWait-5 || d > t1+ttl2+scWait+5 {
			t.Fatalf("deadlines = %v, want c2:1 in [%d, %d]", z, t0+ttl2+scWait, t1+ttl2+scWait)
		}
		d2 := z["c2:1"]

		// c3 queues behind c2: it waits until c2's deadline, and its own is
		// one wait budget later.
		t0 = scServerMS(t, rdb)
		ttl3 := scOK(t, "c3 queues")(scFairAcquire(rdb, l, "c3:1", 1))
		t1 = scServerMS(t, rdb)
		if ttl3 < d2-t1-5 || ttl3 > d2-t0+5 {
			t.Fatalf("c3 waits %d, want c2's deadline - now in [%d, %d]", ttl3, d2-t1, d2-t0)
		}
		scWantList(t, rdb, l.queue, "c2:1", "c3:1")
		z = scZSet(t, rdb, l.timeouts)
		if len(z) != 2 || z["c2:1"] != d2 || z["c3:1"] != d2+scWait {
			t.Fatalf("deadlines = %v, want c2:1=%d c3:1=%d", z, d2, d2+scWait)
		}

		// c2 asks again: not queued twice, waits the lock's PTTL.
		again := scOK(t, "c2 asks again")(scFairAcquire(rdb, l, "c2:1", 1))
		if again <= 0 || again > scLease {
			t.Fatalf("c2 asking again waits %d, want the lock's PTTL", again)
		}
		scWantList(t, rdb, l.queue, "c2:1", "c3:1")
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		scWantMessages(t, rdb, ps, false, l.channel) // nobody woken yet

		// c1 releases: 1, the lock is gone, only the head (c2) is woken, on
		// its own channel.
		if got := scInt(t, "c1 releases")(scFairRelease(rdb, l, "c1:1", "req-1")); got != 1 {
			t.Fatalf("c1 releases = %d, want 1", got)
		}
		scWantGone(t, rdb, l.name)
		scWantLatch(t, rdb, l.latch("req-1"), "1")
		scWantMessages(t, rdb, ps, false, l.channel, l.waiterChannel("c2:1")+"=0")
		scWantList(t, rdb, l.queue, "c2:1", "c3:1")

		// Release of an owner that holds nothing: nil.
		scNil(t, "c9 releases")(scFairRelease(rdb, l, "c9:1", "req-9"))
		scWantGone(t, rdb, l.latch("req-9"))
		_ = scMessages(t, rdb, ps, false, l.channel) // (the free lock's head may be woken again)

		// c3 cannot jump the queue.
		if got := scOK(t, "c3 while c2 heads the queue")(scFairAcquire(rdb, l, "c3:1", 1)); got < 0 {
			t.Fatalf("c3 waits %d", got)
		}
		scWantGone(t, rdb, l.name)
		z = scZSet(t, rdb, l.timeouts)
		d3 := z["c3:1"]

		// c2, the head, takes it: out of both, everyone else moves up by
		// exactly one wait budget.
		scZero(t, "c2 acquires")(scFairAcquire(rdb, l, "c2:1", 1))
		scWantHash(t, rdb, l.name, map[string]string{"c2:1": "1"})
		scWantList(t, rdb, l.queue, "c3:1")
		z = scZSet(t, rdb, l.timeouts)
		if len(z) != 1 || z["c3:1"] != d3-scWait {
			t.Fatalf("deadlines = %v, want c3:1=%d", z, d3-scWait)
		}
		// Re-entry of the holder.
		scZero(t, "c2 re-enters")(scFairAcquire(rdb, l, "c2:1", 2))
		scWantHash(t, rdb, l.name, map[string]string{"c2:1": "2"})

		// c4 queues behind c3; c3 leaves: out of both, c4 moves up.
		scOK(t, "c4 queues")(scFairAcquire(rdb, l, "c4:1", 1))
		scWantList(t, rdb, l.queue, "c3:1", "c4:1")
		d4 := scZSet(t, rdb, l.timeouts)["c4:1"]
		ok, err := scFairLeave(rdb, l, "c3:1")
		if err != nil || !ok {
			t.Fatalf("c3 leaves = %v, %v; want true", ok, err)
		}
		scWantList(t, rdb, l.queue, "c4:1")
		z = scZSet(t, rdb, l.timeouts)
		if len(z) != 1 || z["c4:1"] != d4-scWait {
			t.Fatalf("deadlines = %v, want c4:1=%d", z, d4-scWait)
		}
		ok, err = scFairLeave(rdb, l, "c3:1")
		if err != nil || ok {
			t.Fatalf("c3 leaves again = %v, %v; want false", ok, err)
		}
		// Each new head of the queue is told it is next, on its own channel:
		// c3 when c2 took the lock, c4 when c3 left.
		scWantMessages(t, rdb, ps, false, l.channel, l.waiterChannel("c3:1")+"=0", l.waiterChannel("c4:1")+"=0")

		// Partial release by c2: 0, lease refreshed, nobody woken.
		if got := scInt(t, "c2 partial release")(scFairRelease(rdb, l, "c2:1", "req-2")); got != 0 {
			t.Fatalf("c2 partial release = %d, want 0", got)
		}
		scWantHash(t, rdb, l.name, map[string]string{"c2:1": "1"})
		scWantLatch(t, rdb, l.latch("req-2"), "0")
		scWantMessages(t, rdb, ps, false, l.channel)

		// Force release: true, lock gone, the holder told on the lock's
		// channel (for Options.WatchHolds), the head (c4) woken.
		ok, err = scFairForce(rdb, l)
		if err != nil || !ok {
			t.Fatalf("force release = %v, %v; want true", ok, err)
		}
		scWantGone(t, rdb, l.name)
		scWantMessages(t, rdb, ps, false, l.channel, l.channel+"=0", l.waiterChannel("c4:1")+"=0")
		scWantList(t, rdb, l.queue, "c4:1")

		// c4 leaves; then force release finds nothing.
		if ok, err := scFairLeave(rdb, l, "c4:1"); err != nil || !ok {
			t.Fatalf("c4 leaves = %v, %v; want true", ok, err)
		}
		ok, err = scFairForce(rdb, l)
		if err != nil || ok {
			t.Fatalf("force release of nothing = %v, %v; want false", ok, err)
		}
		scWantMessages(t, rdb, ps, false, l.channel)
		scWantNoKeysLeft(t, rdb, l.name)

		// Bad arguments: errors naming the script, nothing created.
		bad := scNewLock(uniqueName(t) + "-bad")
		_, err = generated.FairAcquire(context.Background(), rdb, bad.fairKeys(),
			generated.FairAcquireArgs{LeaseMS: scLease, Field: "c1:1", WaitMS: 0, Holds: 1, Publish: "publish"})
		scScriptErr(t, "fair acquire wait 0", err, "fair_acquire", "wait_ms must be a positive integer")
		_, err = generated.FairAcquire(context.Background(), rdb, bad.fairKeys(),
			generated.FairAcquireArgs{LeaseMS: scLease, Field: "c1:1", WaitMS: scWait, Holds: 1, Publish: "x"})
		scScriptErr(t, "fair acquire bad publish", err, "fair_acquire", "publish must be publish, spublish or both")
		_, err = generated.FairLeave(context.Background(), rdb, generated.FairLeaveKeys(bad.fairKeys()),
			generated.FairLeaveArgs{Field: "c1:1", WaitMS: -1, Publish: "publish"})
		scScriptErr(t, "fair leave wait -1", err, "fair_leave", "wait_ms must be a positive integer")
		_, err = generated.FairRelease(context.Background(), rdb, bad.fairReleaseKeys("r"),
			generated.FairReleaseArgs{LeaseMS: scLease, Field: "c1:1", LatchMS: scLatchMS, WaitMS: scWait, Publish: ""})
		scScriptErr(t, "fair release bad publish", err, "fair_release", "publish must be publish, spublish or both")
		_, err = generated.FairForceRelease(context.Background(), rdb, bad.fairForceKeys(),
			generated.FairForceReleaseArgs{LatchMS: scLatchMS, WaitMS: scWait, Publish: "PUBLISH"})
		scScriptErr(t, "fair force release bad publish", err, "fair_force_release", "publish must be publish, spublish or both")
		scWantNoKeysLeft(t, rdb, bad.name)
		scWantGone(t, rdb, bad.latch("r"))
	})
}

// ============================================================================
// Script cache: NOSCRIPT recovery, LoadAll, pipelines
// ============================================================================

func TestScriptNoScriptRecovery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := scNewLock(uniqueName(t))

		scFlush(t, rdb)
		scWantCached(t, rdb, false, generated.LockAcquireSHA1, generated.LockStatusSHA1)

		rec := &scScripter{Scripter: rdb}
		scZero(t, "acquire after SCRIPT FLUSH")(scAcquire(rec, l, "c1:1", 1, scLease))
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		// EVALSHA (NOSCRIPT), SCRIPT LOAD, EVALSHA; the source never goes
		// out with EVAL.
		scWantCalls(t, rec, map[string]int{"evalsha": 2, "script load": 1})
		scWantCached(t, rdb, true, generated.LockAcquireSHA1) // on every master
		scWantCached(t, rdb, false, generated.LockStatusSHA1)

		// The same for a read-only script, with EVALSHA_RO.
		rec = &scScripter{Scripter: rdb}
		got, err := generated.LockStatus(ctx, rec, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"})
		if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 1 {
			t.Fatalf("status after SCRIPT FLUSH = %v, %v; want [1 1 pttl]", got, err)
		}
		scWantCalls(t, rec, map[string]int{"evalsha_ro": 2, "script load": 1})
		scWantCached(t, rdb, true, generated.LockStatusSHA1)

		// Loaded now: a single EVALSHA.
		rec = &scScripter{Scripter: rdb}
		if got := scInt(t, "release")(scRelease(rec, l, "c1:1", "req-1", scLease, "publish")); got != 1 {
			t.Fatalf("release = %d, want 1", got)
		}
		rec2 := &scScripter{Scripter: rdb}
		scZero(t, "acquire again")(scAcquire(rec2, l, "c1:1", 1, scLease))
		scWantCalls(t, rec2, map[string]int{"evalsha": 1})
		if err := rdb.Del(ctx, l.name).Err(); err != nil {
			t.Fatal(err)
		}
		scWantNoKeysLeft(t, rdb, l.name)
	})
}

func TestScriptLoadAll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		scFlush(t, rdb)
		scWantCached(t, rdb, false, scAllSHAs()...)

		rec := &scScripter{Scripter: rdb}
		if err := generated.LoadAll(ctx, rec); err != nil {
			t.Fatalf("LoadAll: %v", err)
		}
		scWantCalls(t, rec, map[string]int{"script load": len(generated.Scripts)})
		scWantCached(t, rdb, true, scAllSHAs()...) // every script on every master

		// Loading again is harmless.
		if err := generated.LoadAll(ctx, rdb); err != nil {
			t.Fatalf("LoadAll again: %v", err)
		}

		// Load checks the SHA1 Redis reports against the generated one.
		bad := *generated.LockStatusScript
		bad.Name = "lock_status_tampered"
		bad.SHA1 = strings.Repeat("0", 40)
		err := bad.Load(ctx, rdb)
		scScriptErr(t, "load with a wrong SHA1", err, "lock_status_tampered", "want "+bad.SHA1)
	})
}

// TestScriptRing: the wrappers on a redis.Ring of two servers. A Ring sends
// SCRIPT LOAD to one shard and EVALSHA to the shard of the first key, so
// NOSCRIPT recovery and LoadAll must load on every shard.
func TestScriptRing(t *testing.T) {
	ctx := context.Background()
	a, b := harness.StartStandalone(t), harness.StartStandalone(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	shards := []*redis.Client{a.Client(), b.Client()}
	for _, c := range shards {
		t.Cleanup(func() { _ = c.Close() })
	}
	onShard := func(sha string) []bool {
		var got []bool
		for _, c := range shards {
			ok, err := c.ScriptExists(ctx, sha).Result()
			if err != nil {
				t.Fatalf("SCRIPT EXISTS: %v", err)
			}
			got = append(got, ok[0])
		}
		return got
	}

	// NOSCRIPT recovery, with keys on both shards.
	used := map[string]bool{}
	for i := range 20 {
		name := fmt.Sprintf("ring-%d", i)
		wait, err := generated.LockAcquire(ctx, ring, generated.LockAcquireKeys{Lock: name},
			generated.LockAcquireArgs{LeaseMS: 10_000, Field: "c:1", Holds: 1})
		if err != nil || wait != 0 {
			t.Fatalf("LockAcquire %s on a Ring = %d, %v; want 0", name, wait, err)
		}
		for j, c := range shards {
			if c.Exists(ctx, name).Val() == 1 {
				used[fmt.Sprint(j)] = true
			}
		}
	}
	if len(used) != 2 {
		t.Fatalf("the 20 locks landed on shards %v, want both", used)
	}
	if got := onShard(generated.LockAcquireSHA1); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("lock_acquire cached on shards %v after NOSCRIPT recovery, want both", got)
	}

	for _, c := range shards {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	}
	if err := generated.LoadAll(ctx, ring); err != nil {
		t.Fatalf("LoadAll on a Ring: %v", err)
	}
	for _, sc := range generated.Scripts {
		if got := onShard(sc.SHA1); !slices.Equal(got, []bool{true, true}) {
			t.Errorf("%s cached on shards %v after LoadAll, want both", sc.Name, got)
		}
	}
}

func TestScriptPipeline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		if err := generated.LoadAll(ctx, rdb); err != nil {
			t.Fatalf("LoadAll: %v", err)
		}

		type pipeFunc func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
		for _, p := range []struct {
			name string
			run  pipeFunc
		}{
			{"Pipelined", rdb.Pipelined},
			// MULTI/EXEC; on the cluster all keys of one lock share a slot.
			{"TxPipelined", rdb.TxPipelined},
		} {
			t.Run(p.name, func(t *testing.T) {
				l := scNewLock(uniqueName(t))
				var acq1, acq2, acq3, status, renew, rel1, rel2, force *redis.Cmd
				_, err := p.run(ctx, func(pipe redis.Pipeliner) error {
					acq1 = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c1:1", Holds: 1})
					acq2 = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c2:1", Holds: 1})
					acq3 = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c1:1", Holds: 2})
					status = generated.LockStatusCmd(ctx, pipe, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"})
					renew = generated.LockRenewCmd(ctx, pipe, generated.LockRenewKeys{Locks: []string{l.name}}, generated.LockRenewArgs{LeaseMS: scLease, Fields: []string{"c1:1"}})
					rel1 = generated.LockReleaseCmd(ctx, pipe, l.releaseKeys("req-1"), generated.LockReleaseArgs{LeaseMS: scLease, Field: "c1:1", LatchMS: scLatchMS, Publish: "publish"})
					rel2 = generated.LockReleaseCmd(ctx, pipe, l.releaseKeys("req-2"), generated.LockReleaseArgs{LeaseMS: scLease, Field: "c1:1", LatchMS: scLatchMS, Publish: "publish"})
					force = generated.LockForceReleaseCmd(ctx, pipe, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"})
					return nil
				})
				// Exec reports the first failed command, and go-redis counts a
				// nil reply (Lua false, here force release's) as redis.Nil.
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Fatalf("%s: %v", p.name, err)
				}
				scZero(t, "acquire")(generated.LockAcquireResult(acq1))
				if got := scOK(t, "other owner")(generated.LockAcquireResult(acq2)); got <= 0 || got > scLease {
					t.Fatalf("other owner = %d, want the PTTL", got)
				}
				scZero(t, "re-enter")(generated.LockAcquireResult(acq3))
				st, err := generated.LockStatusResult(status)
				if err != nil || len(st) != 3 || st[0] != 1 || st[1] != 2 || st[2] <= 0 {
					t.Fatalf("status = %v, %v; want [1 2 pttl]", st, err)
				}
				rn, err := generated.LockRenewResult(renew)
				if err != nil || !slices.Equal(rn, []int64{1}) {
					t.Fatalf("renew = %v, %v; want [1]", rn, err)
				}
				if got := scInt(t, "partial release")(generated.LockReleaseResult(rel1)); got != 0 {
					t.Fatalf("partial release = %d, want 0", got)
				}
				if got := scInt(t, "full release")(generated.LockReleaseResult(rel2)); got != 1 {
					t.Fatalf("full release = %d, want 1", got)
				}
				if ok, err := generated.LockForceReleaseResult(force); err != nil || ok {
					t.Fatalf("force release = %v, %v; want false", ok, err)
				}
				scWantNoKeysLeft(t, rdb, l.name)

				// The fair scripts in a pipeline.
				f := scNewLock(uniqueName(t) + "-fair")
				var fa1, fa2, fl2, fr1, ff *redis.Cmd
				_, err = p.run(ctx, func(pipe redis.Pipeliner) error {
					fa1 = generated.FairAcquireCmd(ctx, pipe, f.fairKeys(), generated.FairAcquireArgs{LeaseMS: scLease, Field: "c1:1", WaitMS: scWait, Holds: 1, Publish: "publish"})
					fa2 = generated.FairAcquireCmd(ctx, pipe, f.fairKeys(), generated.FairAcquireArgs{LeaseMS: scLease, Field: "c2:1", WaitMS: scWait, Holds: 1, Publish: "publish"})
					fl2 = generated.FairLeaveCmd(ctx, pipe, generated.FairLeaveKeys(f.fairKeys()), generated.FairLeaveArgs{Field: "c2:1", WaitMS: scWait, Publish: "publish"})
					fr1 = generated.FairReleaseCmd(ctx, pipe, f.fairReleaseKeys("req-1"), generated.FairReleaseArgs{LeaseMS: scLease, Field: "c1:1", LatchMS: scLatchMS, WaitMS: scWait, Publish: "publish"})
					ff = generated.FairForceReleaseCmd(ctx, pipe, f.fairForceKeys(), generated.FairForceReleaseArgs{LatchMS: scLatchMS, WaitMS: scWait, Publish: "publish"})
					return nil
				})
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Fatalf("%s (fair): %v", p.name, err)
				}
				scZero(t, "fair acquire")(generated.FairAcquireResult(fa1))
				if got := scOK(t, "fair queue")(generated.FairAcquireResult(fa2)); got <= 0 {
					t.Fatalf("fair queue = %d, want > 0", got)
				}
				if ok, err := generated.FairLeaveResult(fl2); err != nil || !ok {
					t.Fatalf("fair leave = %v, %v; want true", ok, err)
				}
				if got := scInt(t, "fair release")(generated.FairReleaseResult(fr1)); got != 1 {
					t.Fatalf("fair release = %d, want 1", got)
				}
				if ok, err := generated.FairForceReleaseResult(ff); err != nil || ok {
					t.Fatalf("fair force release = %v, %v; want false", ok, err)
				}
				scWantNoKeysLeft(t, rdb, f.name)
			})
		}

		// Why LoadAll exists: a pipeline cannot recover from NOSCRIPT, since
		// XCmd only queues one EVALSHA.
		t.Run("NoScriptWithoutLoadAll", func(t *testing.T) {
			l := scNewLock(uniqueName(t))
			scFlush(t, rdb)
			var acq *redis.Cmd
			_, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				acq = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c1:1", Holds: 1})
				return nil
			})
			if !redis.HasErrorPrefix(err, "NOSCRIPT") {
				t.Fatalf("pipeline after SCRIPT FLUSH: %v, want NOSCRIPT", err)
			}
			_, err = generated.LockAcquireResult(acq)
			scScriptErr(t, "result after SCRIPT FLUSH", err, "lock_acquire", "NOSCRIPT")
			if !redis.HasErrorPrefix(err, "NOSCRIPT") {
				t.Fatalf("result: %v does not start with NOSCRIPT", err)
			}
			scWantGone(t, rdb, l.name)
			scWantCached(t, rdb, false, generated.LockAcquireSHA1) // nothing loaded it

			if err := generated.LoadAll(ctx, rdb); err != nil {
				t.Fatalf("LoadAll: %v", err)
			}
			_, err = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				acq = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c1:1", Holds: 1})
				return nil
			})
			if err != nil {
				t.Fatalf("pipeline after LoadAll: %v", err)
			}
			scZero(t, "acquire after LoadAll")(generated.LockAcquireResult(acq))
			if err := rdb.Del(ctx, l.name).Err(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// ============================================================================
// Cluster key layout
// ============================================================================

// scCallAll runs every script once with lock name's real key layout,
// leaving no keys but a latch. It reports the first error.
func scCallAll(rdb redis.Scripter, name string) error {
	ctx := context.Background()
	l := scNewLock(name)
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if _, err := scAcquire(rdb, l, "c1:1", 1, scLease); err != nil {
		return step("lock_acquire", err)
	}
	if _, err := generated.LockStatus(ctx, rdb, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"}); err != nil {
		return step("lock_status", err)
	}
	if _, err := generated.LockRenew(ctx, rdb, generated.LockRenewKeys{Locks: []string{l.name}}, generated.LockRenewArgs{LeaseMS: scLease, Fields: []string{"c1:1"}}); err != nil {
		return step("lock_renew", err)
	}
	if _, err := scRelease(rdb, l, "c1:1", "req-1", scLease, "publish"); err != nil {
		return step("lock_release", err)
	}
	if _, err := generated.LockForceRelease(ctx, rdb, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: scLatchMS, Publish: "publish"}); err != nil {
		return step("lock_force_release", err)
	}
	if _, err := scFairAcquire(rdb, l, "c1:1", 1); err != nil {
		return step("fair_acquire", err)
	}
	if _, err := scFairAcquire(rdb, l, "c2:1", 1); err != nil {
		return step("fair_acquire (queue)", err)
	}
	if _, err := scFairLeave(rdb, l, "c2:1"); err != nil {
		return step("fair_leave", err)
	}
	if _, err := scFairRelease(rdb, l, "c1:1", "req-2"); err != nil {
		return step("fair_release", err)
	}
	if _, err := scFairForce(rdb, l); err != nil {
		return step("fair_force_release", err)
	}
	return nil
}

func TestScriptClusterNoCrossSlot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		base := uniqueName(t)
		names := []string{
			base, base + ":x", base + " with space", base + "-ü",
			"{" + base + "}", "{" + base + "}-x", "a{" + base + "}b", "user:{" + base + "}:lock",
			base + ":{t}", "{t}" + base, "}{" + base + "}", "{" + base + "}{x}", "{" + base + "}}",
		}
		for i := range 24 {
			names = append(names, fmt.Sprintf("%s-%d", base, i), fmt.Sprintf("{%s-%d}lock", base, i))
		}
		slots := map[int64]bool{}
		for _, name := range names {
			if err := scCallAll(rdb, name); err != nil {
				if redis.HasErrorPrefix(err, "CROSSSLOT") {
					t.Errorf("name %q: CROSSSLOT: %v", name, err)
				} else {
					t.Errorf("name %q: %v", name, err)
				}
				continue
			}
			if left := keysLeft(t, rdb, name, false); len(left) > 0 {
				t.Errorf("name %q: keys left: %q", name, left)
			}
			if b.cluster {
				s, err := rdb.ClusterKeySlot(context.Background(), name).Result()
				if err != nil {
					t.Fatal(err)
				}
				slots[s] = true
			}
		}
		if b.cluster && len(slots) < 10 {
			t.Errorf("the names hit only %d slots; want a spread", len(slots))
		}
	})
}

// A name with a "{" but no non-empty hash tag ("a{b", "a{}b") is hashed
// whole, while tag() does not wrap it in braces: the lock and its other keys
// land in different slots, and every multi-key script fails with CROSSSLOT
// on a cluster. Redisson names keys the same way, so the layout cannot
// change; such names have to be refused before they reach Redis. This test
// documents the behaviour of the scripts for them.
func TestScriptClusterBraceWithoutTag(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		if !b.cluster {
			t.Skip("cluster only")
		}
		ctx := context.Background()
		base := uniqueName(t)
		for _, name := range []string{base + "{x", base + "{}y", "{}" + base, base + "}{"} {
			l := scNewLock(name)
			s1, err1 := rdb.ClusterKeySlot(ctx, l.name).Result()
			s2, err2 := rdb.ClusterKeySlot(ctx, l.channel).Result()
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if s1 == s2 {
				t.Logf("name %q: lock and channel share slot %d by chance", name, s1)
				continue
			}
			// Single-key scripts work.
			scZero(t, "acquire "+name)(scAcquire(rdb, l, "c1:1", 1, scLease))
			// Multi-key ones cannot.
			_, err := scRelease(rdb, l, "c1:1", "req-1", scLease, "publish")
			if !redis.HasErrorPrefix(err, "CROSSSLOT") {
				t.Errorf("name %q: release = %v, want CROSSSLOT (lock slot %d, channel slot %d)", name, err, s1, s2)
			}
			if err := rdb.Del(ctx, l.name).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// ============================================================================
// Generated constants, retries, errors
// ============================================================================

func TestScriptSHA1MatchesSource(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "lua", "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no ../lua/*.lua")
	}
	byFile := map[string]*luart.Script{}
	for _, s := range generated.Scripts {
		if byFile[s.File] != nil {
			t.Errorf("two scripts from %s", s.File)
		}
		byFile[s.File] = s
	}
	if len(files) != len(generated.Scripts) {
		t.Errorf("%d .lua files but %d generated scripts", len(files), len(generated.Scripts))
	}
	// The Source of a script is its file with its includes expanded, as
	// luagen parses it; a file without includes is its own Source.
	parsed, diags := gen.Parse(os.DirFS(".."), gen.Config{Src: "lua"})
	if gen.HasErrors(diags) {
		t.Fatalf("luagen parse of ../lua: %v", diags)
	}
	expanded := map[string]string{}
	for _, p := range parsed {
		expanded[p.File] = string(p.Source)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file := "lua/" + filepath.Base(f)
		s := byFile[file]
		if s == nil {
			t.Errorf("%s: no generated script", file)
			continue
		}
		want, ok := expanded[file]
		switch {
		case !ok:
			t.Errorf("%s: luagen did not parse it", file)
		case !strings.Contains(string(src), "@include") && want != string(src):
			t.Errorf("%s: has no include, but luagen's Source differs from the file", file)
		case s.Source != want:
			t.Errorf("%s: generated Source differs from the file with its includes expanded", file)
		}
		sum := sha1.Sum([]byte(s.Source))
		if want := hex.EncodeToString(sum[:]); s.SHA1 != want {
			t.Errorf("%s: generated SHA1 %s, sha1 of its Source %s", file, s.SHA1, want)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".lua"); s.Name != want {
			t.Errorf("%s: script name %q, want %q", file, s.Name, want)
		}
	}
	if !slices.IsSortedFunc(generated.Scripts, func(a, b *luart.Script) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Scripts is not sorted by name")
	}
	for _, c := range []struct {
		s         *luart.Script
		src, sha  string
		read, idm bool
	}{
		{generated.FairAcquireScript, generated.FairAcquireSource, generated.FairAcquireSHA1, false, true},
		{generated.FairForceReleaseScript, generated.FairForceReleaseSource, generated.FairForceReleaseSHA1, false, true},
		{generated.FairLeaveScript, generated.FairLeaveSource, generated.FairLeaveSHA1, false, true},
		{generated.FairReleaseScript, generated.FairReleaseSource, generated.FairReleaseSHA1, false, true},
		{generated.LockAcquireScript, generated.LockAcquireSource, generated.LockAcquireSHA1, false, true},
		{generated.LockForceReleaseScript, generated.LockForceReleaseSource, generated.LockForceReleaseSHA1, false, true},
		{generated.LockReleaseScript, generated.LockReleaseSource, generated.LockReleaseSHA1, false, true},
		{generated.LockRenewScript, generated.LockRenewSource, generated.LockRenewSHA1, false, true},
		{generated.LockStatusScript, generated.LockStatusSource, generated.LockStatusSHA1, true, true},
	} {
		if c.s.Source != c.src || c.s.SHA1 != c.sha || c.s.ReadOnly != c.read || c.s.Idempotent != c.idm {
			t.Errorf("%s: Script fields disagree with the constants or the header flags", c.s.Name)
		}
	}
}

// scRetry binds a retry policy to c (luart.WithRetry): there is no global
// to set.
func scRetry(c redis.Scripter, attempts int, backoff, maxBackoff time.Duration) redis.Scripter {
	return luart.WithRetry(c, luart.Retry{Attempts: attempts, Backoff: backoff, MaxBackoff: maxBackoff})
}

func TestScriptRetry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		fast := func(c redis.Scripter) redis.Scripter { return scRetry(c, 3, time.Millisecond, 4*time.Millisecond) }
		if err := generated.LoadAll(ctx, rdb); err != nil {
			t.Fatalf("LoadAll: %v", err)
		}
		l := scNewLock(uniqueName(t))

		// Idempotent: two transient failures, then success on the third call.
		rec := &scScripter{Scripter: rdb, fail: 2, failErr: io.EOF}
		scZero(t, "acquire after 2 EOFs")(scAcquire(fast(rec), l, "c1:1", 1, scLease))
		scWantCalls(t, rec, map[string]int{"evalsha": 3})
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})

		loading := scRedisErr("LOADING Redis is loading the dataset in memory")
		rec = &scScripter{Scripter: rdb, fail: 2, failErr: loading}
		got, err := generated.LockStatus(ctx, fast(rec), generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"})
		if err != nil || len(got) != 3 || got[1] != 1 {
			t.Fatalf("status after 2 LOADING = %v, %v", got, err)
		}
		scWantCalls(t, rec, map[string]int{"evalsha_ro": 3})

		// Attempts is the number of calls in all: three failures are final.
		rec = &scScripter{Scripter: rdb, fail: 3, failErr: io.EOF}
		_, err = scRelease(fast(rec), l, "c1:1", "req-1", scLease, "publish")
		scScriptErr(t, "release after 3 EOFs", err, "lock_release", "EOF")
		if !errors.Is(err, io.EOF) {
			t.Fatalf("release after 3 EOFs: %v is not io.EOF", err)
		}
		scWantCalls(t, rec, map[string]int{"evalsha": 3})
		scWantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})

		// A reply error that is not transient is not retried.
		rec = &scScripter{Scripter: rdb, fail: 1, failErr: scRedisErr("ERR something else")}
		_, err = scRelease(fast(rec), l, "c1:1", "req-1", scLease, "publish")
		scScriptErr(t, "release after ERR", err, "lock_release", "ERR something else")
		scWantCalls(t, rec, map[string]int{"evalsha": 1})

		// Nor is a script's own error reply: the LOST error comes back after
		// one call.
		rec = &scScripter{Scripter: rdb}
		_, err = scAcquire(fast(rec), l, "c2:1", 2, scLease)
		if !redis.HasErrorPrefix(err, "LOST") {
			t.Fatalf("LOST: %v", err)
		}
		scWantCalls(t, rec, map[string]int{"evalsha": 1})

		// Not idempotent: never retried, whatever the error. The synthetic
		// script counts its runs.
		counter := scNewLock(uniqueName(t) + "-counter").name
		src := "return redis.call('incr', KEYS[1])\n"
		sum := sha1.Sum([]byte(src))
		once := &luart.Script{Name: "x", Source: src, SHA1: hex.EncodeToString(sum[:]), Keys: []string{"counter"}, Return: "int", Idempotent: false}
		if err := once.Load(ctx, rdb); err != nil {
			t.Fatalf("load x: %v", err)
		}
		for _, ferr := range []error{io.EOF, loading} {
			rec = &scScripter{Scripter: rdb, fail: 1, failErr: ferr}
			_, err = once.Run(ctx, fast(rec), []string{counter})
			if !errors.Is(err, ferr) {
				t.Fatalf("non-idempotent run after %v: %v", ferr, err)
			}
			scWantCalls(t, rec, map[string]int{"evalsha": 1})
		}
		scWantGone(t, rdb, counter)
		// The same script marked idempotent is retried, and runs once.
		again := *once
		again.Idempotent = true
		rec = &scScripter{Scripter: rdb, fail: 2, failErr: io.EOF}
		v, err := again.Run(ctx, fast(rec), []string{counter})
		if err != nil || v != int64(1) {
			t.Fatalf("idempotent run = %v, %v; want 1", v, err)
		}
		scWantCalls(t, rec, map[string]int{"evalsha": 3})
		if v, _ := scGet(t, rdb, counter); v != "1" {
			t.Fatalf("counter = %q, want 1", v)
		}

		// A context cancelled while a retry waits ends the call at once.
		slow := func(c redis.Scripter) redis.Scripter { return scRetry(c, 5, 10*time.Second, 10*time.Second) }
		cctx, cancel := context.WithCancel(ctx)
		rec = &scScripter{Scripter: rdb, fail: 5, failErr: io.EOF, onFail: cancel}
		start := time.Now()
		_, err = generated.LockAcquire(cctx, slow(rec), l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c1:1", Holds: 1})
		if err == nil || time.Since(start) > 2*time.Second {
			t.Fatalf("cancelled retry: %v after %v", err, time.Since(start))
		}
		scWantCalls(t, rec, map[string]int{"evalsha": 1})
		// ... and a deadline during the backoff as well.
		dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		rec = &scScripter{Scripter: rdb, fail: 5, failErr: io.EOF}
		start = time.Now()
		_, err = generated.LockAcquire(dctx, slow(rec), l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c1:1", Holds: 1})
		dcancel()
		if err == nil || time.Since(start) > 2*time.Second {
			t.Fatalf("retry past the deadline: %v after %v", err, time.Since(start))
		}
		scWantCalls(t, rec, map[string]int{"evalsha": 1})

		// A cancelled context: a *luart.Error naming the script, and
		// errors.Is sees context.Canceled through it.
		cancel()
		_, err = generated.LockAcquire(cctx, rdb, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: scLease, Field: "c1:1", Holds: 1})
		scScriptErr(t, "cancelled context", err, "lock_acquire", "context canceled")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled context: errors.Is(%v, context.Canceled) = false", err)
		}
		for _, k := range []string{l.name, counter} { // two slots: one DEL each
			if err := rdb.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
