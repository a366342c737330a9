package faults_test

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/tests/internal/backends"
)

// The leases of the resend scenarios (a fixed lease; the watchdog's), and
// how long after its script ran the first send's reply is reported lost:
// three quarters of the lease, over two thirds, so that a client counting
// from the resend would make its first renewal after Redis's deadline of
// the first send, and the second acquirer gets in between. The watchdog's
// lease is 3s: with 500ms, its renewals (one a third of the lease) failed
// now and then on a loaded machine for a whole lease, and the watchdog
// ended the hold by the client's clock, which is not what is tested.
const (
	resendLease         = 500 * time.Millisecond
	resendWatchdogLease = 3 * time.Second
)

// resendDelay is the delay of the lost reply for a lease.
func resendDelay(lease time.Duration) time.Duration { return lease * 3 / 4 }

// resendKind is one acquisition path with a lease, as the resend
// scenarios drive it: holder A (whose first reply is lost) and a second
// acquirer B on another client.
type resendKind struct {
	name string
	sha  string // the acquire script whose first reply is lost
	// setup prepares name (a semaphore's permits) before a trial.
	setup func(t *testing.T, ctx context.Context, c *lualock.Client, name string)
	// holder returns A's handle on name.
	holder func(c *lualock.Client, name string) resendHolder
	// try is B's single attempt; on success it returns how to release.
	try func(ctx context.Context, c *lualock.Client, name string) (release func(), ok bool, err error)
}

// resendHolder is A.
type resendHolder interface {
	acquire(ctx context.Context, lease time.Duration) error // lease 0: the watchdog
	context() context.Context
	release(ctx context.Context) error
	// remaining reads, in Redis, how long A's hold has left (the least of
	// the keys and deadlines that keep it).
	remaining(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error)
}

// lockHolder is A for a *lualock.Lock (every lock kind but the multi-lock).
type lockHolder struct {
	l    *lualock.Lock
	keys []string // the keys whose PTTL bounds the hold
	read bool     // a read hold: its own timeout key bounds it too
}

func (h lockHolder) acquire(ctx context.Context, lease time.Duration) error {
	if lease == 0 {
		return h.l.Lock(ctx)
	}
	return h.l.LockLease(ctx, lease)
}
func (h lockHolder) context() context.Context          { return h.l.Context() }
func (h lockHolder) release(ctx context.Context) error { return h.l.Unlock(ctx) }
func (h lockHolder) remaining(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	ks := h.keys
	if h.read {
		// The single reader's field is the hash's one field but mode.
		fields, err := rdb.HKeys(ctx, h.l.Name()).Result()
		if err != nil {
			return 0, err
		}
		for _, f := range fields {
			if f != "mode" {
				ks = append(ks, keys.RWTimeoutPrefix(h.l.Name())+":"+f+":rwlock_timeout:1")
			}
		}
	}
	return leastPTTL(ctx, rdb, ks)
}

// errGone is what remaining returns when A's hold is no longer in Redis.
var errGone = errors.New("the hold is not in Redis")

// errStalled is what a trial returns when the test process was held up
// past A's lease before it could read the hold: nothing is wrong, and
// nothing is proved either.
var errStalled = errors.New("stalled past the lease before the hold was read")

// leastPTTL returns the least PTTL of ks; an error when one has none
// (wrapping errGone when the key does not exist).
func leastPTTL(ctx context.Context, rdb redis.UniversalClient, ks []string) (time.Duration, error) {
	least := time.Duration(-1)
	for _, k := range ks {
		d, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			return 0, err
		}
		if d == -2 { // go-redis's PTTL for a key that does not exist
			return 0, fmt.Errorf("PTTL %s: %w", k, errGone)
		}
		if d < 0 {
			return 0, fmt.Errorf("PTTL %s = %d: no expiry", k, d)
		}
		if least < 0 || d < least {
			least = d
		}
	}
	return least, nil
}

// multiHolder is A for a multi-lock of two reentrant locks.
type multiHolder struct {
	m *lualock.MultiLock
}

