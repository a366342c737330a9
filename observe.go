package lualock

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/lualock/lualock/internal/renew"
)

// Observer receives a Client's events, for metrics and traces. Each field
// is optional; a nil func costs one comparison where its event happens, and
// with no funcs set nothing is measured at all. The module
// github.com/lualock/lualock/extra/lualockotel turns these events into
// OpenTelemetry metrics and spans.
//
// The funcs run synchronously on the goroutine where the event happens,
// sometimes under a lock of the handle: they must return quickly, must not
// block, and must not call the Client or its Locks. The events are values;
// they do not escape unless a func keeps them.
type Observer struct {
	// Acquire is called when an acquisition call returns, with its
	// outcome: a lock's Lock, LockLease, TryLock or TryLockLease (every
	// lock kind), a semaphore's or a permit-expirable semaphore's Acquire,
	// TryAcquire and their lease variants, a count-down latch's Await, a
	// multi-lock's Lock, TryLock or TryLockLease (its members report their
	// own acquisitions too).
	Acquire func(AcquireEvent)

	// HoldEnd is called when something held ends: a lock handle's hold
	// (its last Unlock, its fixed lease running out, its loss, or
	// Client.Close) or a Permit (Release, its fixed lease, its loss, or
	// Client.Close). A plain Semaphore's permits have no owner and a
	// multi-lock's members report their own, so neither reports one.
	HoldEnd func(HoldEndEvent)

	// Renew is called after each renewal call of the watchdog, which renews
	// up to Options.RenewBatch holds at once.
	Renew func(RenewEvent)
}

// AcquireEvent describes one acquisition call that returned.
type AcquireEvent struct {
	// Context is the call's context, for a tracer to find the parent span.
	// It may be done by now.
	Context context.Context
	Kind    Kind   // the primitive: which lock kind, semaphore, permit, latch, multi-lock
	Name    string // the object's name (a multi-lock's: its members' joined by "+")
	Owner   string // a lock handle's owner field C:H, a permit's id; "" for the others
	// Start is when the call began; Wait is how long it took.
	Start time.Time
	Wait  time.Duration
	// Handoff is true when a lock's call obtained it after waiting for a
	// release message: the lock passed from another holder to this one.
	Handoff bool
	// Err is what the call returned: nil when it obtained what it asked
	// for, else ErrNotObtained, ErrUnavailable, ErrLockLost, ErrClosed,
	// ErrInvalid, ErrUpgrade, a context error or a Redis error (test with
	// errors.Is).
	Err error
}

// HoldEndEvent describes the end of something held: a lock handle's hold,
// from the acquisition that took the first hold to the moment the handle
// held nothing any more, or a Permit, from its acquisition to its end.
type HoldEndEvent struct {
	Kind   Kind          // the primitive: a lock kind or KindPermit
	Name   string        // the object's name
	Owner  string        // a lock handle's owner field C:H, a permit's id
	Held   time.Duration // time from the acquisition
	Reason EndReason     // why it ended
	Cause  error         // the cause the handle's or the permit's Context reports
}

// Kind is the kind of primitive an event comes from. Its String is the
// label metrics use.
type Kind uint8

// The kinds of primitive.
const (
	KindReentrant Kind = iota + 1 // Client.NewLock
	KindFair                      // Client.NewFairLock, NewFairLockWait
	KindRead                      // ReadWriteLock.ReadLock
	KindWrite                     // ReadWriteLock.WriteLock
	KindFenced                    // Client.NewFencedLock
	KindSpin                      // Client.NewSpinLock
	KindSemaphore                 // Client.NewSemaphore
	KindPermit                    // a Permit of Client.NewPermitExpirableSemaphore
	KindLatch                     // Client.NewCountDownLatch
	KindMultiLock                 // Client.NewMultiLock
)

var kindNames = [...]string{"", "reentrant", "fair", "read", "write", "fenced", "spin", "semaphore", "permit", "latch", "multilock"}

