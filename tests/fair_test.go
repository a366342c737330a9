package tests

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// The fair lock's integration tests. Helpers are prefixed with ft (fair
// test) so that they do not collide with the other test files of this
// package.

// ftLatch is the UnlockLatch of every client of these tests: short, so
// that the latches are gone soon after the test and keysLeft can count them.
const ftLatch = 200 * time.Millisecond

// ftRoundingMs is how far apart two deadlines computed for the same instant
// by different script calls may lie: TIME and PTTL each round to the
// millisecond.
const ftRoundingMs = 5

// ftNames are the keys and the channel prefix of one fair lock.
type ftNames struct {
	lock, queue, timeouts, channel, tagged string
}

func ftKeysOf(name string) ftNames {
	tagged := "{" + name + "}"
	if strings.Contains(name, "{") {
		tagged = name
	}
	return ftNames{
		lock:     name,
		queue:    "redisson_lock_queue:" + tagged,
		timeouts: "redisson_lock_timeout:" + tagged,
		channel:  "redisson_lock__channel:" + tagged,
		tagged:   tagged,
	}
}

// waiterChannel is the channel on which the fair lock wakes the waiter field.
func (k ftNames) waiterChannel(field string) string { return k.channel + ":" + field }

var ftReqs atomic.Int64

// ftAcquire runs the acquire script for field with one hold, as a process
// that is not a lualock client would (a fake owner id). It returns nil when
// field got the lock and otherwise the wait the script told it.
func ftAcquire(ctx context.Context, rdb redis.UniversalClient, k ftNames, field string, leaseMS, waitMS int64) (*int64, error) {
	wait, err := generated.FairAcquire(ctx, rdb,
		generated.FairAcquireKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel},
		generated.FairAcquireArgs{LeaseMS: leaseMS, Field: field, WaitMS: waitMS, Holds: 1, Publish: "publish"})
	if err != nil || wait == 0 {
		return nil, err
	}
	return &wait, nil
}

func ftLeave(ctx context.Context, rdb redis.UniversalClient, k ftNames, field string, waitMS int64) (bool, error) {
	return generated.FairLeave(ctx, rdb,
		generated.FairLeaveKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel},
		generated.FairLeaveArgs{Field: field, WaitMS: waitMS, Publish: "publish"})
}

func ftRelease(ctx context.Context, rdb redis.UniversalClient, k ftNames, field string, leaseMS int64) (*int64, error) {
	req := "ft:" + strconv.FormatInt(ftReqs.Add(1), 10)
	return generated.FairRelease(ctx, rdb,
		generated.FairReleaseKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel,
			Latch: "redisson_unlock_latch:" + k.tagged + ":" + req},
		generated.FairReleaseArgs{LeaseMS: leaseMS, Field: field, LatchMS: ftLatch.Milliseconds(), WaitMS: ftDriftWait, Publish: "publish"})
}

// ftWindDown ends a script-level scenario through the scripts themselves:
// holder releases its hold (when it has one) and every queued fake owner
// leaves; then nothing of the lock may be left in Redis but its latches,
// which expire on their own.
func ftWindDown(t *testing.T, rdb redis.UniversalClient, k ftNames, holder string, leaseMS, waitMS int64) {
	t.Helper()
	ctx := context.Background()
	if holder != "" {
		if r, err := ftReleaseWait(ctx, rdb, k, holder, leaseMS, waitMS); err != nil || r == nil || *r != 1 {
			t.Errorf("%s release = %v, %v; want 1", holder, ftPtr(r), err)
		}
	}
	for _, f := range ftMustSnapshot(t, rdb, k).queue {
		if _, err := ftLeave(ctx, rdb, k, f, waitMS); err != nil {
			t.Errorf("%s leaves: %v", f, err)
		}
	}
	if left := keysLeft(t, rdb, k.lock, false); len(left) > 0 {
		t.Errorf("keys left behind: %q", left)
	}
}

// ftWoken returns, in order, the owner fields whose waiter channel sub has
// received a message on so far. sub must also be subscribed to the
// barrier waiter channel (see scMessages: no sleeping).
func ftWoken(t *testing.T, rdb redis.UniversalClient, sub *redis.PubSub, k ftNames) []string {
	t.Helper()
	var got []string
	for _, m := range scMessages(t, rdb, sub, false, k.waiterChannel(ftBarrier)) {
		got = append(got, strings.TrimSuffix(strings.TrimPrefix(m, k.channel+":"), "=0"))
	}
	return got
}

// ftBarrier is the owner field whose waiter channel ftWoken's barrier uses.
const ftBarrier = "barrier"

// ftSnap is the queue and the deadlines of a fair lock read in one MULTI:
// scores has the whole-millisecond deadlines, tombs the tombstones (a
// waiter that gave up from the middle of the queue: its deadline is a
// passed time plus half a millisecond). now is Redis's clock (TIME) read
// just after.
type ftSnap struct {
	queue  []string
	scores map[string]int64
	tombs  map[string]float64
	now    int64
}

func ftSnapshot(ctx context.Context, rdb redis.UniversalClient, k ftNames) (ftSnap, error) {
	var lr *redis.StringSliceCmd
	var zr *redis.ZSliceCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		lr = p.LRange(ctx, k.queue, 0, -1)
		zr = p.ZRangeWithScores(ctx, k.timeouts, 0, -1)
		return nil
	})
	if err != nil {
		return ftSnap{}, err
	}
	s := ftSnap{queue: lr.Val(), scores: map[string]int64{}, tombs: map[string]float64{}}
	for _, z := range zr.Val() {
		if z.Score != float64(int64(z.Score)) {
			s.tombs[fmt.Sprint(z.Member)] = z.Score
			continue
		}
		s.scores[fmt.Sprint(z.Member)] = int64(z.Score)
	}
	tm, err := rdb.Time(ctx).Result()
	if err != nil {
		return ftSnap{}, err
	}
	s.now = tm.UnixMilli()
	return s, nil
}

func ftMustSnapshot(t *testing.T, rdb redis.UniversalClient, k ftNames) ftSnap {
	t.Helper()
	s, err := ftSnapshot(context.Background(), rdb, k)
	if err != nil {
		t.Fatalf("snapshot of %s: %v", k.lock, err)
	}
	return s
}

// ftWaitQueued waits until the queue holds n waiters and returns it.
func ftWaitQueued(t *testing.T, rdb redis.UniversalClient, k ftNames, n int) []string {
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

// ftClient returns a client on rdb that the test's cleanup closes. The
// unlock latch is ftLatch unless opts says otherwise.
func ftClient(t *testing.T, rdb redis.UniversalClient, opts lualock.Options) *lualock.Client {
	t.Helper()
	if opts.UnlockLatch == 0 {
		opts.UnlockLatch = ftLatch
	}
	c, err := lualock.New(rdb, opts)
	if err != nil {
		t.Fatalf("lualock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ftCheckClean checks that the clients wait for nothing and subscribe to
// nothing, and that name leaves no key behind: it polls for up to within
// (at least 1s) until the latches and leases expired.
func ftCheckClean(t *testing.T, rdb redis.UniversalClient, name string, within time.Duration, clients ...*lualock.Client) {
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
		left := keysLeft(t, rdb, name, true)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("keys left behind by %s: %q", name, left)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := keysLeft(t, rdb, name, false); len(left) > 0 {
		t.Errorf("keys left behind by %s: %q", name, left)
	}
	// And on the server: no channel of the lock keeps a subscriber (the
	// unsubscriptions are sent in the background).
	pattern := ftKeysOf(name).channel + "*"
	for {
		chs := lkChannels(t, rdb, pattern)
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

// ftErrs collects the errors of worker goroutines, which must not call
// t.Fatal or t.Error.
type ftErrs struct {
	mu   sync.Mutex
	errs []error
}

func (e *ftErrs) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Errorf(format, args...))
}

func (e *ftErrs) report(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range e.errs {
		t.Error(err)
	}
}

// ---------------------------------------------------------------------------
// Scenario 1: FIFO order, one client and one client per goroutine.

// TestFairLock_Lock_fifoOrder: waiters that arrive one after the other
// while the lock is held get it in their order of arrival. 2×NumCPU
// goroutines (at least 8) start 10ms apart, each once the one before is
// queued, each with its own handle on one shared client. Redisson's test
// holds for 1s; here each holder holds 50ms.
func TestFairLock_Lock_fifoOrder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ftOrdering(t, rdb, false)
	})
}

// TestFairLock_Lock_fifoOrderMultiInstance is fifoOrder with one Client
// per goroutine, as separate processes would have.
func TestFairLock_Lock_fifoOrderMultiInstance(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ftOrdering(t, rdb, true)
	})
}

func ftOrdering(t *testing.T, rdb redis.UniversalClient, clientEach bool) {
	n := max(2*runtime.NumCPU(), 8)
	const hold = 50 * time.Millisecond
	name := uniqueName(t)
	k := ftKeysOf(name)
	base := ftClient(t, rdb, lualock.Options{})
	clients := []*lualock.Client{base}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	first := base.NewFairLock(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatalf("first Lock: %v", err)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		order  []int
		inside atomic.Bool
		errs   ftErrs
	)
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		c := base
		if clientEach {
			c = ftClient(t, rdb, lualock.Options{})
			clients = append(clients, c)
		}
		l := c.NewFairLock(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Lock(ctx); err != nil {
				errs.add("waiter %d: Lock: %w", i, err)
				return
			}
			if !inside.CompareAndSwap(false, true) {
				errs.add("waiter %d: got the lock while another goroutine held it", i)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(hold)
			inside.Store(false)
			if err := l.Unlock(context.Background()); err != nil {
				errs.add("waiter %d: Unlock: %w", i, err)
			}
		}()
		ftWaitQueued(t, rdb, k, i+1) // waiter i has arrived
		time.Sleep(10 * time.Millisecond)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatalf("first Unlock: %v", err)
	}
	wg.Wait()
	errs.report(t)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(order, want) {
		t.Errorf("acquisition order %v, want the order of arrival %v", order, want)
	}
	ftCheckClean(t, rdb, name, time.Second, clients...)
}