func (h multiHolder) acquire(ctx context.Context, lease time.Duration) error {
	if lease == 0 {
		return h.m.Lock(ctx)
	}
	return h.m.TryLockLease(ctx, time.Minute, lease)
}
func (h multiHolder) context() context.Context          { return h.m.Locks()[0].Context() }
func (h multiHolder) release(ctx context.Context) error { return h.m.Unlock(ctx) }
func (h multiHolder) remaining(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	var ks []string
	for _, l := range h.m.Locks() {
		ks = append(ks, l.Name())
	}
	return leastPTTL(ctx, rdb, ks)
}

// permitHolder is A for a permit-expirable semaphore.
type permitHolder struct {
	s *lualock.PermitExpirableSemaphore
	p *lualock.Permit
}

func (h *permitHolder) acquire(ctx context.Context, lease time.Duration) (err error) {
	if lease == 0 {
		h.p, err = h.s.Acquire(ctx)
	} else {
		h.p, err = h.s.AcquireLease(ctx, lease)
	}
	return err
}
func (h *permitHolder) context() context.Context          { return h.p.Context() }
func (h *permitHolder) release(ctx context.Context) error { return h.p.Release(ctx) }

// permitLeft is the permit's deadline in the lease zset less Redis's TIME,
// in ms; -1 when the permit is not in the zset.
var permitLeft = redis.NewScript(`
local score = redis.call('zscore', KEYS[1], ARGV[1])
if not score then
  return -1
end
local t = redis.call('time')
return tonumber(score) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))`)

func (h *permitHolder) remaining(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	id, err := hex.DecodeString(h.p.ID())
	if err != nil {
		return 0, err
	}
	ms, err := permitLeft.Run(ctx, rdb, []string{keys.Suffix(h.s.Name(), "timeout")}, id).Int64()
	if err != nil {
		return 0, err
	}
	if ms < 0 {
		return 0, fmt.Errorf("permit %s: %w", h.p.ID(), errGone)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// tryLock is B's single attempt on a lock handle.
func tryLock(ctx context.Context, l *lualock.Lock) (func(), bool, error) {
	err := l.TryLock(ctx, 0)
	if errors.Is(err, lualock.ErrNotObtained) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return func() { _ = l.Unlock(context.Background()) }, true, nil
}

var resendKinds = []resendKind{
	{
		name:   "reentrant",
		sha:    generated.LockAcquireSHA1,
		holder: func(c *lualock.Client, n string) resendHolder { return lockHolder{l: c.NewLock(n), keys: []string{n}} },
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			return tryLock(ctx, c.NewLock(n))
		},
	},
	{
		name: "fair",
		sha:  generated.FairAcquireSHA1,
		holder: func(c *lualock.Client, n string) resendHolder {
			return lockHolder{l: c.NewFairLock(n), keys: []string{n}}
		},
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			return tryLock(ctx, c.NewFairLock(n))
		},
	},
	{
		name: "spin",
		sha:  generated.LockAcquireSHA1,
		holder: func(c *lualock.Client, n string) resendHolder {
			return lockHolder{l: c.NewSpinLock(n), keys: []string{n}}
		},
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			return tryLock(ctx, c.NewSpinLock(n))
		},
	},
	{
		name: "fenced",
		sha:  generated.FencedAcquireSHA1,
		holder: func(c *lualock.Client, n string) resendHolder {
			return lockHolder{l: c.NewFencedLock(n).Handle(), keys: []string{n}}
		},
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			return tryLock(ctx, c.NewFencedLock(n).Handle())
		},
	},
	{
		name: "write",
		sha:  generated.RwlockWriteAcquireSHA1,
		holder: func(c *lualock.Client, n string) resendHolder {
			return lockHolder{l: c.NewReadWriteLock(n).WriteLock(), keys: []string{n}}
		},
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			return tryLock(ctx, c.NewReadWriteLock(n).WriteLock())
		},
	},
	{
		name: "read",
		sha:  generated.RwlockReadAcquireSHA1,
		holder: func(c *lualock.Client, n string) resendHolder {
			return lockHolder{l: c.NewReadWriteLock(n).ReadLock(), keys: []string{n}, read: true}
		},
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			return tryLock(ctx, c.NewReadWriteLock(n).WriteLock()) // a writer
		},
	},
	{
		name: "multi",
		sha:  generated.LockAcquireSHA1, // the first member's reply is lost
		holder: func(c *lualock.Client, n string) resendHolder {
			return multiHolder{m: c.NewMultiLock(c.NewLock(n), c.NewLock(n+"-2"))}
		},
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			return tryLock(ctx, c.NewLock(n))
		},
	},
	{
		name: "expirable",
		sha:  generated.ExpirableSemaphoreAcquireSHA1,
		setup: func(t *testing.T, ctx context.Context, c *lualock.Client, n string) {
			if ok, err := c.NewPermitExpirableSemaphore(n).TrySetPermits(ctx, 1); err != nil || !ok {
				t.Fatalf("TrySetPermits(1) = %v, %v", ok, err)
			}
		},
		holder: func(c *lualock.Client, n string) resendHolder {
			return &permitHolder{s: c.NewPermitExpirableSemaphore(n)}
		},
		try: func(ctx context.Context, c *lualock.Client, n string) (func(), bool, error) {
			p, err := c.NewPermitExpirableSemaphore(n).TryAcquire(ctx, 0)
			if errors.Is(err, lualock.ErrNotObtained) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			return func() { _ = p.Release(context.Background()) }, true, nil
		},
	},
}