// String returns the kind in lower case, as metrics label it:
// "reentrant", "fair", "read", "write", "fenced", "spin", "semaphore",
// "permit", "latch", "multilock"; "unknown" for any other value.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds returns every kind, in the order of their values.
func Kinds() []Kind {
	ks := make([]Kind, 0, len(kindNames)-1)
	for k := KindReentrant; int(k) < len(kindNames); k++ {
		ks = append(ks, k)
	}
	return ks
}

// EndReason tells why a hold ended.
type EndReason uint8

// The reasons a hold ends. The Lost* reasons are losses (ErrLockLost): the
// lock was no longer the handle's before it released it.
const (
	Released           EndReason = iota // the last Unlock released it
	Expired                             // its fixed lease ran out, or it was gone at Unlock
	Closed                              // Client.Close stopped renewing it
	LostGone                            // a renewal found it gone (expired, deleted or wiped)
	LostRenewalsFailed                  // renewals failed (Redis unreachable) for a whole lease
	LostAtUnlock                        // Unlock found a watched hold gone
	LostOnReentry                       // a re-entry found the earlier holds gone
	LostOther                           // another loss
)

// String returns the reason in snake case, as metrics label it:
// "released", "expired", "closed", "lost_gone", "lost_renewals_failed",
// "lost_at_unlock", "lost_on_reentry", "lost_other".
func (r EndReason) String() string {
	switch r {
	case Released:
		return "released"
	case Expired:
		return "expired"
	case Closed:
		return "closed"
	case LostGone:
		return "lost_gone"
	case LostRenewalsFailed:
		return "lost_renewals_failed"
	case LostAtUnlock:
		return "lost_at_unlock"
	case LostOnReentry:
		return "lost_on_reentry"
	}
	return "lost_other"
}

// Lost reports whether r is a loss.
func (r EndReason) Lost() bool { return r >= LostGone }

// RenewEvent describes one renewal call of the watchdog.
type RenewEvent struct {
	Holds int           // the holds and permits the call renewed, or tried to
	Took  time.Duration // the call's round trip
	Err   error         // nil when Redis answered; holds it found gone end with LostGone
}

// The causes of the losses that EndReason tells apart.
var (
	errLostGone           = errors.New("the renewal found it gone (expired, deleted or wiped)")
	errLostRenewalsFailed = errors.New("renewals failed for a whole lease")
	errLostAtUnlock       = errors.New("the lock was gone at unlock (deleted or wiped)")
	errLostOnReentry      = errors.New("a re-entry found the earlier holds gone (expired or deleted)")
)

// endReason classifies the cause a hold ended with.
func endReason(cause error) EndReason {
	switch {
	case cause == ErrNotHeld:
		return Released
	case errors.Is(cause, errLostGone):
		return LostGone
	case errors.Is(cause, errLostRenewalsFailed):
		return LostRenewalsFailed
	case errors.Is(cause, errLostAtUnlock):
		return LostAtUnlock
	case errors.Is(cause, errLostOnReentry):
		return LostOnReentry
	case errors.Is(cause, ErrLockLost):
		return LostOther
	case errors.Is(cause, ErrClosed):
		return Closed
	}
	return Expired
}

// subject is what an event is about: the kind, the name and the owner.
type subject struct {
	kind        Kind
	name, owner string
}

// subject is the handle's, for its events.
func (l *Lock) subject() subject { return subject{l.p.kind, l.name, l.field} }

// ended reports the end of l's hold, which began at since, with cause
// (holdEnv). The hold's mutex is held.
func (l *Lock) ended(cause error, since time.Time) { l.c.holdEnded(l.subject(), cause, since) }

// acquireEnded reports an acquisition call of l that returned err after it
// began at start.
func (l *Lock) acquireEnded(ctx context.Context, start time.Time, wait time.Duration, handoff bool, err error) {
	l.c.acquired(ctx, l.subject(), start, wait, handoff, err)
}

