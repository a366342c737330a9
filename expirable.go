package lualock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/renew"
	"github.com/lualock/lualock/internal/track"
)

// PermitExpirableSemaphore is a handle on Redisson's
// RPermitExpirableSemaphore: a semaphore whose every acquired permit has an
// id and a lease, after which it comes back to the pool (on the next call
// by anyone: nothing expires by itself). It uses Redisson 4.x's layout:
// permit ids are 16 random bytes in Redis, shown as 32 hex characters.
// Redisson 3.16 stored the hex text instead, so a 3.16 client and lualock
// cannot release or extend each other's permits (each sees "not held");
// counts and expiry are shared with both versions.
//
// A permit taken without a lease (Acquire, TryAcquire) is renewed by the
// client's watchdog like a lock (Options.WatchdogLease, in batches of up
// to Options.RenewBatch permits of one slot per call,
// lua/expirable_semaphore_renew.lua), until Release; its Context ends with
// a cause wrapping ErrLockLost when a renewal finds it gone (expired and
// given back, or released by someone else) or when renewals fail for a
// whole lease (less renew.LossMargin), and with ErrClosed at Client.Close. Deadlines are Redis's clock (TIME) when lualock sets them and the
// Java host's clock when Redisson does.
//
// Waiters are woken by the semaphore's messages and retry on a timer bound
// by the nearest permit deadline, as Redisson's, and by
// Options.MaxWaitTimer (see Semaphore for the waiter that holds the
// claim); a waiter is not starved
// by lualock waiters for fewer permits (see Semaphore). Its methods are
// safe for concurrent use.
type PermitExpirableSemaphore struct {
	c        *Client
	name     string
	timeouts string
	channel  string
	claim    string
	invalid  error
}

// NewPermitExpirableSemaphore returns a handle on the permit-expirable
// semaphore name. Nothing is sent to Redis. A bad name (see CheckName)
// makes every call return ErrInvalid. Do not use one name for a Semaphore
// and a PermitExpirableSemaphore: they share the key and the channel.
func (c *Client) NewPermitExpirableSemaphore(name string) *PermitExpirableSemaphore {
	return &PermitExpirableSemaphore{
		c:        c,
		name:     name,
		timeouts: keys.Suffix(name, "timeout"),
		channel:  keys.Tag(keys.SemaphoreChannelPrefix, name),
		claim:    keys.Tag(keys.ClaimPrefix, name),
		invalid:  CheckName(name),
	}
}

// Name returns the semaphore's name, its key in Redis.
func (s *PermitExpirableSemaphore) Name() string { return s.name }

// plain is the semaphore's count as a Semaphore: the two share it.
func (s *PermitExpirableSemaphore) plain() *Semaphore {
	return &Semaphore{c: s.c, name: s.name, channel: s.channel, claim: s.claim, invalid: s.invalid}
}

// TrySetPermits sets the number of permits if the semaphore has none yet,
// as Semaphore.TrySetPermits.
func (s *PermitExpirableSemaphore) TrySetPermits(ctx context.Context, permits int) (bool, error) {
	return s.plain().TrySetPermits(ctx, permits)
}

// AddPermits adds n permits (n may be negative) and returns the new count
// of available permits, as Semaphore.AddPermits.
func (s *PermitExpirableSemaphore) AddPermits(ctx context.Context, n int) (int, error) {
	return s.plain().AddPermits(ctx, n)
}

// AvailablePermits gives back the expired permits, then returns the number
// of available permits and the number held. It returns ErrInvalid,
// ErrClosed, ctx's error or the Redis error.
func (s *PermitExpirableSemaphore) AvailablePermits(ctx context.Context) (available, held int, err error) {
	if err := s.plain().usable(ctx); err != nil {
		return 0, 0, wrapErr(verbAvailable, s.name, err)
	}
	var v []int64
	err = s.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = generated.ExpirableSemaphoreAvailable(ctx, s.c.env.calls,
			generated.ExpirableSemaphoreAvailableKeys{Sem: s.name, Timeouts: s.timeouts, Channel: s.channel},
			generated.ExpirableSemaphoreAvailableArgs{Publish: s.c.env.publish})
		return err
	})
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("reply has %d elements, want 2", len(v))
	}
	if err != nil {
		return 0, 0, wrapErr(verbAvailable, s.name, err)
	}
	return int(v[0]), int(v[1]), nil
}

