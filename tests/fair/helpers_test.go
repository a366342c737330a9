package fair_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Helpers of the fair lock's suite: its keys, its scripts called as a
// client would, queue snapshots, and the checks that a test left nothing
// behind.

// testLatch is the UnlockLatch of every client of these tests: short, so
// that the latches are gone soon after the test and keysLeft can count them.
const testLatch = 200 * time.Millisecond

// roundingMs is how far apart two deadlines computed for the same instant
// by different script calls may lie: TIME and PTTL each round to the
// millisecond.
const roundingMs = 5

// miniClockMs is roundingMs on miniredis, whose TTLs follow the clock by
// steps: each access advances them by the time since the previous one
// (ClockTTL), and TIME reads the clock anew, so within one script a PTTL
// and a TIME can be as of moments apart by however long the script was
// descheduled (22 ms seen under load; Redis takes both from the command's
// start).
// It stays far below the 10 s budgets the deadlines are compared against.
const miniClockMs = 250

// fairKeys are the keys and the channel prefix of one fair lock.
type fairKeys struct {
	lock, queue, timeouts, channel, tagged string
}

func keysOf(name string) fairKeys {
	tagged := "{" + name + "}"
	if strings.Contains(name, "{") {
		tagged = name
	}
	return fairKeys{
		lock:     name,
		queue:    "redisson_lock_queue:" + tagged,
		timeouts: "redisson_lock_timeout:" + tagged,
		channel:  "redisson_lock__channel:" + tagged,
		tagged:   tagged,
	}
}

// waiterChannel is the channel on which the fair lock wakes the waiter field.
func (k fairKeys) waiterChannel(field string) string { return k.channel + ":" + field }

var reqs atomic.Int64

// fairAcquire runs the acquire script for field with one hold, as a process
// that is not a lualock client would (a fake owner id). It returns nil when
// field got the lock and otherwise the wait the script told it.
func fairAcquire(ctx context.Context, rdb redis.UniversalClient, k fairKeys, field string, leaseMS, waitMS int64) (*int64, error) {
	wait, err := generated.FairAcquire(ctx, rdb,
		generated.FairAcquireKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel},
		generated.FairAcquireArgs{LeaseMS: leaseMS, Field: field, WaitMS: waitMS, Holds: 1, Publish: "publish"})
	if err != nil || wait == 0 {
		return nil, err
	}
	return &wait, nil
}

func fairLeave(ctx context.Context, rdb redis.UniversalClient, k fairKeys, field string, waitMS int64) (bool, error) {
	return generated.FairLeave(ctx, rdb,
		generated.FairLeaveKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel},
		generated.FairLeaveArgs{Field: field, WaitMS: waitMS, Publish: "publish"})
}

func fairRelease(ctx context.Context, rdb redis.UniversalClient, k fairKeys, field string, leaseMS int64) (*int64, error) {
	req := "ft:" + strconv.FormatInt(reqs.Add(1), 10)
	return generated.FairRelease(ctx, rdb,
		generated.FairReleaseKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel,
			Latch: "redisson_unlock_latch:" + k.tagged + ":" + req},
		generated.FairReleaseArgs{LeaseMS: leaseMS, Field: field, LatchMS: testLatch.Milliseconds(), WaitMS: driftWait, Publish: "publish"})
}

// fairForce runs the fair force release with a fresh request id.
func fairForce(ctx context.Context, rdb redis.UniversalClient, k fairKeys) (bool, error) {
	req := "ff:" + strconv.FormatInt(reqs.Add(1), 10)
	return generated.FairForceRelease(ctx, rdb,
		generated.FairForceReleaseKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel,
			Latch: "redisson_unlock_latch:" + k.tagged + ":" + req},
		generated.FairForceReleaseArgs{LatchMS: testLatch.Milliseconds(), WaitMS: 10_000, Publish: "publish"})
}

// windDown ends a script-level scenario through the scripts themselves:
// holder releases its hold (when it has one) and every queued fake owner
// leaves; then nothing of the lock may be left in Redis but its latches,
// which expire on their own.
func windDown(t *testing.T, rdb redis.UniversalClient, k fairKeys, holder string, leaseMS, waitMS int64) {
	t.Helper()
	ctx := context.Background()
	if holder != "" {
		if r, err := fairReleaseWait(ctx, rdb, k, holder, leaseMS, waitMS); err != nil || r == nil || *r != 1 {
			t.Errorf("%s release = %v, %v; want 1", holder, ptrString(r), err)
		}
	}
	for _, f := range mustSnapshot(t, rdb, k).queue {
		if _, err := fairLeave(ctx, rdb, k, f, waitMS); err != nil {
			t.Errorf("%s leaves: %v", f, err)
		}
	}
	if left := backends.KeysLeft(t, rdb, k.lock, false); len(left) > 0 {
		t.Errorf("keys left behind: %q", left)
	}
}