// holdEnded reports the end of what s held (a hold, a permit), which
// began at since, with cause to the observer and the logger: the one end
// event of every primitive. It runs under the holder's mutex.
func (c *Client) holdEnded(s subject, cause error, since time.Time) {
	o, log := c.cfg.Observer.HoldEnd, c.cfg.Logger
	if o == nil && log == nil {
		return
	}
	r := endReason(cause)
	if o != nil {
		o(HoldEndEvent{Kind: s.kind, Name: s.name, Owner: s.owner, Held: time.Since(since), Reason: r, Cause: cause})
	}
	if log == nil {
		return
	}
	switch {
	case r.Lost():
		log.LogAttrs(context.Background(), slog.LevelWarn, "lualock: lost",
			slog.String("kind", s.kind.String()), slog.String("name", s.name), slog.String("owner", s.owner),
			slog.String("reason", r.String()), slog.Any("cause", cause))
	case r == Closed:
		log.LogAttrs(context.Background(), slog.LevelInfo, "lualock: client closed: the watchdog stopped renewing what was held",
			slog.String("kind", s.kind.String()), slog.String("name", s.name), slog.String("owner", s.owner))
	}
}

// acquired reports an acquisition call about s that returned err after it
// began at start to the observer and the logger: the one acquisition
// event of every primitive. wait is the call's bound (negative: none).
func (c *Client) acquired(ctx context.Context, s subject, start time.Time, wait time.Duration, handoff bool, err error) {
	if o := c.cfg.Observer.Acquire; o != nil {
		o(AcquireEvent{Context: ctx, Kind: s.kind, Name: s.name, Owner: s.owner,
			Start: start, Wait: time.Since(start), Handoff: handoff && err == nil, Err: err})
	}
	log := c.cfg.Logger
	if log == nil || err == nil || wait == 0 {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	switch {
	case errors.Is(err, ErrUnavailable):
		log.LogAttrs(ctx, slog.LevelWarn, "lualock: gave up: Redis did not answer",
			slog.String("kind", s.kind.String()), slog.String("name", s.name), slog.String("owner", s.owner),
			slog.Duration("wait", wait), slog.Any("err", err))
	case errors.Is(err, ErrNotObtained):
		log.LogAttrs(ctx, slog.LevelInfo, "lualock: gave up waiting",
			slog.String("kind", s.kind.String()), slog.String("name", s.name), slog.String("owner", s.owner),
			slog.Duration("wait", wait))
	}
}

// renewCalled reports a renewal call of the watchdog to the observer and,
// when it failed, to the logger.
func (c *Client) renewCalled(r renew.Call) {
	if o := c.cfg.Observer.Renew; o != nil {
		o(RenewEvent{Holds: len(r.Keys), Took: r.Took, Err: r.Err})
	}
	if log := c.cfg.Logger; log != nil && r.Err != nil && len(r.Keys) > 0 {
		owner := r.Fields[0]
		if r.Spec != nil && r.Spec.Name == permitRenewalName {
			owner = hex.EncodeToString([]byte(owner)) // a permit's id: 16 raw bytes
		}
		log.LogAttrs(context.Background(), slog.LevelWarn, "lualock: renewal failed",
			slog.String("name", r.Keys[0]), slog.String("owner", owner),
			slog.Int("holds", len(r.Keys)), slog.Any("err", r.Err))
	}
}

// resubscribed logs a channel subscribed again after a pub/sub reconnect.
// The hub calls it under its lock.
func (c *Client) resubscribed(channel string, waiters int) {
	if log := c.cfg.Logger; log != nil {
		log.LogAttrs(context.Background(), slog.LevelInfo, "lualock: pub/sub reconnected: channel subscribed again, waking its waiters",
			slog.String("channel", channel), slog.Int("waiters", waiters))
	}
}