// Acquire blocks until it holds a permit or ctx ends. The permit is renewed
// until Release (see the type's doc). It returns ErrInvalid, ErrClosed, an
// error wrapping ctx's error, or a non-transient Redis error.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context) (*Permit, error) {
	return s.acquire(ctx, -1, 0)
}

// AcquireLease is Acquire with a fixed lease: the permit comes back to the
// pool lease after it was taken unless released first; nothing renews it.
// A lease under 1ms returns ErrInvalid.
func (s *PermitExpirableSemaphore) AcquireLease(ctx context.Context, lease time.Duration) (*Permit, error) {
	if lease < time.Millisecond {
		return nil, wrapErr(verbAcquire, s.name, fmt.Errorf("%w: lease %v, want at least 1ms", ErrInvalid, lease))
	}
	return s.acquire(ctx, -1, lease)
}

// TryAcquire is Acquire that gives up after wait with ErrNotObtained
// (ErrUnavailable when Redis never answered). A wait of 0 makes one
// attempt; a negative one returns ErrInvalid.
func (s *PermitExpirableSemaphore) TryAcquire(ctx context.Context, wait time.Duration) (*Permit, error) {
	if wait < 0 {
		return nil, wrapErr(verbAcquire, s.name, fmt.Errorf("%w: wait %v, want >= 0", ErrInvalid, wait))
	}
	return s.acquire(ctx, wait, 0)
}

// TryAcquireLease is TryAcquire with a fixed lease, as AcquireLease.
func (s *PermitExpirableSemaphore) TryAcquireLease(ctx context.Context, wait, lease time.Duration) (*Permit, error) {
	if wait < 0 || lease < time.Millisecond {
		return nil, wrapErr(verbAcquire, s.name, fmt.Errorf("%w: wait %v, lease %v; want wait >= 0, lease >= 1ms", ErrInvalid, wait, lease))
	}
	return s.acquire(ctx, wait, lease)
}

func (s *PermitExpirableSemaphore) acquire(ctx context.Context, wait, lease time.Duration) (p *Permit, err error) {
	start := time.Now()
	defer func() {
		sub := subject{kind: KindPermit, name: s.name}
		if p != nil {
			sub.owner = p.ID()
		}
		s.c.acquired(ctx, sub, start, wait, false, err)
	}()
	p, err = s.take(ctx, wait, lease)
	return p, err
}