// ---------------------------------------------------------------------------
// Scenario 2: waiters that never unlock get the lock in order as the
// leases run out (Redisson's testLeaseTimeout, with its 1s lease).

// TestFairLock_TryLockLease_leaseExpiryOrder: 8 waiters arrive 100ms apart,
// each TryLockLease(10s wait, 1s lease) without ever unlocking. Nobody
// announces a lease that runs out, so each new head must find out by its
// timer; all 8 must get the lock, in order, within their 10s wait.
func TestFairLock_TryLockLease_leaseExpiryOrder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		const (
			n     = 8
			lease = time.Second
			wait  = 10 * time.Second
		)
		name := uniqueName(t)
		c := ftClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			order []int
			at    []time.Duration
			errs  ftErrs
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		start := time.Now()
		for i := range n {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.TryLockLease(ctx, wait, lease); err != nil {
					errs.add("waiter %d: TryLockLease after %v: %w", i, time.Since(start).Round(time.Millisecond), err)
					return
				}
				mu.Lock()
				order = append(order, i)
				at = append(at, time.Since(start).Round(time.Millisecond))
				mu.Unlock()
			}()
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		errs.report(t)
		t.Logf("acquired %v at %v", order, at)
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
			t.Errorf("acquisition order %v, want %v", order, want)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i] - at[i-1]; gap < lease-50*time.Millisecond {
				t.Errorf("acquisition %d came %v after the one before, within its %v lease", i, gap, lease)
			}
		}
		ftCheckClean(t, rdb, name, 2*lease, c)
	})
}

// ---------------------------------------------------------------------------
// Scenario 3: many goroutines (Redisson's testMultipleLocks).

// TestFairLock_LockLease_manyWaiters: 500 goroutines, each with its own
// handle, LockLease(5s), hold 2ms (Redisson: 200ms) and unlock. All succeed
// and none overlaps: the counter is read, then written after the hold, so
// two holders at once would lose an increment (atomic loads and stores keep
// the race detector quiet: it cannot see the ordering that Redis gives).
//
// On miniredis 200 goroutines: every handoff rewrites every waiter's
// deadline, and miniredis runs that Lua (gopher-lua, under -race) so slowly
// that 500 waiters take 10-20s and its replies can pass go-redis's 3s read
// timeout.
// -short: 100 goroutines (miniredis: 50).
func TestFairLock_LockLease_manyWaiters(t *testing.T) {
	shortParallel(t)
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		const hold = 2 * time.Millisecond
		n := scale(500, 100)
		if b.name == "miniredis" {
			n = scale(200, 50)
		}
		name := uniqueName(t)
		c := ftClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var (
			wg       sync.WaitGroup
			counter  atomic.Int64
			inside   atomic.Bool
			overlaps atomic.Int64
			errs     ftErrs
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		start := time.Now()
		for i := range n {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.LockLease(ctx, 5*time.Second); err != nil {
					errs.add("goroutine %d: LockLease: %w", i, err)
					return
				}
				if !inside.CompareAndSwap(false, true) {
					overlaps.Add(1)
				}
				got := time.Now()
				v := counter.Load()
				time.Sleep(hold)
				counter.Store(v + 1)
				inside.Store(false)
				if err := l.Unlock(context.Background()); err != nil {
					errs.add("goroutine %d: Unlock %v after it got the lock (%v after the start): %w",
						i, time.Since(got).Round(time.Millisecond), got.Sub(start).Round(time.Millisecond), err)
				}
			}()
		}
		wg.Wait()
		t.Logf("%d goroutines done in %v", n, time.Since(start).Round(time.Millisecond))
		errs.report(t)
		if got := overlaps.Load(); got != 0 {
			t.Errorf("%d acquisitions while another goroutine held the lock", got)
		}
		if got := counter.Load(); got != int64(n) {
			t.Errorf("counter = %d, want %d", got, n)
		}
		ftCheckClean(t, rdb, name, time.Second, c)
	})
}

// ---------------------------------------------------------------------------
// Scenario 4: deadline drift, at the script level with fake owner ids.

const (
	ftDriftLease = 30_000 // ms
	ftDriftWait  = 5_000  // ms
)

// ftDrift runs the part of the drift scenario that needs no clock jump. A
// holder takes the lock; fake:1..fake:4 queue and are told to wait lease,
// lease+wait, lease+2·wait, lease+3·wait (±tol ms), their deadlines one
// wait apart; the holder releases and fake:1 takes the lock: the new head
// fake:2's deadline is cut to the new lease + one wait from now, and the
// others keep theirs (the handoff is O(1): no per-waiter ZINCRBY); fake:3
// gives up from the middle: it stays in the list as a tombstone (its
// deadline now - 0.5 ms, popped when it reaches the head) and the others
// keep their deadlines. It leaves fake:1 holding the lock and
// [fake:2 fake:3(tombstone) fake:4] queued.
func ftDrift(t *testing.T, rdb redis.UniversalClient, k ftNames, tol int64) {
	t.Helper()
	ctx := context.Background()
	if r, err := ftAcquire(ctx, rdb, k, "holder:0", ftDriftLease, ftDriftWait); err != nil || r != nil {
		t.Fatalf("holder acquire = %v, %v; want nil (acquired)", ftPtr(r), err)
	}
	for i := range 4 {
		field := "fake:" + strconv.Itoa(i+1)
		r, err := ftAcquire(ctx, rdb, k, field, ftDriftLease, ftDriftWait)
		if err != nil || r == nil {
			t.Fatalf("%s acquire = %v, %v; want a wait", field, ftPtr(r), err)
		}
		want := int64(ftDriftLease + i*ftDriftWait)
		if *r < want-tol || *r > want+tol {
			t.Errorf("%s: first wait %d ms, want %d ±%d", field, *r, want, tol)
		}
	}
	s := ftMustSnapshot(t, rdb, k)
	if want := []string{"fake:1", "fake:2", "fake:3", "fake:4"}; !slices.Equal(s.queue, want) {
		t.Fatalf("queue %q, want %q", s.queue, want)
	}
	for i := 2; i <= 4; i++ {
		a, b := s.scores["fake:"+strconv.Itoa(i-1)], s.scores["fake:"+strconv.Itoa(i)]
		if b-a != ftDriftWait {
			t.Errorf("deadline of fake:%d is %d ms after fake:%d's, want one wait (%d)", i, b-a, i-1, ftDriftWait)
		}
	}

	// Handoff: the holder releases, the head asks again and gets the lock.
	if r, err := ftRelease(ctx, rdb, k, "holder:0", ftDriftLease); err != nil || r == nil || *r != 1 {
		t.Fatalf("holder release = %v, %v; want 1", ftPtr(r), err)
	}
	before := ftMustSnapshot(t, rdb, k)
	if r, err := ftAcquire(ctx, rdb, k, "fake:1", ftDriftLease, ftDriftWait); err != nil || r != nil {
		t.Fatalf("fake:1 acquire after the release = %v, %v; want nil (acquired)", ftPtr(r), err)
	}
	after := ftMustSnapshot(t, rdb, k)
	if want := []string{"fake:2", "fake:3", "fake:4"}; !slices.Equal(after.queue, want) {
		t.Fatalf("queue after the handoff %q, want %q", after.queue, want)
	}
	if _, ok := after.scores["fake:1"]; ok {
		t.Errorf("fake:1 holds the lock but still has a deadline")
	}
	// The new head: at most the new lease + one wait from the handoff,
	// which lies between the two snapshots' clocks.
	if got, hi := after.scores["fake:2"], after.now+ftDriftLease+ftDriftWait+tol; got > hi || got < before.now+ftDriftLease+ftDriftWait-tol {
		t.Errorf("handoff: the new head's deadline is now%+d ms, want about lease + one wait (%d)", got-after.now, ftDriftLease+ftDriftWait)
	}
	for _, f := range []string{"fake:3", "fake:4"} {
		if d := s.scores[f] - after.scores[f]; d != 0 {
			t.Errorf("handoff: deadline of %s changed by %d ms, want 0 (O(1) handoff)", f, -d)
		}
	}

	// fake:3 gives up from the middle: a tombstone, the others unchanged.
	if ok, err := ftLeave(ctx, rdb, k, "fake:3", ftDriftWait); err != nil || !ok {
		t.Fatalf("fake:3 leave = %v, %v; want true", ok, err)
	}
	left := ftMustSnapshot(t, rdb, k)
	if want := []string{"fake:2", "fake:3", "fake:4"}; !slices.Equal(left.queue, want) {
		t.Fatalf("queue after fake:3 left %q, want %q (a tombstone in the middle)", left.queue, want)
	}
	if tomb, ok := left.tombs["fake:3"]; !ok || tomb > float64(left.now) {
		t.Errorf("fake:3 left: its deadline is %v (tombstone %v), want a tombstone at or before now (%d)", left.scores["fake:3"], ok, left.now)
	}
	for _, f := range []string{"fake:2", "fake:4"} {
		if d := after.scores[f] - left.scores[f]; d != 0 {
			t.Errorf("fake:3 left: deadline of %s changed by %d ms, want 0", f, -d)
		}
	}
}

