package lualock

import (
	"context"
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
	// Acquire is called when a Lock, LockLease, TryLock or TryLockLease call
	// returns, with its outcome.
	Acquire func(AcquireEvent)

	// HoldEnd is called when a handle's hold ends: its last Unlock, its
	// fixed lease running out, its loss, or Client.Close.
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
	Lock    string // the lock's name
	Owner   string // the handle's owner field C:H
	Fair    bool   // a fair lock (NewFairLock), else a reentrant lock
	// Start is when the call began; Wait is how long it took.
	Start time.Time
	Wait  time.Duration
	// Handoff is true when the call obtained the lock after waiting for a
	// release message: the lock passed from another holder to this one.
	Handoff bool
	// Err is what the call returned: nil when it obtained the lock, else
	// ErrNotObtained, ErrUnavailable, ErrLockLost, ErrClosed, ErrInvalid, a
	// context error or a Redis error (test with errors.Is).
	Err error
}

// HoldEndEvent describes the end of a hold: from the acquisition that took
// the first hold to the moment the handle held nothing any more.
type HoldEndEvent struct {
	Lock   string        // the lock's name
	Owner  string        // the handle's owner field C:H
	Fair   bool          // a fair lock
	Held   time.Duration // time from the first hold's acquisition
	Reason EndReason     // why it ended
	Cause  error         // the cause the handle's Context reports
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
	Locks int           // holds the call renewed, or tried to
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

// fair reports whether the handle is a fair lock, for the events.
func (l *Lock) fair() bool {
	ok := l.p.kind == kindFair
	return ok
}

// ended reports the end of l's hold, which began at since, with cause to
// the observer and the logger (holdEnv). The hold's mutex is held.
func (l *Lock) ended(cause error, since time.Time) {
	o, log := l.c.cfg.Observer.HoldEnd, l.c.cfg.Logger
	if o == nil && log == nil {
		return
	}
	r := endReason(cause)
	if o != nil {
		o(HoldEndEvent{Lock: l.name, Owner: l.field, Fair: l.fair(), Held: time.Since(since), Reason: r, Cause: cause})
	}
	if log == nil {
		return
	}
	switch {
	case r.Lost():
		log.LogAttrs(context.Background(), slog.LevelWarn, "lualock: lock lost",
			slog.String("lock", l.name), slog.String("owner", l.field), slog.String("reason", r.String()), slog.Any("cause", cause))
	case r == Closed:
		log.LogAttrs(context.Background(), slog.LevelInfo, "lualock: client closed: the watchdog stopped renewing a held lock",
			slog.String("lock", l.name), slog.String("owner", l.field))
	}
}

// acquireEnded reports an acquisition call that returned err after it
// began at start to the observer and the logger.
func (l *Lock) acquireEnded(ctx context.Context, start time.Time, wait time.Duration, handoff bool, err error) {
	if o := l.c.cfg.Observer.Acquire; o != nil {
		o(AcquireEvent{Context: ctx, Lock: l.name, Owner: l.field, Fair: l.fair(),
			Start: start, Wait: time.Since(start), Handoff: handoff && err == nil, Err: err})
	}
	log := l.c.cfg.Logger
	if log == nil || err == nil || wait == 0 {
		return
	}
	switch {
	case errors.Is(err, ErrUnavailable):
		log.LogAttrs(ctx, slog.LevelWarn, "lualock: gave up: Redis did not answer",
			slog.String("lock", l.name), slog.String("owner", l.field), slog.Duration("wait", wait), slog.Any("err", err))
	case errors.Is(err, ErrNotObtained):
		log.LogAttrs(ctx, slog.LevelInfo, "lualock: gave up waiting",
			slog.String("lock", l.name), slog.String("owner", l.field), slog.Duration("wait", wait))
	}
}

// renewCalled reports a renewal call of the watchdog to the observer and,
// when it failed, to the logger.
func (c *Client) renewCalled(r renew.Call) {
	if o := c.cfg.Observer.Renew; o != nil {
		o(RenewEvent{Locks: len(r.Keys), Took: r.Took, Err: r.Err})
	}
	if log := c.cfg.Logger; log != nil && r.Err != nil && len(r.Keys) > 0 {
		log.LogAttrs(context.Background(), slog.LevelWarn, "lualock: renewal failed",
			slog.String("lock", r.Keys[0]), slog.String("owner", r.Fields[0]),
			slog.Int("locks", len(r.Keys)), slog.Any("err", r.Err))
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