// take is acquire without the event.
func (s *PermitExpirableSemaphore) take(ctx context.Context, wait, lease time.Duration) (*Permit, error) {
	if err := s.plain().usable(ctx); err != nil {
		return nil, wrapErr(verbAcquire, s.name, err)
	}
	id := make([]byte, 16)
	if _, err := crand.Read(id); err != nil {
		return nil, wrapErr(verbAcquire, s.name, err)
	}
	set := lease
	if set == 0 {
		set = s.c.cfg.WatchdogLease
	}
	_, waiter := newRequest(s.name)
	cl := newClaim(s.c, s.claim, waiter, wait)
	var start time.Time
	_, err := s.c.acquire(ctx, &waitFuncs{
		ch:       s.channel,
		maxTimer: s.c.cfg.MaxWaitTimer,
		attempt: func(ctx context.Context) outcome {
			// The lease counts from this send: a resend that finds the
			// permit taken by an earlier one (its reply lost) sets its
			// deadline again from its own TIME, never earlier than this.
			start = time.Now()
			v, err := generated.ExpirableSemaphoreAcquire(ctx, s.c.env.scripts,
				generated.ExpirableSemaphoreAcquireKeys{Sem: s.name, Timeouts: s.timeouts, Channel: s.channel, Claim: s.claim},
				generated.ExpirableSemaphoreAcquireArgs{LeaseMS: set.Milliseconds(), Publish: s.c.env.publish, Waiter: waiter, ClaimMS: cl.ms, IDs: [][]byte{id}})
			switch {
			case err != nil:
				return cl.failed(err)
			case v == 0:
				return outcome{acquired: true}
			}
			held := v <= -2 // refused, this waiter holds the claim: -2 - hint
			if held {
				v = -v - 2 // the hint; 0: none
				if v == 0 {
					v = -1
				}
			}
			hint := time.Duration(-1) // no permit deadline: wait for a message
			if v >= 0 {
				hint = time.Duration(v) * time.Millisecond // the nearest permit deadline
			}
			return cl.refused(held, hint)
		},
		clean: func(ctx context.Context, g leftover) error {
			if g.unknown {
				// Its id tells: a release finds the permit if the lost
				// attempt took it, and does nothing otherwise.
				if _, err := s.release(ctx, id); err != nil {
					return err
				}
			}
			if g.queued {
				return cl.drop(ctx)
			}
			return nil
		},
	}, wait, 0)
	if err != nil {
		return nil, wrapErr(verbAcquire, s.name, err)
	}
	p := &Permit{s: s, id: id}
	p.mu.Lock()
	defer p.mu.Unlock()
	sub := subject{kind: KindPermit, name: s.name, owner: p.ID()}
	p.life.afterFunc = s.c.cfg.afterFunc
	p.life.onEnd = func(cause error, since time.Time) { s.c.holdEnded(sub, cause, since) }
	p.life.begin(start)
	p.life.context() // a permit's Context is made at once
	p.watch = s.c.watchPermit(p)
	if lease > 0 {
		p.life.expireAt(start, lease, func() {
			p.end(errPermitLeaseRanOut(lease))
		})
		return p, nil
	}
	t := renew.Target{Spec: permitRenewal(s.c.env.publish), Key: s.name, Field: string(id)}
	if !s.c.wd.Add(&p.entry, t, 0, start, p.entryEnded) {
		// Closed since the attempt: the permit comes back at its lease.
		p.life.end(fmt.Errorf("%w: the permit is not renewed", ErrClosed))
		return p, nil
	}
	p.life.watch(&p.entry)
	return p, nil
}

// permitRenewals are the watchdog's renewal specs of the permits, one per
// publish mode (lua/expirable_semaphore_renew.lua publishes when it gives
// expired permits back): many permits of one slot per call.
var permitRenewals = map[string]*renew.Spec{}

// permitRenewalName is the Name of the permits' renewal specs.
const permitRenewalName = "expirable_semaphore_renew"

func init() {
	for _, publish := range []string{"publish", "spublish", "both"} {
		permitRenewals[publish] = &renew.Spec{
			Name:   permitRenewalName,
			Script: generated.ExpirableSemaphoreRenewScript,
			Cmd: func(ctx context.Context, p redis.Pipeliner, names, ids []string, lease time.Duration, rearm bool) *redis.Cmd {
				k := make([]string, 0, 3*len(names))
				a := make([][]byte, len(ids))
				for i, n := range names {
					k = append(k, n, keys.Suffix(n, "timeout"), keys.Tag(keys.SemaphoreChannelPrefix, n))
					a[i] = []byte(ids[i])
				}
				return generated.ExpirableSemaphoreRenewCmd(ctx, p, generated.ExpirableSemaphoreRenewKeys{Permits: k},
					generated.ExpirableSemaphoreRenewArgs{LeaseMS: lease.Milliseconds(), Publish: publish, Rearm: rearm, IDs: a})
			},
			Result: generated.ExpirableSemaphoreRenewResult,
		}
	}
}

// permitRenewal returns the renewal spec of the permits for the client's
// publish mode.
func permitRenewal(publish string) *renew.Spec {
	if sp := permitRenewals[publish]; sp != nil {
		return sp
	}
	return permitRenewals["publish"]
}

