package lualock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MultiLock takes several locks all or nothing and releases them all, as
// Redisson's RedissonMultiLock does: its members are ordinary Lock handles
// of any kind (reentrant, fair, read, write, fenced, spin), of one client or
// several, on one Redis deployment or several. It adds no keys of its own,
// so a Java multi-lock and a Go one exclude each other member by member.
//
// Redisson's failure rules: one member that cannot be taken fails the
// round (no member may fail), and the members taken in that round are
// released before the next round, or before TryLock gives up. Unlike
// Redisson's, a round waits (with the remaining wait) only for its first
// member, holding nothing, and tries the others once: it never waits while
// it holds a member, so a multi-lock that lists the same names in another
// order (Redisson keeps the caller's order) cannot stall it. The next round
// starts with the member that failed. The members are kept sorted by name,
// whatever order they were given in.
//
// RedLock (a majority of independent Redis servers) is not offered: Redisson
// deprecated it, and no lease-based lock, RedLock included, keeps a holder
// that pauses past its lease (a GC pause, a stopped VM) from acting while
// another holds the lock (Martin Kleppmann, "How to do distributed
// locking", 2016). Fencing does: a token that grows with every acquisition,
// checked by the protected resource (a fenced lock).
//
// A MultiLock is one owner, as each member handle is: goroutines that must
// exclude each other need a MultiLock each, over handles of their own.
type MultiLock struct {
	c       *Client // the client that made it, which reports its events
	locks   []*Lock
	invalid error
	mu      sync.Mutex // one acquisition or release at a time
	holds   int
}

// NewMultiLock returns a multi-lock over locks, which may belong to any
// clients (c's own or others). Nothing is sent to Redis. No locks, a nil
// lock or one handle given twice makes every call return ErrInvalid.
func (c *Client) NewMultiLock(locks ...*Lock) *MultiLock {
	m := &MultiLock{c: c, locks: slices.Clone(locks)}
	seen := map[*Lock]bool{}
	for _, l := range locks {
		switch {
		case l == nil:
			m.invalid = fmt.Errorf("%w: a nil lock", ErrInvalid)
		case seen[l]:
			m.invalid = fmt.Errorf("%w: lock %q given twice", ErrInvalid, l.name)
		}
		seen[l] = true
	}
	if len(locks) == 0 {
		m.invalid = fmt.Errorf("%w: no locks", ErrInvalid)
	}
	if m.invalid == nil {
		slices.SortStableFunc(m.locks, func(a, b *Lock) int {
			switch {
			case a.name < b.name:
				return -1
			case a.name > b.name:
				return 1
			}
			return 0
		})
	}
	return m
}

// Locks returns the members in the order they are taken.
func (m *MultiLock) Locks() []*Lock { return slices.Clone(m.locks) }

// name is the multi-lock's name in errors: its members' names.
func (m *MultiLock) name() string {
	var b []byte
	for i, l := range m.locks {
		if l == nil {
			continue
		}
		if i > 0 {
			b = append(b, '+')
		}
		b = append(b, l.name...)
	}
	return string(b)
}

// multiRound is how long one round of Lock waits for each member, per
// member, as Redisson's lock() (n x 1500 ms per round).
const multiRound = 1500 * time.Millisecond

// Lock blocks until it holds every member or ctx ends: rounds of TryLock,
// each waiting up to 1.5 s per member. The members are renewed by their
// watchdogs until Unlock. It returns ErrInvalid, ErrClosed, an error
// wrapping ctx's error, ErrLockLost for a member whose current hold was
// lost, or a non-transient Redis error.
func (m *MultiLock) Lock(ctx context.Context) (err error) {
	start := time.Now()
	defer func() { m.acquired(ctx, start, -1, err) }()
	for {
		err := m.tryLock(ctx, time.Duration(len(m.locks))*multiRound, 0)
		if !errors.Is(err, ErrNotObtained) && !errors.Is(err, ErrUnavailable) {
			return err
		}
		if ctx.Err() != nil {
			return wrapErr(verbLock, m.name(), ctxErr(ctx, err))
		}
	}
}

// TryLock takes every member within wait, or none: it returns
// ErrNotObtained (ErrUnavailable when a member's Redis never answered) when
// the wait runs out, with every member taken meanwhile released. A wait of
// 0 makes one round of single attempts. Other errors are Lock's.
func (m *MultiLock) TryLock(ctx context.Context, wait time.Duration) (err error) {
	start := time.Now()
	defer func() { m.acquired(ctx, start, wait, err) }()
	return m.tryLock(ctx, wait, 0)
}