// wokenFields returns, in order, the owner fields whose waiter channel sub has
// received a message on so far. sub must also be subscribed to the
// barrier waiter channel (see backends.Messages: no sleeping).
func wokenFields(t *testing.T, rdb redis.UniversalClient, sub *redis.PubSub, k fairKeys) []string {
	t.Helper()
	var got []string
	for _, m := range backends.Messages(t, rdb, sub, false, k.waiterChannel(barrierField)) {
		got = append(got, strings.TrimSuffix(strings.TrimPrefix(m, k.channel+":"), "=0"))
	}
	return got
}

// barrierField is the owner field whose waiter channel wokenFields's barrier uses.
const barrierField = "barrier"

// queueSnap is the queue and the deadlines of a fair lock read in one MULTI:
// scores has the whole-millisecond deadlines, tombs the tombstones (a
// waiter that gave up from the middle of the queue: its deadline is a
// passed time plus half a millisecond). now is Redis's clock (TIME) read
// just after.
type queueSnap struct {
	queue  []string
	scores map[string]int64
	tombs  map[string]float64
	now    int64
}

func takeSnapshot(ctx context.Context, rdb redis.UniversalClient, k fairKeys) (queueSnap, error) {
	var lr *redis.StringSliceCmd
	var zr *redis.ZSliceCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		lr = p.LRange(ctx, k.queue, 0, -1)
		zr = p.ZRangeWithScores(ctx, k.timeouts, 0, -1)
		return nil
	})
	if err != nil {
		return queueSnap{}, err
	}
	s := queueSnap{queue: lr.Val(), scores: map[string]int64{}, tombs: map[string]float64{}}
	for _, z := range zr.Val() {
		if z.Score != float64(int64(z.Score)) {
			s.tombs[fmt.Sprint(z.Member)] = z.Score
			continue
		}
		s.scores[fmt.Sprint(z.Member)] = int64(z.Score)
	}
	tm, err := rdb.Time(ctx).Result()
	if err != nil {
		return queueSnap{}, err
	}
	s.now = tm.UnixMilli()
	return s, nil
}

func mustSnapshot(t *testing.T, rdb redis.UniversalClient, k fairKeys) queueSnap {
	t.Helper()
	s, err := takeSnapshot(context.Background(), rdb, k)
	if err != nil {
		t.Fatalf("snapshot of %s: %v", k.lock, err)
	}
	return s
}

// waitQueued waits until the queue holds n waiters and returns it.
func waitQueued(t *testing.T, rdb redis.UniversalClient, k fairKeys, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, err := rdb.LRange(context.Background(), k.queue, 0, -1).Result()
		if err != nil {
			t.Fatalf("LRANGE %s: %v", k.queue, err)
		}
		if len(q) == n {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s is %q, want %d waiters", k.queue, q, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// newClient returns a client on rdb that the test's cleanup closes. The
// unlock latch is testLatch unless opts says otherwise.
func newClient(t *testing.T, rdb redis.UniversalClient, opts lualock.Options) *lualock.Client {
	t.Helper()
	if opts.UnlockLatch == 0 {
		opts.UnlockLatch = testLatch
	}
	c, err := lualock.New(rdb, opts)
	if err != nil {
		t.Fatalf("lualock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// checkClean checks that the clients wait for nothing and subscribe to
// nothing, and that name leaves no key behind: it polls for up to within
// (at least 1s) until the latches and leases expired.
func checkClean(t *testing.T, rdb redis.UniversalClient, name string, within time.Duration, clients ...*lualock.Client) {
	t.Helper()
	deadline := time.Now().Add(max(within, time.Second))
	for i, c := range clients {
		if s := c.Stats(); s.Waiters != 0 {
			t.Errorf("client %d: Stats() = %+v after the waits ended, want no waiter", i, s)
		}
		// A channel lingers (Options.SubscriptionLinger, 500ms by default)
		// after its last waiter got the lock.
		for c.Stats().Subscriptions != 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if s := c.Stats(); s.Subscriptions != 0 {
			t.Errorf("client %d: Stats() = %+v after the waits ended, want no subscription", i, s)
		}
	}
	for {
		left := backends.KeysLeft(t, rdb, name, true)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("keys left behind by %s: %q", name, left)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := backends.KeysLeft(t, rdb, name, false); len(left) > 0 {
		t.Errorf("keys left behind by %s: %q", name, left)
	}
	// And on the server: no channel of the lock keeps a subscriber (the
	// unsubscriptions are sent in the background).
	pattern := keysOf(name).channel + "*"
	for {
		chs := backends.Channels(t, rdb, pattern)
		if len(chs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("channels of %s still subscribed in Redis: %q", name, chs)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errList collects the errors of worker goroutines, which must not call
// t.Fatal or t.Error.
type errList struct {
	mu   sync.Mutex
	errs []error
}

func (e *errList) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Errorf(format, args...))
}

func (e *errList) report(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range e.errs {
		t.Error(err)
	}
}