func ftPtr(r *int64) string {
	if r == nil {
		return "nil"
	}
	return strconv.FormatInt(*r, 10)
}

// TestFairAcquire_deadlineDrift runs the drift scenario's steps that need
// no clock jump on every backend, with real time (±100 ms).
func TestFairAcquire_deadlineDrift(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := uniqueName(t)
		k := ftKeysOf(name)
		ftDrift(t, rdb, k, 100)
		ctx := context.Background()
		for _, f := range []string{"fake:2", "fake:4"} {
			if ok, err := ftLeave(ctx, rdb, k, f, ftDriftWait); err != nil || !ok {
				t.Errorf("%s leave = %v, %v; want true", f, ok, err)
			}
		}
		if r, err := ftRelease(ctx, rdb, k, "fake:1", ftDriftLease); err != nil || r == nil || *r != 1 {
			t.Errorf("fake:1 release = %v, %v; want 1", ftPtr(r), err)
		}
		ftCheckClean(t, rdb, name, time.Second)
	})
}

// ftClock is a miniredis whose clock (TIME, TTLs) only the test moves,
// from t0 (ms since the epoch); now is its current time.
type ftClock struct {
	mr      *miniredis.Miniredis
	rdb     *redis.Client
	t0, now int64
}

func ftDrivenClock(t *testing.T) *ftClock {
	t.Helper()
	c := &ftClock{mr: miniredis.RunT(t), t0: 1_700_000_000_000}
	c.now = c.t0
	c.mr.SetTime(time.UnixMilli(c.t0))
	c.rdb = redis.NewClient(&redis.Options{Addr: c.mr.Addr()})
	t.Cleanup(func() { _ = c.rdb.Close() })
	return c
}

// advance moves the clock by d and expires what d outlives.
func (c *ftClock) advance(d time.Duration) {
	c.now += d.Milliseconds()
	c.mr.SetTime(time.UnixMilli(c.now))
	c.mr.FastForward(d)
}

// TestFairAcquire_drivenClock runs the drift scenario on a miniredis whose
// clock the test drives (TIME and TTLs), so every value is exact, then
// jumps the clock: a queued waiter that asks again keeps or renews its
// deadline (one wait after the one ahead's, at least one wait past the
// lock's expiry, at most PTTL + (position + 1) × wait from now), and is
// never purged while it keeps asking (Redisson #3004); abandoned waiters are
// purged once their deadline has passed and the next waiter gets the lock.
func TestFairAcquire_drivenClock(t *testing.T) {
	t.Parallel()
	clk := ftDrivenClock(t)
	rdb, advance := clk.rdb, clk.advance
	ctx := context.Background()
	name := uniqueName(t)
	k := ftKeysOf(name)
	T0 := clk.t0

	ftDrift(t, rdb, k, 0)
	s := ftMustSnapshot(t, rdb, k)
	// fake:2 and fake:4 were queued at T0 with deadlines T0+40s and T0+50s;
	// the handoff cut fake:2, the new head, to the new lease + one wait
	// (T0+35s) and left fake:4's; fake:3 leaving changed neither.
	if got, want := s.scores, map[string]int64{"fake:2": T0 + 35_000, "fake:4": T0 + 50_000}; !mapsEqual(got, want) {
		t.Fatalf("deadlines %v, want %v", got, want)
	}

	// 10s later: fake:4, behind fake:2 and the tombstone, asks again. It is
	// told to wait for the head's deadline; its own becomes PTTL + 2 waits
	// from now (one live deadline, fake:2's, lies below its own; the
	// tombstone's is past and does not count).
	advance(10 * time.Second)
	if r, err := ftAcquire(ctx, rdb, k, "fake:4", ftDriftLease, ftDriftWait); err != nil || r == nil || *r != 25_000 {
		t.Errorf("fake:4 asks again at T0+10s = %v, %v; want 25000", ftPtr(r), err)
	}
	if got := ftMustSnapshot(t, rdb, k).scores["fake:4"]; got != T0+40_000 {
		t.Errorf("fake:4 deadline after asking again = T0%+d, want T0+40000", got-T0)
	}
	// The holder renews its lease (a re-acquire with the same hold count):
	// the lock now expires at T0+40s.
	if r, err := ftAcquire(ctx, rdb, k, "fake:1", ftDriftLease, ftDriftWait); err != nil || r != nil {
		t.Fatalf("fake:1 renew = %v, %v; want nil", ftPtr(r), err)
	}
	// A newcomer queues behind fake:4: its first wait is fake:4's deadline
	// from now, its deadline one wait later.
	if r, err := ftAcquire(ctx, rdb, k, "fake:5", ftDriftLease, ftDriftWait); err != nil || r == nil || *r != 30_000 {
		t.Errorf("fake:5 first wait at T0+10s = %v, %v; want 30000", ftPtr(r), err)
	}
	if got := ftMustSnapshot(t, rdb, k).scores["fake:5"]; got != T0+45_000 {
		t.Errorf("fake:5 deadline = T0%+d, want T0+45000", got-T0)
	}

	// T0+36s: fake:2 never asked again and its deadline (T0+35s) passed.
	// The lock (T0+40s) is still held. fake:4 asks: fake:2 is purged and
	// fake:4, the head now, is told to wait the lock's PTTL; its deadline
	// is PTTL + one wait from now. (The tombstone fake:3, the head after
	// fake:2, is popped by the same purge.)
	advance(26 * time.Second)
	if r, err := ftAcquire(ctx, rdb, k, "fake:4", ftDriftLease, ftDriftWait); err != nil || r == nil || *r != 4_000 {
		t.Errorf("fake:4 asks at T0+36s = %v, %v; want 4000 (the lock's PTTL)", ftPtr(r), err)
	}
	s = ftMustSnapshot(t, rdb, k)
	if want := []string{"fake:4", "fake:5"}; !slices.Equal(s.queue, want) {
		t.Fatalf("queue at T0+36s %q, want %q (fake:2 purged)", s.queue, want)
	}
	if got, want := s.scores, map[string]int64{"fake:4": T0 + 45_000, "fake:5": T0 + 45_000}; !mapsEqual(got, want) {
		t.Errorf("deadlines at T0+36s %v, want %v", got, want)
	}

	// The holder releases; the head takes the lock and fake:5, the new
	// head, keeps its deadline (below the new lease + one wait).
	if r, err := ftRelease(ctx, rdb, k, "fake:1", ftDriftLease); err != nil || r == nil || *r != 1 {
		t.Fatalf("fake:1 release = %v, %v; want 1", ftPtr(r), err)
	}
	if r, err := ftAcquire(ctx, rdb, k, "fake:4", ftDriftLease, ftDriftWait); err != nil || r != nil {
		t.Fatalf("fake:4 acquire after the release = %v, %v; want nil (acquired)", ftPtr(r), err)
	}
	if got := ftMustSnapshot(t, rdb, k).scores["fake:5"]; got != T0+45_000 {
		t.Errorf("fake:5 deadline after the handoff = T0%+d, want T0+45000", got-T0)
	}

	// fake:4 holds until T0+66s, longer than fake:5's deadline (T0+40s).
	// fake:5 keeps asking: its deadline is renewed each time and it is
	// never purged (the reference purges it: Redisson #3004).
	for _, at := range []time.Duration{3 * time.Second, 10 * time.Second, 10 * time.Second} {
		advance(at)
		r, err := ftAcquire(ctx, rdb, k, "fake:5", ftDriftLease, ftDriftWait)
		if err != nil || r == nil {
			t.Fatalf("fake:5 asks at T0%+dms = %v, %v; want a wait", clk.now-T0, ftPtr(r), err)
		}
		pttl := T0 + 66_000 - clk.now
		if *r != pttl {
			t.Errorf("fake:5 at T0%+dms told to wait %d, want the lock's PTTL %d", clk.now-T0, *r, pttl)
		}
		s = ftMustSnapshot(t, rdb, k)
		if !slices.Equal(s.queue, []string{"fake:5"}) {
			t.Fatalf("queue at T0%+dms %q, want [fake:5]", clk.now-T0, s.queue)
		}
		if got, want := s.scores["fake:5"], T0+66_000+ftDriftWait; got != want {
			t.Errorf("fake:5 deadline at T0%+dms = T0%+d, want T0%+d", clk.now-T0, got-T0, want-T0)
		}
	}

	// fake:5 is abandoned now, and fake:4's lease runs out (T0+66s). Once
	// fake:5's deadline (T0+71s) has passed, a newcomer purges it and takes
	// the free lock at once.
	advance(time.Duration(T0+71_001-clk.now) * time.Millisecond)
	if r, err := ftAcquire(ctx, rdb, k, "fake:6", ftDriftLease, ftDriftWait); err != nil || r != nil {
		t.Fatalf("fake:6 acquire at T0+71.001s = %v, %v; want nil (acquired)", ftPtr(r), err)
	}
	s = ftMustSnapshot(t, rdb, k)
	if len(s.queue) != 0 || len(s.scores) != 0 || len(s.tombs) != 0 {
		t.Errorf("queue %q, deadlines %v after fake:6 took the lock; want both empty", s.queue, s.scores)
	}
	if r, err := ftRelease(ctx, rdb, k, "fake:6", ftDriftLease); err != nil || r == nil || *r != 1 {
		t.Errorf("fake:6 release = %v, %v; want 1", ftPtr(r), err)
	}
	advance(time.Second) // the latches expire
	if left := keysLeft(t, rdb, name, true); len(left) > 0 {
		t.Errorf("keys left behind: %q", left)
	}
}