// TestResendLease: an acquisition whose first send took the hold but whose
// reply was lost (reported resendDelay of the lease after the script ran) succeeds on
// its resend; Redis's deadline of the hold must then be no earlier than
// the one the client counts from. The client counts from a send that began
// after the loss was reported (LastLoss), so Redis's deadline, read right
// after the acquisition (at most the read's reply time plus the remaining
// PTTL), must be at least LastLoss plus the lease. A second acquirer B
// polls meanwhile: with a fixed lease, B's grant must not come back before
// LastLoss plus the lease (when A's client still counts its hold); with
// the watchdog, B must get nothing while A's hold's Context is live and A
// has not begun to release. Every kind of lock, read holds, a multi-lock's
// member and the permit-expirable semaphore's permits, with the watchdog
// and with a fixed lease; a few trials each, bounded in time.
func TestResendLease(t *testing.T) {
	var scenarios []backends.Scenario
	for _, k := range resendKinds {
		for _, lease := range []time.Duration{0, resendLease} {
			mode := "watchdog"
			if lease > 0 {
				mode = "lease"
			}
			scenarios = append(scenarios, backends.Scenario{
				Name:     k.name + "/" + mode,
				Parallel: true,
				Run: backends.OnClient(func(t *testing.T, rdb redis.UniversalClient) {
					testResendLease(t, rdb, k, lease)
				}),
			})
		}
	}
	backends.Table(t, scenarios)
}

func testResendLease(t *testing.T, rdb redis.UniversalClient, k resendKind, lease time.Duration) {
	// The trials run at once, each with clients and a lock of its own:
	// they mostly wait (the lost reply, the lease), and one after the
	// other a scenario with the watchdog's 3s lease took half a minute.
	held := cmp.Or(lease, resendWatchdogLease) // the lease of A's hold
	o := lualock.Options{WatchdogLease: resendWatchdogLease}
	// A trial the machine held up past A's lease before the hold could be
	// read proves nothing: it runs again, up to 3 rounds in all.
	need := backends.Scale(4, 2)
	for round := 1; need > 0 && round <= 3; round++ {
		var stalled atomic.Int32
		var wg sync.WaitGroup
		for trial := 1; trial <= need; trial++ {
			lose := &backends.LoseReplies{SHA: k.sha, Delay: resendDelay(held)}
			ca := backends.NewClient(t, backends.Hooked(t, rdb, lose), o)
			cb := backends.NewClient(t, rdb, o)
			name := fmt.Sprintf("%s-%d-%d", backends.UniqueName(t), round, trial)
			if k.setup != nil {
				k.setup(t, t.Context(), cb, name)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := resendTrial(t, rdb, k, lease, held, lose, ca, cb, name)
				switch {
				case errors.Is(err, errStalled):
					stalled.Add(1)
					t.Logf("round %d, trial %d: %v; run again", round, trial, err)
				case err != nil:
					t.Errorf("round %d, trial %d: %v", round, trial, err)
				}
			}()
		}
		wg.Wait()
		need = int(stalled.Load())
	}
	if need > 0 {
		t.Errorf("%d trials stalled past the lease in each of 3 rounds: nothing proved", need)
	}
}