// acquired reports an acquisition call of the multi-lock (its members
// report their own).
func (m *MultiLock) acquired(ctx context.Context, start time.Time, wait time.Duration, err error) {
	m.c.acquired(ctx, subject{kind: KindMultiLock, name: m.name()}, start, wait, false, err)
}

// TryLockLease is TryLock with a fixed lease for every member (see
// Lock.TryLockLease): each member's lease starts when that member is
// taken, so the first member's ends first.
func (m *MultiLock) TryLockLease(ctx context.Context, wait, lease time.Duration) (err error) {
	start := time.Now()
	defer func() { m.acquired(ctx, start, wait, err) }()
	if lease < time.Millisecond {
		return wrapErr(verbLock, m.name(), fmt.Errorf("%w: lease %v, want at least 1ms", ErrInvalid, lease))
	}
	return m.tryLock(ctx, wait, lease)
}

func (m *MultiLock) tryLock(ctx context.Context, wait, lease time.Duration) error {
	if m.invalid != nil {
		return wrapErr(verbLock, m.name(), m.invalid)
	}
	if ctx == nil {
		return wrapErr(verbLock, m.name(), fmt.Errorf("%w: nil context", ErrInvalid))
	}
	if wait < 0 {
		return wrapErr(verbLock, m.name(), fmt.Errorf("%w: wait %v, want >= 0", ErrInvalid, wait))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	deadline := time.Now().Add(wait)
	lead := 0 // the member the round waits for, holding nothing
	for {
		taken, at, failed := m.round(ctx, lead, deadline, lease)
		if failed == nil {
			m.holds++
			return nil
		}
		// All or nothing: give back what this round took, newest first.
		uctx, cancel := detached(ctx)
		for i := len(taken) - 1; i >= 0; i-- {
			_ = taken[i].Unlock(uctx)
		}
		cancel()
		if !errors.Is(failed, ErrNotObtained) && !errors.Is(failed, ErrUnavailable) {
			return wrapErr(verbLock, m.name(), failed)
		}
		if wait == 0 || !time.Now().Before(deadline) {
			return wrapErr(verbLock, m.name(), failed)
		}
		lead = at
	}
}

// round takes every member: first the lead, waiting for it up to the
// deadline while holding nothing, then the others in their order with
// single attempts, so that the multi-lock never waits while it holds a
// member (a multi-lock of Redisson's that lists the same names in another
// order then cannot stall it). It returns what it took and, on a failure, the
// index of the member that failed, which the next round leads with, and
// its error.
func (m *MultiLock) round(ctx context.Context, lead int, deadline time.Time, lease time.Duration) (taken []*Lock, at int, failed error) {
	for i := -1; i < len(m.locks); i++ {
		k, wait := i, time.Duration(0)
		switch {
		case i == -1:
			k, wait = lead, max(time.Until(deadline), 0)
		case i == lead:
			continue
		}
		l := m.locks[k]
		var err error
		if lease > 0 {
			err = l.TryLockLease(ctx, wait, lease)
		} else {
			err = l.TryLock(ctx, wait)
		}
		if err != nil {
			return taken, k, memberErr(l, err)
		}
		taken = append(taken, l)
	}
	return taken, 0, nil
}

// memberErr is a member's error as the multi-lock's cause: the member's
// name and the member's cause, without the member's own "lock NAME"
// prefix, so that the multi-lock's error says each fact once:
//
//	lualock: lock "a+b": member "b": not obtained within 1s
func memberErr(l *Lock, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Name == l.name {
		err = e.Err
	}
	return &memberError{name: l.name, err: err}
}

// memberError is the cause of a multi-lock's failure at one member.
type memberError struct {
	name string
	err  error
}

func (e *memberError) Error() string {
	return "member " + strconv.Quote(e.name) + ": " + strings.TrimPrefix(e.err.Error(), "lualock: ")
}

func (e *memberError) Unwrap() error { return e.err }

// Unlock releases one hold of every member, all of them even when some
// fail (Redisson 4.x's unlock stops at the first failure, leaving the rest
// held), and returns the members' errors joined: ErrNotHeld when the
// multi-lock holds nothing, and the members' ErrNotHeld, ErrLockLost or
// Redis errors.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if m.invalid != nil {
		return wrapErr(verbUnlock, m.name(), m.invalid)
	}
	if ctx == nil {
		return wrapErr(verbUnlock, m.name(), fmt.Errorf("%w: nil context", ErrInvalid))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holds == 0 {
		return wrapErr(verbUnlock, m.name(), ErrNotHeld)
	}
	m.holds--
	var errs []error
	for i := len(m.locks) - 1; i >= 0; i-- {
		if err := m.locks[i].Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