func mapsEqual(a, b map[string]int64) bool {
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

// ---------------------------------------------------------------------------
// Scenario 5: a dead waiter delays the queue by one wait budget at most.

// ftSampler reads the queue and the deadlines every few ms and records each
// deadline that lies beyond now + lease + budget × position (position
// 1-based in the queue).
type ftSampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	bad     []string
	samples int
}

func ftSample(rdb redis.UniversalClient, k ftNames, lease, budget time.Duration) *ftSampler {
	s := &ftSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		const slack = 20 // ms: miniredis's clock lags real time by a pump tick
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			snap, err := ftSnapshot(context.Background(), rdb, k)
			now := time.Now().UnixMilli() // after the read: no score written later counts
			s.mu.Lock()
			if err != nil {
				s.bad = append(s.bad, "snapshot: "+err.Error())
			} else {
				s.samples++
				for i, f := range snap.queue {
					limit := now + lease.Milliseconds() + budget.Milliseconds()*int64(i+1) + slack
					if sc, ok := snap.scores[f]; ok && sc > limit {
						s.bad = append(s.bad, fmt.Sprintf("%s at position %d: deadline now%+dms, limit now%+dms",
							f, i+1, sc-now, limit-now))
					}
				}
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *ftSampler) check(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == 0 {
		t.Errorf("the sampler read no sample")
	}
	for i, b := range s.bad {
		if i == 5 {
			t.Errorf("... %d more", len(s.bad)-5)
			break
		}
		t.Errorf("deadline too far: %s", b)
	}
}

// TestFairLock_Lock_deadWaiterBoundedDelay: a waiter whose process died
// while it waited (a fake owner that queued through the script and never
// asks again) delays the live waiter behind it by its wait budget (500ms)
// at most once the lock is free, whether the holder's lease runs out or the
// holder unlocks early. Meanwhile no deadline in the queue ever lies beyond
// now + lease + budget × position.
func TestFairLock_Lock_deadWaiterBoundedDelay(t *testing.T) {
	t.Parallel()
	const (
		budget = 500 * time.Millisecond
		slack  = 150 * time.Millisecond
	)
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		for _, early := range []bool{false, true} {
			sub := "leaseRunsOut"
			if early {
				sub = "unlockedEarly"
			}
			t.Run(sub, func(t *testing.T) {
				lease := 600 * time.Millisecond // the holder's fixed lease
				if early {
					lease = 2 * time.Second // the holder's watchdog lease
				}
				name := uniqueName(t)
				k := ftKeysOf(name)
				// Every client of one fair lock uses the same budget.
				holderC := ftClient(t, rdb, lualock.Options{WatchdogLease: lease, FairWait: budget})
				liveC := ftClient(t, rdb, lualock.Options{FairWait: budget})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				samp := ftSample(rdb, k, lease, budget)
				defer func() {
					if samp != nil {
						samp.check(t)
					}
				}()

				holder := holderC.NewFairLock(name)
				var err error
				if early {
					err = holder.Lock(ctx)
				} else {
					err = holder.LockLease(ctx, lease)
				}
				if err != nil {
					t.Fatalf("holder: %v", err)
				}
				leaseEnd := time.Now().Add(lease)
				if r, err := ftAcquire(ctx, rdb, k, "dead:1", lease.Milliseconds(), budget.Milliseconds()); err != nil || r == nil {
					t.Fatalf("dead waiter acquire = %v, %v; want a wait", ftPtr(r), err)
				}
				live := liveC.NewFairLock(name)
				got := make(chan time.Time, 1)
				var lockErr error
				var wg sync.WaitGroup
				wg.Add(1)
				t.Cleanup(func() { cancel(); wg.Wait() })
				go func() {
					defer wg.Done()
					if lockErr = live.Lock(ctx); lockErr == nil {
						got <- time.Now()
					}
					close(got)
				}()
				ftWaitQueued(t, rdb, k, 2)
				time.Sleep(100 * time.Millisecond)
				freed := leaseEnd
				if early {
					freed = time.Now()
					if err := holder.Unlock(ctx); err != nil {
						t.Fatalf("holder Unlock: %v", err)
					}
				}
				at, ok := <-got
				wg.Wait()
				if !ok {
					t.Fatalf("live waiter Lock: %v", lockErr)
				}
				delay := at.Sub(freed)
				t.Logf("live waiter got the lock %v after it was freed", delay.Round(time.Millisecond))
				if delay > budget+slack {
					t.Errorf("live waiter got the lock %v after the lock was freed, want at most the dead waiter's budget %v (+%v slack)",
						delay.Round(time.Millisecond), budget, slack)
				}
				if err := live.Unlock(ctx); err != nil {
					t.Errorf("live Unlock: %v", err)
				}
				samp.check(t)
				samp = nil
				ftCheckClean(t, rdb, name, time.Second, holderC, liveC)
			})
		}
	})
}

// TestFairLock_Lock_shortBudgetKeepsOrder: with a short wait budget
// (FairWait 500ms, which Options allows), live waiters keep their places:
// none is purged and queued again at the back while it waits, and they get
// the lock in their order of arrival (the runtime's promise: live waiters
// are never purged, Redisson #3004).
func TestFairLock_Lock_shortBudgetKeepsOrder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		const (
			n      = 3
			budget = 500 * time.Millisecond
			hold   = 2 * time.Second
		)
		name := uniqueName(t)
		k := ftKeysOf(name)
		hc := ftClient(t, rdb, lualock.Options{})
		c := ftClient(t, rdb, lualock.Options{FairWait: budget})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder := hc.NewFairLock(name)
		if err := holder.LockLease(ctx, time.Second); err != nil {
			t.Fatalf("holder LockLease: %v", err)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			order []int
			errs  ftErrs
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		var fields []string
		for i := range n {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Lock(ctx); err != nil {
					errs.add("waiter %d: Lock: %w", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(hold)
				if err := l.Unlock(context.Background()); err != nil {
					errs.add("waiter %d: Unlock: %w", i, err)
				}
			}()
			fields = ftWaitQueued(t, rdb, k, i+1)
		}
		// Sample the queue: it must always be the arrivals in their order,
		// some gone from the front.
		stop, sampled := make(chan struct{}), make(chan []string, 1)
		go func() {
			var bad []string
			defer func() { sampled <- bad }()
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				q, err := rdb.LRange(context.Background(), k.queue, 0, -1).Result()
				if err != nil {
					bad = append(bad, err.Error())
					continue
				}
				if len(q) > len(fields) || !slices.Equal(q, fields[len(fields)-len(q):]) {
					bad = append(bad, fmt.Sprintf("queue %q, arrivals %q", q, fields))
				}
			}
		}()
		time.Sleep(200 * time.Millisecond)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		wg.Wait()
		close(stop)
		if bad := <-sampled; len(bad) > 0 {
			t.Errorf("a live waiter lost its place in %d samples, first: %s", len(bad), bad[0])
		}
		errs.report(t)
		if want := []int{0, 1, 2}; !slices.Equal(order, want) {
			t.Errorf("acquisition order %v, want the order of arrival %v", order, want)
		}
		ftCheckClean(t, rdb, name, time.Second, hc, c)
	})
}

// ---------------------------------------------------------------------------
// Scenario 6: a cancelled waiter leaves the queue before Lock returns.

// TestFairLock_Lock_cancelLeavesQueue: when the context of a waiting Lock
// ends (cancelled, or its deadline passed), the waiter is out of the queue
// and the deadline set as soon as Lock returns, with no polling.
func TestFairLock_Lock_cancelLeavesQueue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := uniqueName(t)
		k := ftKeysOf(name)
		c := ftClient(t, rdb, lualock.Options{})
		ctx := context.Background()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		type result struct {
			err   error
			snap  ftSnap
			serr  error
			stats lualock.Stats
		}
		// The waiters that give up have a client of their own, so that its
		// Stats show their subscriptions only.
		wc := ftClient(t, rdb, lualock.Options{})
		// behind stays queued behind the waiters that give up.
		behind := c.NewFairLock(name)
		behindCtx, cancelBehind := context.WithCancel(ctx)
		defer cancelBehind()
		behindErr := make(chan error, 1)
		go func() { behindErr <- behind.Lock(behindCtx) }()
		ftWaitQueued(t, rdb, k, 1)

		for _, how := range []string{"cancel", "deadline"} {
			var wctx context.Context
			var cancel context.CancelFunc
			if how == "deadline" {
				wctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			} else {
				wctx, cancel = context.WithCancel(ctx)
			}
			w := wc.NewFairLock(name)
			res := make(chan result, 1)
			go func() {
				err := w.Lock(wctx)
				s, serr := ftSnapshot(context.Background(), rdb, k) // right after the return
				res <- result{err, s, serr, wc.Stats()}
			}()
			q := ftWaitQueued(t, rdb, k, 2)
			field := q[1]
			if how == "cancel" {
				time.Sleep(100 * time.Millisecond)
				cancel()
			}
			r := <-res
			cancel()
			want := context.Canceled
			if how == "deadline" {
				want = context.DeadlineExceeded
			}
			if !errors.Is(r.err, want) {
				t.Errorf("%s: Lock = %v, want %v", how, r.err, want)
			}
			if r.serr != nil {
				t.Fatalf("%s: snapshot: %v", how, r.serr)
			}
			if slices.Contains(r.snap.queue, field) {
				t.Errorf("%s: waiter %s still in the queue %q when Lock returned", how, field, r.snap.queue)
			}
			if _, ok := r.snap.scores[field]; ok {
				t.Errorf("%s: waiter %s still has a deadline when Lock returned", how, field)
			}
			if r.stats.Subscriptions != 0 || r.stats.Waiters != 0 {
				t.Errorf("%s: Stats() = %+v when Lock returned, want no waiter and no subscription", how, r.stats)
			}
			if len(r.snap.queue) != 1 || len(r.snap.scores) != 1 {
				t.Errorf("%s: queue %q, deadlines %v; want the other waiter only", how, r.snap.queue, r.snap.scores)
			}
		}
		cancelBehind()
		if err := <-behindErr; !errors.Is(err, context.Canceled) {
			t.Errorf("behind: Lock = %v, want context.Canceled", err)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Errorf("holder Unlock: %v", err)
		}
		ftCheckClean(t, rdb, name, time.Second, c, wc)
	})
}