// resendTrial is one trial of TestResendLease on the lock name: A
// acquires through ca, whose hook loses the first reply, B polls through
// cb. It reports violations with t.Errorf and returns what stops it.
func resendTrial(t *testing.T, rdb redis.UniversalClient, k resendKind, lease, held time.Duration,
	lose *backends.LoseReplies, ca, cb *lualock.Client, name string) error {
	ctx := t.Context()
	a := k.holder(ca, name)
	lose.Left.Store(1)
	if err := a.acquire(ctx, lease); err != nil {
		return fmt.Errorf("A's acquisition with a lost first reply: %w", err)
	}
	if n := lose.Lost.Load(); n != 1 {
		return fmt.Errorf("the hook lost %d replies, want 1", n)
	}
	lost := lose.LastLoss()
	counted := lost.Add(held) // the client's deadline is later

	// Redis's deadline, read right after: at most read + left.
	left, err := a.remaining(ctx, rdb)
	read := time.Now()
	if errors.Is(err, errGone) {
		// Gone from Redis by the time of the read. Before the deadline
		// the client counts, Redis dropped it early; after, the read came
		// too late to tell.
		if read.Before(counted) {
			t.Errorf("%s: A's hold was gone from Redis %v after the lost reply, within the %v the client counts from a later send",
				name, read.Sub(lost).Round(time.Millisecond), held)
			return nil
		}
		_ = a.release(ctx)
		return fmt.Errorf("A's hold read %v after the lost reply: %w", read.Sub(lost).Round(time.Millisecond), errStalled)
	}
	if err != nil {
		return fmt.Errorf("A's hold in Redis: %w", err)
	}
	if slack := 2 * time.Millisecond; read.Add(left + slack).Before(counted) {
		t.Errorf("%s: Redis keeps A's hold until at most %v after the lost reply, but the client counts it from a later send: at least %v",
			name, read.Add(left).Sub(lost).Round(time.Millisecond), held)
	}

	// B polls until it gets in; A releases a watchdog hold after the
	// window in which a stale deadline would let B in.
	releasedAt := counted.Add(held / 3)
	released := false
	limit := releasedAt.Add(5 * time.Second)
	for {
		if lease == 0 && !released && !time.Now().Before(releasedAt) {
			released = true
			if err := a.release(ctx); err != nil {
				t.Errorf("%s: A's release: %v", name, err)
			}
		}
		undo, ok, err := k.try(ctx, cb, name)
		got := time.Now()
		if err != nil {
			return fmt.Errorf("B's attempt: %w", err)
		}
		if ok {
			live := a.context().Err() == nil
			switch {
			case lease > 0 && got.Before(counted):
				t.Errorf("%s: B was granted %v after A's lost reply, within the lease A's client counts (A's Context live: %v)",
					name, got.Sub(lost).Round(time.Millisecond), live)
			case lease == 0 && !released && live:
				t.Errorf("%s: B was granted %v after A's lost reply while A holds with the watchdog (Context live, not released)",
					name, got.Sub(lost).Round(time.Millisecond))
			}
			undo()
			break
		}
		if time.Now().After(limit) {
			return errors.New("B not granted within 5s of A's release (or its lease's end)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !released {
		_ = a.release(ctx) // a fixed lease ran out: ErrNotHeld
	}
	return nil
}