// release gives back the permit id; false when it was not held.
func (s *PermitExpirableSemaphore) release(ctx context.Context, id []byte) (bool, error) {
	req, _ := newRequest(s.name)
	var v int64
	err := s.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = generated.ExpirableSemaphoreRelease(ctx, s.c.env.calls,
			generated.ExpirableSemaphoreReleaseKeys{Sem: s.name, Timeouts: s.timeouts, Channel: s.channel, Request: req},
			generated.ExpirableSemaphoreReleaseArgs{LatchMS: s.c.env.latchMS, Publish: s.c.env.publish, IDs: [][]byte{id}})
		return err
	})
	s.c.dropLatch(err, req)
	return v == 1, err
}

// ReleaseID gives back the permit with the given id (32 hex characters, as
// Permit.ID and Redisson 4.x's API show it), whoever took it. It returns
// ErrNotHeld when no such permit is held (released, expired, never taken,
// or taken by Redisson 3.16), ErrInvalid for a malformed id, ErrClosed,
// ctx's error or the Redis error.
func (s *PermitExpirableSemaphore) ReleaseID(ctx context.Context, id string) error {
	if err := s.plain().usable(ctx); err != nil {
		return wrapErr(verbRelease, s.name, err)
	}
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 16 {
		return wrapErr(verbRelease, s.name, fmt.Errorf("%w: permit id %q, want 32 hex characters", ErrInvalid, id))
	}
	ok, err := s.release(ctx, raw)
	if err == nil && !ok {
		err = fmt.Errorf("%w: no permit %s", ErrNotHeld, id)
	}
	return wrapErr(verbRelease, s.name, err)
}

// Permit is one permit of a PermitExpirableSemaphore, held from its
// acquisition until Release, its lease's end or its loss.
type Permit struct {
	s        *PermitExpirableSemaphore
	id       []byte
	mu       sync.Mutex
	life     lifetime     // its Context, fixed lease, watchdog entry and end event
	entry    renew.Entry  // its watchdog entry, without a fixed lease
	watch    *track.Watch // the hold tracker's watch (nil: none)
	released atomic.Bool
}

// ID returns the permit's id: 32 lowercase hex characters, as Redisson 4.x
// shows its permits' ids.
func (p *Permit) ID() string { return hex.EncodeToString(p.id) }

// Context returns a context that lives as long as the permit is held: it
// ends at Release (cause ErrNotHeld), when a fixed lease runs out (cause
// wraps ErrNotHeld), when the permit is lost (cause wraps ErrLockLost) and,
// for a renewed permit, when the client closes (cause wraps ErrClosed).
func (p *Permit) Context() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.life.context()
}

// Done is Context().Done().
func (p *Permit) Done() <-chan struct{} { return p.Context().Done() }

// errPermitLeaseRanOut is the cause of a permit whose fixed lease ran out.
func errPermitLeaseRanOut(lease time.Duration) error {
	return fmt.Errorf("%w: the permit's lease of %v ran out", ErrNotHeld, lease)
}

// end stops the permit's expiry or renewal and ends its lifetime with
// cause (the first cause stands).
func (p *Permit) end(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watch.Stop()
	p.life.finish(cause)
}

// entryEnded ends the permit as its watchdog entry ended.
func (p *Permit) entryEnded(_ uint64, end renew.End) {
	switch end {
	case renew.Gone:
		p.end(fmt.Errorf("%w: %w (permit %s: expired and given back, or released by someone else)", ErrLockLost, errLostGone, p.ID()))
	case renew.Expired:
		p.end(fmt.Errorf("%w: %w (permit %s, lease %v)", ErrLockLost, errLostRenewalsFailed, p.ID(), p.s.c.cfg.WatchdogLease))
	case renew.Closed:
		p.end(fmt.Errorf("%w: the permit is not renewed any more", ErrClosed))
	}
}