// TestFairLock_Lock_closeLeavesQueue: Client.Close wakes a waiting fair
// Lock with ErrClosed, and once Close has returned the waiter is out of the
// queue and the deadline set (the give-up runs before Close returns).
func TestFairLock_Lock_closeLeavesQueue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		name := uniqueName(t)
		k := ftKeysOf(name)
		c := ftClient(t, rdb, lualock.Options{})
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		wc, err := lualock.New(rdb, lualock.Options{UnlockLatch: ftLatch})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		waitErr := make(chan error, 1)
		go func() { waitErr <- wc.NewFairLock(name).Lock(ctx) }()
		field := ftWaitQueued(t, rdb, k, 1)[0]
		if err := wc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		snap := ftMustSnapshot(t, rdb, k)
		if len(snap.queue) != 0 || len(snap.scores) != 0 {
			t.Errorf("after Close: queue %q, deadlines %v; want waiter %s gone from both", snap.queue, snap.scores, field)
		}
		select {
		case err := <-waitErr:
			if !errors.Is(err, lualock.ErrClosed) {
				t.Errorf("waiting Lock = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting Lock did not return after Close")
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		ftCheckClean(t, rdb, name, time.Second, c)
	})
}

// TestFairLock_Lock_errorLeavesQueue: a queued waiter whose next attempt
// fails with a Redis error that is not transient returns that error, and
// it is out of the queue and the deadline set when Lock returns; the
// waiter behind it moves up one place and later gets the lock.
func TestFairLock_Lock_errorLeavesQueue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		name := uniqueName(t)
		k := ftKeysOf(name)
		c := ftClient(t, rdb, lualock.Options{FairWait: 10 * time.Second})
		holder := c.NewFairLock(name)
		// A fixed lease: a watchdog renewal between the waiters' calls
		// would move the deadlines this test compares.
		if err := holder.LockLease(ctx, time.Minute); err != nil {
			t.Fatalf("holder LockLease: %v", err)
		}
		hook := &failScript{sha: generated.FairAcquireSHA1, err: scRedisErr("ERR injected: the server refused the call")}
		fc := ftClient(t, lkHooked(t, rdb, hook), lualock.Options{FairWait: 10 * time.Second})
		failing := fc.NewFairLock(name)
		failed := make(chan error, 1)
		go func() { failed <- failing.Lock(ctx) }()
		q := ftWaitQueued(t, rdb, k, 1)
		hook.field = q[0]
		behind := c.NewFairLock(name)
		behindErr := make(chan error, 1)
		go func() { behindErr <- behind.Lock(ctx) }()
		ftWaitQueued(t, rdb, k, 2)
		before := ftMustSnapshot(t, rdb, k)

		// Arm, then wake the failing waiter: its next attempt fails.
		hook.armed.Store(true)
		if err := rdb.Publish(ctx, k.waiterChannel(hook.field), "0").Err(); err != nil {
			t.Fatalf("PUBLISH: %v", err)
		}
		var err error
		select {
		case err = <-failed:
		case <-time.After(5 * time.Second):
			t.Fatal("the failing waiter's Lock did not return")
		}
		snap := ftMustSnapshot(t, rdb, k)
		if !strings.Contains(fmt.Sprint(err), "injected") || hook.hits.Load() == 0 {
			t.Errorf("Lock = %v after %d injected errors, want the injected error", err, hook.hits.Load())
		}
		if slices.Contains(snap.queue, hook.field) {
			t.Errorf("queue %q still holds the waiter whose Lock failed", snap.queue)
		}
		if _, ok := snap.scores[hook.field]; ok {
			t.Errorf("deadlines %v still hold the waiter whose Lock failed", snap.scores)
		}
		// The waiter behind became the head, so fair_leave woke it, and it
		// may have asked again before the snapshot: that renews its deadline
		// to now + PTTL + budget, the same instant up to the millisecond
		// rounding of TIME and PTTL (CI saw 1 ms either way).
		other := before.queue[1]
		if got, want := snap.scores[other], before.scores[other]-10_000; got < want-ftRoundingMs || got > want+ftRoundingMs {
			t.Errorf("the waiter behind: deadline %d after the other left, want %d ± %d ms (one budget sooner)", got, want, ftRoundingMs)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		if err := <-behindErr; err != nil {
			t.Fatalf("the waiter behind: %v", err)
		}
		if err := behind.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		ftCheckClean(t, rdb, name, time.Second, c, fc)
	})
}

// ---------------------------------------------------------------------------
// Scenario 7: no hot loop behind a dead waiter.

// ftCounter counts the acquire script calls of one client's owner fields.
type ftCounter struct {
	passHook
	prefix string
	n      atomic.Int64
}

func (h *ftCounter) count(cmd redis.Cmder) {
	a := cmd.Args()
	// EVALSHA sha 4 lock queue timeouts channel lease field ...
	if len(a) > 8 && strings.EqualFold(fmt.Sprint(a[0]), "evalsha") && fmt.Sprint(a[1]) == generated.FairAcquireSHA1 &&
		strings.HasPrefix(fmt.Sprint(a[8]), h.prefix) {
		h.n.Add(1)
	}
}

func (h *ftCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *ftCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// TestFairLock_Lock_noPollBehindStaleWaiter: a live waiter queued behind a
// stale waiter that is not the head (so nobody purges it yet) while the
// lock stays held waits for the lock's remaining lease between its calls,
// about one call per lease; it used to be told 1ms and poll four times a
// second.
func TestFairLock_Lock_noPollBehindStaleWaiter(t *testing.T) {
	t.Parallel()
	const (
		window  = 3 * time.Second
		maxRate = 2 // calls per second; the lease is 1s
	)
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := uniqueName(t)
		k := ftKeysOf(name)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		others := ftClient(t, rdb, lualock.Options{WatchdogLease: time.Second})
		liveC := ftClient(t, rdb, lualock.Options{})
		hook := &ftCounter{prefix: liveC.ID() + ":"}
		rdb.AddHook(hook)

		holder, head := others.NewFairLock(name), others.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		headDone := make(chan error, 1)
		go func() { headDone <- head.Lock(ctx) }()
		ftWaitQueued(t, rdb, k, 1)
		if r, err := ftAcquire(ctx, rdb, k, "stale:1", time.Second.Milliseconds(), lualock.Options{}.FairWait.Milliseconds()+300_000); err != nil || r == nil {
			t.Fatalf("stale waiter queues = %v, %v", ftPtr(r), err)
		}
		live := liveC.NewFairLock(name)
		done := make(chan error, 1)
		go func() { done <- live.Lock(ctx) }()
		ftWaitQueued(t, rdb, k, 3)
		// The stale one goes stale once the live one is queued behind it (a
		// stale waiter at the back is trimmed off when a newcomer joins).
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: float64(time.Now().UnixMilli() - 1_000), Member: "stale:1"}).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the first attempts
		before := hook.n.Load()
		time.Sleep(window)
		calls := hook.n.Load() - before
		t.Logf("live waiter behind a stale one: %d acquire calls in %v", calls, window)
		if rate := float64(calls) / window.Seconds(); rate > maxRate {
			t.Errorf("live waiter called the acquire script %d times in %v (%.1f/s), want at most %d/s", calls, window, rate, maxRate)
		}
		// Hand on: head, then (the stale one purged) live.
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		if err := <-headDone; err != nil {
			t.Fatalf("head Lock: %v", err)
		}
		if err := head.Unlock(ctx); err != nil {
			t.Fatalf("head Unlock: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("live Lock: %v", err)
		}
		if err := live.Unlock(ctx); err != nil {
			t.Errorf("live Unlock: %v", err)
		}
		ftCheckClean(t, rdb, name, time.Second, others, liveC)
	})
}

// TestFairLock_Lock_noSpinBehindDeadWaiter: a live waiter queued behind a
// dead one, with the lock free, calls the acquire script a handful of times
// per second at most while it waits for the dead one's deadline; and so
// does a head that is told "wait 0" (the lock held by a foreign owner
// without an expiry).
func TestFairLock_Lock_noSpinBehindDeadWaiter(t *testing.T) {
	t.Parallel()
	const (
		window  = 2 * time.Second
		maxRate = 5 // calls per second
	)
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		for _, noExpiry := range []bool{false, true} {
			sub := "deadHead"
			if noExpiry {
				sub = "lockWithoutExpiry"
			}
			t.Run(sub, func(t *testing.T) {
				name := uniqueName(t)
				k := ftKeysOf(name)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				other := ftClient(t, rdb, lualock.Options{WatchdogLease: time.Second})
				liveC := ftClient(t, rdb, lualock.Options{})
				hook := &ftCounter{prefix: liveC.ID() + ":"}
				rdb.AddHook(hook)

				holder := other.NewFairLock(name)
				if noExpiry {
					// A foreign owner holds the lock with no expiry: the head is told to wait 0.
					if err := rdb.HSet(ctx, name, "foreign:1", 1).Err(); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := holder.Lock(ctx); err != nil {
						t.Fatalf("holder Lock: %v", err)
					}
					// The dead waiter's deadline: about 1s (the holder's lease) + 2.5s from now.
					if r, err := ftAcquire(ctx, rdb, k, "dead:1", time.Second.Milliseconds(), 2500); err != nil || r == nil {
						t.Fatalf("dead waiter acquire = %v, %v; want a wait", ftPtr(r), err)
					}
				}
				live := liveC.NewFairLock(name)
				done := make(chan error, 1)
				go func() { done <- live.Lock(ctx) }()
				want := 2
				if noExpiry {
					want = 1
				}
				ftWaitQueued(t, rdb, k, want)
				if !noExpiry {
					if err := holder.Unlock(ctx); err != nil {
						t.Fatalf("holder Unlock: %v", err)
					}
				}
				time.Sleep(50 * time.Millisecond) // let the calls of the first attempts pass
				before := hook.n.Load()
				time.Sleep(window)
				calls := hook.n.Load() - before
				rate := float64(calls) / window.Seconds()
				t.Logf("live waiter: %d acquire calls in %v", calls, window)
				if rate > maxRate {
					t.Errorf("live waiter called the acquire script %d times in %v (%.1f/s), want at most %d/s", calls, window, rate, maxRate)
				}
				select {
				case err := <-done:
					t.Fatalf("live waiter returned early: %v", err)
				default:
				}
				if noExpiry {
					// Force unlock wakes the head.
					if _, err := holder.ForceUnlock(ctx); err != nil {
						t.Fatalf("ForceUnlock: %v", err)
					}
				}
				if err := <-done; err != nil {
					t.Fatalf("live waiter Lock: %v", err)
				}
				if err := live.Unlock(ctx); err != nil {
					t.Errorf("live Unlock: %v", err)
				}
				ftCheckClean(t, rdb, name, time.Second, other, liveC)
			})
		}
	})
}

// ---------------------------------------------------------------------------
// Scenario 8: only the head is woken.

// TestFairLock_Unlock_wakesOnlyHead: with three waiters queued, each
// release publishes on the channel of the queue's head only.
func TestFairLock_Unlock_wakesOnlyHead(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		const n = 3
		name := uniqueName(t)
		k := ftKeysOf(name)
		c := ftClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		var (
			wg       sync.WaitGroup
			errs     ftErrs
			acquired = make(chan int, n)
			release  [n]chan struct{}
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		for i := range n {
			release[i] = make(chan struct{})
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Lock(ctx); err != nil {
					errs.add("waiter %d: Lock: %w", i, err)
					return
				}
				acquired <- i
				select {
				case <-release[i]:
				case <-ctx.Done():
				}
				if err := l.Unlock(context.Background()); err != nil {
					errs.add("waiter %d: Unlock: %w", i, err)
				}
			}()
			ftWaitQueued(t, rdb, k, i+1)
		}
		fields := ftWaitQueued(t, rdb, k, n)
		chans := make([]string, n)
		for i, f := range fields {
			chans[i] = k.waiterChannel(f)
		}
		subscribe := rdb.Subscribe
		if b.cluster {
			// The default on a cluster is sharded pub/sub (as Redisson
			// 3.22+); the channels of one lock share its slot.
			subscribe = rdb.SSubscribe
		}
		ps := subscribe(ctx, chans...)
		defer ps.Close()
		for range n {
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatalf("subscribe: %v", err)
			}
		}
		var mu sync.Mutex
		counts := map[string]int{}
		msgs := ps.Channel()
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			for m := range msgs {
				mu.Lock()
				counts[m.Channel]++
				mu.Unlock()
			}
		}()
		snapshot := func() []int {
			mu.Lock()
			defer mu.Unlock()
			out := make([]int, n)
			for i, ch := range chans {
				out[i] = counts[ch]
			}
			return out
		}

		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		for i := range n {
			select {
			case got := <-acquired:
				if got != i {
					t.Errorf("waiter %d got the lock, want waiter %d", got, i)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("waiter %d did not get the lock within 5s", i)
			}
			time.Sleep(100 * time.Millisecond) // messages to others would have arrived by now
			// Messages only ever go to the head of the queue: the release
			// to the head, and, when the head takes the lock, "you are
			// next" to the new head. So waiter 0 has had the release, each
			// later waiter that got the lock has had both, the next in line
			// has been told it is next, and the rest nothing.
			want := make([]int, n)
			for j := 0; j <= i; j++ {
				want[j] = min(j, 1) + 1
			}
			if i+1 < n {
				want[i+1] = 1
			}
			if got := snapshot(); !slices.Equal(got, want) {
				t.Errorf("after %d releases, messages per waiter channel %v, want %v (only ever the head's)", i+1, got, want)
			}
			close(release[i])
		}
		wg.Wait()
		errs.report(t)
		_ = ps.Close()
		<-readDone
		ftCheckClean(t, rdb, name, time.Second, c)
	})
}

// ---------------------------------------------------------------------------
// Scenario 9: interop with a Redisson-style fair client.

// ftForeignAcquire is the acquire algorithm of PROTOCOL.md and the seeds
// (steps 1-5), as Redisson runs it: the caller's clock comes in ARGV[4].
// It stands for Java Redisson, which is why it is Lua in Go.
const ftForeignAcquire = `
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout ~= nil and timeout > tonumber(ARGV[4]) then break end
  redis.call('zrem', KEYS[3], first)
  redis.call('lpop', KEYS[2])
end
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
    or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local keys = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #keys, 1 do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local timeout = redis.call('zscore', KEYS[3], ARGV[2])
if timeout ~= false then
  return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4])
end
local lastThreadId = redis.call('lindex', KEYS[2], -1)
local ttl
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
`

// ftForeignRelease is Redisson's fair unlock (ARGV lease, field, now): on
// full release it publishes 0 on the queue head's own channel.
const ftForeignRelease = `
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout ~= nil and timeout > tonumber(ARGV[3]) then break end
  redis.call('zrem', KEYS[3], first)
  redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 then
  local nextThreadId = redis.call('lindex', KEYS[2], 0)
  if nextThreadId ~= false then
    redis.call('publish', KEYS[4] .. ':' .. nextThreadId, 0)
  end
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
local nextThreadId = redis.call('lindex', KEYS[2], 0)
if nextThreadId ~= false then
  redis.call('publish', KEYS[4] .. ':' .. nextThreadId, 0)
end
return 1
`

// TestFairLock_Lock_redissonInterop: a Go waiter, a Redisson-style waiter
// and another Go waiter queue on one lock in that order and get it in that
// order. The Go side wakes the foreign waiter on its own channel within
// 50ms of Unlock, and the foreign unlock wakes the Go waiter behind it.
func TestFairLock_Lock_redissonInterop(t *testing.T) {
	shortParallel(t)
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		const (
			leaseMS = 30_000
			waitMS  = 300_000 // Redisson's default wait budget, and lualock's
		)
		name := uniqueName(t)
		k := ftKeysOf(name)
		keys := []string{k.lock, k.queue, k.timeouts, k.channel}
		// The foreign scripts are Redisson 3.16.8's, which publish with
		// PUBLISH everywhere: on a cluster a Go client sharing the lock
		// with them sets PubSubPlain (the default there is sharded).
		c := ftClient(t, rdb, lualock.Options{PubSub: lualock.PubSubPlain})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			order    []string
			errs     ftErrs
			acquired = make(chan string, 3)
		)
		t.Cleanup(func() { cancel(); wg.Wait() })
		record := func(who string) {
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			acquired <- who
		}
		goWaiter := func(who string) *lualock.Lock {
			l := c.NewFairLock(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Lock(ctx); err != nil {
					errs.add("%s: Lock: %w", who, err)
					return
				}
				record(who)
			}()
			return l
		}

		goA := goWaiter("go-A")
		ftWaitQueued(t, rdb, k, 1)

		// The foreign waiter: subscribe to its own channel, then try, wait
		// for a message or its ttl, try again, as Redisson's tryLock does.
		const foreign = "00000000-0000-4000-8000-000000000000:7"
		woken := make(chan time.Time, 1)
		// armed is set just before go-A's Unlock: the wake-up measured is the
		// release's message, not the "you are next" sent when go-A took the
		// lock.
		var armed atomic.Bool
		ps := rdb.Subscribe(ctx, k.waiterChannel(foreign))
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("foreign subscribe: %v", err)
		}
		msgs := ps.Channel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for {
				now := time.Now().UnixMilli()
				ttl, err := rdb.Eval(ctx, ftForeignAcquire, keys, leaseMS, foreign, waitMS, now).Int64()
				if errors.Is(err, redis.Nil) {
					break
				}
				if err != nil {
					errs.add("foreign acquire: %w", err)
					return
				}
				select {
				case <-msgs:
					if first && armed.Load() {
						first = false
						woken <- time.Now()
					}
				case <-time.After(time.Duration(max(ttl, 1)) * time.Millisecond):
				case <-ctx.Done():
					errs.add("foreign waiter: %w", ctx.Err())
					return
				}
			}
			record("foreign")
			time.Sleep(20 * time.Millisecond)
			now := time.Now().UnixMilli()
			r, err := rdb.Eval(ctx, ftForeignRelease, keys, leaseMS, foreign, now).Int64()
			if err != nil || r != 1 {
				errs.add("foreign release = %d, %v; want 1", r, err)
			}
		}()
		ftWaitQueued(t, rdb, k, 2)
		goB := goWaiter("go-B")
		q := ftWaitQueued(t, rdb, k, 3)
		if q[1] != foreign {
			t.Fatalf("queue %q: the foreign waiter is not second", q)
		}

		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("holder Unlock: %v", err)
		}
		if who := <-acquired; who != "go-A" {
			t.Fatalf("%s got the lock first, want go-A", who)
		}
		time.Sleep(20 * time.Millisecond)
		armed.Store(true)
		unlocked := time.Now()
		if err := goA.Unlock(ctx); err != nil {
			t.Fatalf("go-A Unlock: %v", err)
		}
		select {
		case at := <-woken:
			if lat := at.Sub(unlocked); lat > 50*time.Millisecond {
				t.Errorf("foreign waiter woken %v after go-A's Unlock, want < 50ms", lat)
			} else {
				t.Logf("foreign waiter woken %v after go-A's Unlock", lat)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("foreign waiter not woken within 5s of go-A's Unlock")
		}
		for range 2 {
			select {
			case <-acquired:
			case <-time.After(5 * time.Second):
				t.Fatalf("the lock was not handed on within 5s; order so far %v", order)
			}
		}
		if err := goB.Unlock(ctx); err != nil {
			t.Errorf("go-B Unlock: %v", err)
		}
		wg.Wait()
		errs.report(t)
		if want := []string{"go-A", "foreign", "go-B"}; !slices.Equal(order, want) {
			t.Errorf("acquisition order %v, want %v", order, want)
		}
		_ = ps.Close()
		ftCheckClean(t, rdb, name, time.Second, c)
	})
}