// UpdateLease sets a fixed lease on the permit, from now: it comes back to
// the pool lease later unless released first, and nothing renews it any
// more (Redisson's updateLeaseTime). Its Context then ends 1% of the lease
// plus 2ms before that, as a lock's fixed lease does. It returns
// ErrInvalid for a lease under 1ms or a nil ctx, ErrNotHeld when the
// permit is not held any more (released, or its lease ran out), ErrLockLost
// (the Context's cause) for a permit whose loss was found, ErrClosed, ctx's
// error or the Redis error.
func (p *Permit) UpdateLease(ctx context.Context, lease time.Duration) error {
	s := p.s
	if err := s.plain().usable(ctx); err != nil {
		return wrapErr(verbUpdateLease, s.name, err)
	}
	if lease < time.Millisecond {
		return wrapErr(verbUpdateLease, s.name, fmt.Errorf("%w: lease %v, want at least 1ms", ErrInvalid, lease))
	}
	p.mu.Lock()
	ended, entry := p.life.ended, p.life.entry
	p.mu.Unlock()
	switch {
	case errors.Is(ended, ErrLockLost):
		return wrapErr(verbUpdateLease, s.name, ended)
	case ended != nil || p.released.Load():
		return wrapErr(verbUpdateLease, s.name, fmt.Errorf("%w: permit %s", ErrNotHeld, p.ID()))
	}
	if entry != nil {
		// No renewal sent meanwhile may stretch the new lease back to the
		// watchdog's.
		if err := entry.Pause(ctx); err != nil {
			return wrapErr(verbUpdateLease, s.name, err)
		}
		defer entry.Resume()
	}
	start := time.Now()
	var n int64
	err := s.c.call(ctx, func(ctx context.Context) (err error) {
		n, err = generated.ExpirableSemaphoreExtend(ctx, s.c.env.calls,
			generated.ExpirableSemaphoreExtendKeys{Sem: s.name, Timeouts: s.timeouts, Channel: s.channel},
			generated.ExpirableSemaphoreExtendArgs{LeaseMS: lease.Milliseconds(), Publish: s.c.env.publish, IDs: [][]byte{p.id}})
		return err
	})
	if err != nil {
		return wrapErr(verbUpdateLease, s.name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n == 0 {
		err = fmt.Errorf("%w: permit %s was not held any more", ErrNotHeld, p.ID())
		p.life.finish(err)
		return wrapErr(verbUpdateLease, s.name, err)
	}
	if p.life.ended != nil { // released or lost meanwhile
		return wrapErr(verbUpdateLease, s.name, fmt.Errorf("%w: permit %s", ErrNotHeld, p.ID()))
	}
	p.life.expireAt(start, lease, func() {
		p.end(errPermitLeaseRanOut(lease))
	})
	return nil
}

// Release gives the permit back and wakes waiters. It returns ErrLockLost
// (the Context's cause) for a permit whose loss a renewal found, ErrNotHeld
// when the permit was not held any more otherwise (released before, its
// fixed lease ran out and it was given back), ErrInvalid for a nil ctx,
// ErrClosed, ctx's error or the Redis error. A release whose reply was lost
// is sent again under its unlock latch, so it counts once.
func (p *Permit) Release(ctx context.Context) error {
	s := p.s
	if ctx == nil {
		return wrapErr(verbRelease, s.name, fmt.Errorf("%w: nil context", ErrInvalid))
	}
	if p.released.Swap(true) {
		return wrapErr(verbRelease, s.name, fmt.Errorf("%w: permit %s released already", ErrNotHeld, p.ID()))
	}
	p.mu.Lock()
	lost := p.life.ended // set when the permit was lost before
	// Renew it no more: the release's reply decides how it ended.
	p.life.stopExpiry()
	p.life.unwatch()
	// Nor watch it: the release's own write is announced, and the check
	// that follows finds the permit gone.
	p.watch.Stop()
	p.mu.Unlock()
	ok, err := s.release(ctx, p.id)
	switch {
	case ok:
		p.end(ErrNotHeld)
	case err != nil:
		p.end(fmt.Errorf("%w: released without a reply (%v); unless the release landed, the permit comes back at its lease", ErrNotHeld, err))
	case errors.Is(lost, ErrLockLost):
		err = lost
	default:
		err = fmt.Errorf("%w: permit %s was not held any more", ErrNotHeld, p.ID())
		p.end(err)
	}
	return wrapErr(verbRelease, s.name, err)
}