// ---------------------------------------------------------------------------
// Scenario 11: re-entry, hold count, force unlock, TryLock timeout.

// TestFairLock_Lock_reentry: the holder may lock again without queueing;
// the hold count follows, and the lock is free after as many unlocks.
func TestFairLock_Lock_reentry(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := uniqueName(t)
		k := ftKeysOf(name)
		c := ftClient(t, rdb, lualock.Options{})
		ctx := context.Background()
		l := c.NewFairLock(name)
		other := c.NewFairLock(name)
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := l.TryLockLease(ctx, 0, 10*time.Second); err != nil {
			t.Fatalf("re-entry TryLockLease: %v", err)
		}
		if err := l.LockLease(ctx, 20*time.Second); err != nil {
			t.Fatalf("re-entry LockLease: %v", err)
		}
		if n, err := l.HoldCount(ctx); err != nil || n != 3 {
			t.Errorf("HoldCount = %d, %v; want 3", n, err)
		}
		if lease, err := l.RemainingLease(ctx); err != nil || lease <= 10*time.Second || lease > 20*time.Second {
			t.Errorf("RemainingLease = %v, %v; want the last re-entry's 20s lease", lease, err)
		}
		if s := ftMustSnapshot(t, rdb, k); len(s.queue) != 0 || len(s.scores) != 0 {
			t.Errorf("re-entry queued: queue %q, deadlines %v", s.queue, s.scores)
		}
		if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Errorf("other TryLock(0) = %v, want ErrNotObtained", err)
		}
		for want := 2; want >= 0; want-- {
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if n, err := other.HoldCount(ctx); err != nil || n != 0 {
				t.Errorf("other HoldCount = %d, %v; want 0", n, err)
			}
			held, err := l.IsHeld(ctx)
			if err != nil || held != (want > 0) {
				t.Errorf("after an Unlock: IsHeld = %v, %v; want %v", held, err, want > 0)
			}
			if n, err := l.HoldCount(ctx); err != nil || n != want {
				t.Errorf("HoldCount = %d, %v; want %d", n, err, want)
			}
		}
		if locked, err := l.IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked = %v, %v after the last Unlock; want false", locked, err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
			t.Errorf("extra Unlock = %v, want ErrNotHeld", err)
		}
		select {
		case <-l.Done():
		default:
			t.Errorf("Done not closed after the last Unlock")
		}
		if err := context.Cause(l.Context()); !errors.Is(err, lualock.ErrNotHeld) {
			t.Errorf("Context cause = %v, want ErrNotHeld", err)
		}
		ftCheckClean(t, rdb, name, time.Second, c)
	})
}

// TestFairLock_ForceUnlock_wakesHead: force unlock deletes the lock and
// wakes the queue's head at once, long before its fallback timer; the old
// holder's hold is gone.
func TestFairLock_ForceUnlock_wakesHead(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		name := uniqueName(t)
		k := ftKeysOf(name)
		c := ftClient(t, rdb, lualock.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		w := c.NewFairLock(name)
		got := make(chan time.Time, 1)
		var lockErr error
		go func() {
			if lockErr = w.Lock(ctx); lockErr == nil {
				got <- time.Now()
			}
			close(got)
		}()
		ftWaitQueued(t, rdb, k, 1)
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		deleted, err := c.NewFairLock(name).ForceUnlock(ctx)
		if err != nil || !deleted {
			t.Fatalf("ForceUnlock = %v, %v; want true", deleted, err)
		}
		at, ok := <-got
		if !ok {
			t.Fatalf("waiter Lock: %v", lockErr)
		}
		if lat := at.Sub(start); lat > 500*time.Millisecond {
			t.Errorf("head got the lock %v after ForceUnlock, want it woken at once", lat)
		}
		if held, err := holder.IsHeld(ctx); err != nil || held {
			t.Errorf("old holder IsHeld = %v, %v; want false", held, err)
		}
		if err := holder.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) && !errors.Is(err, lualock.ErrLockLost) {
			t.Errorf("old holder Unlock = %v, want ErrNotHeld or ErrLockLost", err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Errorf("waiter Unlock: %v", err)
		}
		if deleted, err := w.ForceUnlock(ctx); err != nil || deleted {
			t.Errorf("ForceUnlock of a free lock = %v, %v; want false", deleted, err)
		}
		ftCheckClean(t, rdb, name, time.Second, c)
	})
}

// TestFairLock_TryLock_timeoutLeavesQueue: a TryLock whose wait runs out
// returns ErrNotObtained, no sooner than its wait, and leaves the queue;
// the waiter behind it moves up one budget.
func TestFairLock_TryLock_timeoutLeavesQueue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		const wait = 300 * time.Millisecond
		name := uniqueName(t)
		k := ftKeysOf(name)
		c := ftClient(t, rdb, lualock.Options{FairWait: 10 * time.Second})
		ctx := context.Background()
		holder := c.NewFairLock(name)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("holder Lock: %v", err)
		}
		w := c.NewFairLock(name)
		type result struct {
			err     error
			elapsed time.Duration
			snap    ftSnap
		}
		res := make(chan result, 1)
		start := time.Now()
		go func() {
			err := w.TryLock(ctx, wait)
			el := time.Since(start)
			s, _ := ftSnapshot(ctx, rdb, k)
			res <- result{err, el, s}
		}()
		q := ftWaitQueued(t, rdb, k, 1)
		field := q[0]
		// A fake waiter queues behind it.
		if r, err := ftAcquire(ctx, rdb, k, "fake:behind", 30_000, 10_000); err != nil || r == nil {
			t.Fatalf("fake acquire = %v, %v; want a wait", ftPtr(r), err)
		}
		before := ftMustSnapshot(t, rdb, k).scores["fake:behind"]
		r := <-res
		if !errors.Is(r.err, lualock.ErrNotObtained) {
			t.Errorf("TryLock = %v, want ErrNotObtained", r.err)
		}
		if r.elapsed < wait {
			t.Errorf("TryLock gave up after %v, before its %v wait", r.elapsed, wait)
		}
		if slices.Contains(r.snap.queue, field) {
			t.Errorf("waiter still queued after TryLock returned: %q", r.snap.queue)
		}
		if _, ok := r.snap.scores[field]; ok {
			t.Errorf("waiter still has a deadline after TryLock returned")
		}
		// The waiter behind is the head now: its deadline is cut to one
		// budget past the lock's expiry (the watchdog lease, 30s, at most).
		if got := r.snap.scores["fake:behind"]; got > before || got < r.snap.now+10_000 || got > r.snap.now+30_000+10_000 {
			t.Errorf("the waiter behind, the head now, has its deadline at now%+d ms (it was now%+d), want at most the lock's PTTL + one budget (10000)",
				got-r.snap.now, before-r.snap.now)
		}
		if ok, err := ftLeave(ctx, rdb, k, "fake:behind", 10_000); err != nil || !ok {
			t.Errorf("fake leave = %v, %v; want true", ok, err)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Errorf("holder Unlock: %v", err)
		}
		ftCheckClean(t, rdb, name, time.Second, c)
	})
}

// TestFairAcquire_staleWaiterKeepsOrder: a newcomer that queues behind a
// stale waiter (its deadline passed, not purged yet because it is not the
// head) gets the deadline of its place in a live chain, not a single budget
// from now; so the next handoff does not get it purged, and the waiter that
// queued after it does not overtake it.
func TestFairAcquire_staleWaiterKeepsOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := ftKeysOf(uniqueName(t))
		const lease, wait = 30_000, 2_000
		if r, err := ftAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
			t.Fatalf("holder = %v, %v", ftPtr(r), err)
		}
		for _, f := range []string{"head", "dead"} {
			if r, err := ftAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s queues = %v, %v", f, ftPtr(r), err)
			}
		}
		// "dead" stopped asking long ago: its deadline has passed.
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: float64(time.Now().UnixMilli() - 1_000), Member: "dead"}).Err(); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"j", "k"} {
			if r, err := ftAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s queues = %v, %v", f, ftPtr(r), err)
			}
		}
		// "dead", stale at the back when j came, was trimmed off: j chains on
		// the head's deadline, two waits past the lock's expiry.
		now := time.Now().UnixMilli()
		js := ftMustSnapshot(t, rdb, k)
		if want := []string{"head", "j", "k"}; !slices.Equal(js.queue, want) {
			t.Errorf("queue %q, want %q (the stale last waiter trimmed off)", js.queue, want)
		}
		if got := js.scores["j"]; got < now+lease+2*wait-500 {
			t.Errorf("j's deadline is %+d ms from now, want at least about lease + 2 waits (%d)", got-now, lease+2*wait)
		}
		// The holder releases and the head takes the lock. j must still be
		// queued, ahead of k.
		if r, err := ftRelease(ctx, rdb, k, "holder", lease); err != nil || r == nil || *r != 1 {
			t.Fatalf("holder release = %v, %v", ftPtr(r), err)
		}
		if r, err := ftAcquire(ctx, rdb, k, "head", lease, wait); err != nil || r != nil {
			t.Fatalf("head acquires = %v, %v", ftPtr(r), err)
		}
		if r, err := ftAcquire(ctx, rdb, k, "k", lease, wait); err != nil || r == nil {
			t.Fatalf("k asks again = %v, %v", ftPtr(r), err)
		}
		s := ftMustSnapshot(t, rdb, k)
		// "dead", the head now and stale, is purged; j is not.
		if want := []string{"j", "k"}; !slices.Equal(s.queue, want) {
			t.Errorf("queue %q, want %q (j keeps its place)", s.queue, want)
		}
		ftWindDown(t, rdb, k, "head", lease, wait)
	})
}

// TestFairAcquire_renewedDeadlineAfterPurge: a waiter that asks again
// behind a waiter that then dies keeps a deadline within PTTL + budget ×
// (position + 1) from now once the dead one is purged at its deadline, and
// so does a newcomer that chains on it: its renewal counts one budget for
// the live deadline below its own, and the purge that makes it the head
// cuts it to one budget past the lock's expiry.
func TestFairAcquire_renewedDeadlineAfterPurge(t *testing.T) {
	t.Parallel()
	clk := ftDrivenClock(t)
	rdb, advance := clk.rdb, clk.advance
	ctx := context.Background()
	k := ftKeysOf(uniqueName(t))
	const lease, wait = 30_000, 2_000
	T0 := clk.t0
	acquire := func(field string, queued bool) {
		t.Helper()
		r, err := ftAcquire(ctx, rdb, k, field, lease, wait)
		if err != nil || (r != nil) != queued {
			t.Fatalf("%s at T0%+d = %v, %v; want queued %v", field, clk.now-T0, ftPtr(r), err, queued)
		}
	}
	acquire("holder", false)
	acquire("dead", true) // deadline T0+32s, never asks again
	acquire("live", true) // T0+34s
	advance(20 * time.Second)
	acquire("holder", false) // the holder's lease is renewed: expiry T0+50s
	acquire("live", true)    // renews behind "dead"
	// One live deadline lies below its own ("dead"'s): one budget for it
	// (a Redisson handoff would take it off) and one more past the lock's
	// expiry.
	if got := ftMustSnapshot(t, rdb, k).scores["live"]; got != T0+54_000 {
		t.Errorf("live's renewed deadline = T0%+d, want T0+54000 (two budgets past the lock's expiry)", got-T0)
	}
	advance(13 * time.Second) // T0+33s: "dead" is past its deadline
	acquire("new", true)
	s := ftMustSnapshot(t, rdb, k)
	if want := []string{"live", "new"}; !slices.Equal(s.queue, want) {
		t.Fatalf("queue %q, want %q (dead purged)", s.queue, want)
	}
	pttl := T0 + 50_000 - clk.now
	for i, f := range s.queue {
		if limit := clk.now + pttl + int64(i+1)*wait; s.scores[f] > limit {
			t.Errorf("%s at position %d: deadline T0%+d, over PTTL + %d budgets from now (T0%+d)", f, i, s.scores[f]-T0, i+1, limit-T0)
		}
	}
	// "live" keeps asking while the lock is held past its first deadline:
	// it is never purged.
	for range 3 {
		advance(time.Second)
		acquire("live", true)
	}
	if got := ftMustSnapshot(t, rdb, k).queue; !slices.Equal(got, []string{"live", "new"}) {
		t.Errorf("queue %q, want live then new", got)
	}
	ftWindDown(t, rdb, k, "holder", lease, wait)
}

// TestFairLeave_wakesFirstLiveWaiter: when the head of the queue leaves and
// the waiter after it is stale (its deadline passed), the leave purges it
// and wakes the first live waiter, whose deadline is cut to one budget from
// now since the lock is free; the stale one hears nothing.
func TestFairLeave_wakesFirstLiveWaiter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := ftKeysOf(uniqueName(t))
		const lease, wait = 30_000, 2_000
		if r, err := ftAcquire(ctx, rdb, k, "holder", lease, wait); err != nil || r != nil {
			t.Fatalf("holder = %v, %v", ftPtr(r), err)
		}
		for _, f := range []string{"leaver", "stale", "live"} {
			if r, err := ftAcquire(ctx, rdb, k, f, lease, wait); err != nil || r == nil {
				t.Fatalf("%s queues = %v, %v", f, ftPtr(r), err)
			}
		}
		if r, err := ftReleaseWait(ctx, rdb, k, "holder", lease, wait); err != nil || r == nil || *r != 1 {
			t.Fatalf("holder release = %v, %v", ftPtr(r), err)
		}
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: float64(time.Now().UnixMilli() - 1_000), Member: "stale"}).Err(); err != nil {
			t.Fatal(err)
		}
		sub := scSubscribe(t, rdb, false, k.waiterChannel("stale"), k.waiterChannel("live"), k.waiterChannel(ftBarrier))
		if ok, err := ftLeave(ctx, rdb, k, "leaver", wait); err != nil || !ok {
			t.Fatalf("leaver leaves = %v, %v", ok, err)
		}
		got := ftWoken(t, rdb, sub, k)
		if want := []string{"live"}; !slices.Equal(got, want) {
			t.Errorf("messages after the head left: %q, want %q (the first live waiter)", got, want)
		}
		s := ftMustSnapshot(t, rdb, k)
		if want := []string{"live"}; !slices.Equal(s.queue, want) {
			t.Errorf("queue %q, want %q (the stale waiter purged)", s.queue, want)
		}
		if d := s.scores["live"] - time.Now().UnixMilli(); d > wait {
			t.Errorf("live's deadline is %dms from now, want at most one budget (%dms): the lock is free", d, wait)
		}
		ftWindDown(t, rdb, k, "", lease, wait)
	})
}

// TestFairAcquire_noSelfWake: a waiter whose call purges the dead waiters
// ahead of it learns from the reply that it is the head; the script does not
// also publish to its own channel (which would only cost it another call).
// A waiter made head by someone else's call is woken on its channel.
func TestFairAcquire_noSelfWake(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, rdb redis.UniversalClient) {
		t.Parallel()
		ctx := context.Background()
		k := ftKeysOf(uniqueName(t))
		const lease, wait = 30_000, 2_000
		for _, f := range []string{"holder", "dead", "me", "dead2", "other"} {
			if _, err := ftAcquire(ctx, rdb, k, f, lease, wait); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		sub := scSubscribe(t, rdb, false, k.waiterChannel("me"), k.waiterChannel("other"), k.waiterChannel(ftBarrier))
		past := float64(time.Now().UnixMilli() - 1_000)
		if err := rdb.ZAdd(ctx, k.timeouts, redis.Z{Score: past, Member: "dead"}, redis.Z{Score: past, Member: "dead2"}).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := ftAcquire(ctx, rdb, k, "me", lease, wait)
		if err != nil || r == nil {
			t.Fatalf("me = %v, %v; want queued", ftPtr(r), err)
		}
		if q := ftMustSnapshot(t, rdb, k).queue; q[0] != "me" {
			t.Fatalf("queue %q, want me at the head", q)
		}
		// The holder releases and "me" takes the lock: "dead2", the head
		// now and stale, is purged by the next call, someone else's.
		if r, err := ftRelease(ctx, rdb, k, "holder", lease); err != nil || r == nil {
			t.Fatalf("holder release = %v, %v", ftPtr(r), err)
		}
		if r, err := ftAcquire(ctx, rdb, k, "me", lease, wait); err != nil || r != nil {
			t.Fatalf("me acquires = %v, %v", ftPtr(r), err)
		}
		if r, err := ftAcquire(ctx, rdb, k, "late", lease, wait); err != nil || r == nil {
			t.Fatalf("late queues = %v, %v", ftPtr(r), err)
		}
		got := ftWoken(t, rdb, sub, k)
		// "me" was woken once, by the release (it was the head then);
		// "other" when the call of "late" purged "dead2" ahead of it.
		if want := []string{"me", "other"}; !slices.Equal(got, want) {
			t.Errorf("messages on the waiters' channels %q, want %q", got, want)
		}
		ftWindDown(t, rdb, k, "me", lease, wait)
	})
}
