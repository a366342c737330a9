package lualock

import (
	"context"
	"time"

	"github.com/lualock/lualock/internal/renew"
)

// lifetime is the lifecycle of anything held: a lock's hold (hold.go) or
// a permit (expirable.go). It owns
//
//   - the Context that lives as long as the thing is held and ends with a
//     cause (made on first use: most holds never ask for it),
//   - the fixed lease's expiry, which ends it renew.LossMargin before the
//     lease runs out by the client's clock (the promise of the package doc
//     for every fixed lease),
//   - the watchdog entry of a thing held without a fixed lease,
//   - the one end event (onEnd), which feeds the Observer and the Logger.
//
// Its owner (hold, Permit) serializes the calls under its mutex and decides
// what ends it. end is the one way it ends: whatever finds the held thing
// gone (a renewal, the hold watcher, a key-watching loss detector) ends it
// there, through its owner, with a cause wrapping ErrLockLost; the first
// cause stands, and onEnd runs once.
type lifetime struct {
	afterFunc func(time.Duration, func()) *time.Timer // time.AfterFunc, or a test's recorder
	onEnd     func(cause error, since time.Time)      // the end event: once per lifetime

	ctx     context.Context
	cancel  context.CancelCauseFunc
	ended   error         // the cause it ended with; nil while it lasts
	since   time.Time     // when the acquisition that began it started
	expiry  *time.Timer   // fixed lease: ends it when the lease runs out
	endsAt  time.Time     // when expiry is due (zero without a fixed lease)
	lease   time.Duration // the fixed lease expiry runs out
	entry   watchdogEntry // the last watchdog entry, kept after its removal (a renewal of it may be in flight)
	watched bool          // entry renews it
}

// watchdogEntry is a held thing's watchdog entry (a *renew.Entry).
type watchdogEntry interface {
	Pause(ctx context.Context) error // no renewal runs or starts until Resume
	Resume()
	Stop()              // renew no more, still report the expiry
	Remove() bool       // forget it: no end is reported after
	Renewed() time.Time // when its lease was last set
}

// begin starts a new lifetime, whose acquisition started at since. The
// previous one has ended (or never began).
func (t *lifetime) begin(since time.Time) {
	t.ctx, t.cancel, t.ended, t.since = nil, nil, nil, since
}

// context returns the lifetime's Context, made on first use.
func (t *lifetime) context() context.Context {
	if t.ctx == nil {
		t.ctx, t.cancel = context.WithCancelCause(context.Background())
		if t.ended != nil {
			t.cancel(t.ended)
		}
	}
	return t.ctx
}

// watch records e, the watchdog entry that renews the held thing from now
// on; a fixed lease's expiry stops.
func (t *lifetime) watch(e watchdogEntry) {
	t.stopExpiry()
	t.entry, t.watched = e, true
}

// unwatch takes the held thing off the watchdog (the entry is kept: a
// renewal of it may still be in flight).
func (t *lifetime) unwatch() {
	if t.watched {
		t.watched = false
		t.entry.Remove()
	}
}

// expireAt puts the held thing under a fixed lease, set in Redis at start
// or later: the watchdog renews it no more, and expired runs (on a timer's
// goroutine, without the owner's mutex) when the lease runs out less
// renew.LossMargin.
func (t *lifetime) expireAt(start time.Time, lease time.Duration, expired func()) {
	t.unwatch()
	t.stopExpiry()
	after := t.afterFunc
	if after == nil {
		after = time.AfterFunc
	}
	t.lease, t.endsAt = lease, start.Add(lease-renew.LossMargin(lease))
	t.expiry = after(time.Until(t.endsAt), expired)
}

// leaseOver reports whether the fixed lease's end is due, whether or not
// its timer, late on a busy machine, has fired yet.
func (t *lifetime) leaseOver() bool {
	return t.expiry != nil && !time.Now().Before(t.endsAt)
}

func (t *lifetime) stopExpiry() {
	if t.expiry != nil {
		t.expiry.Stop()
		t.expiry = nil
	}
}

// end ends the lifetime with cause: its Context is cancelled and onEnd
// runs, the first time only (the first cause stands). It stops neither the
// expiry nor the watchdog entry (see finish).
func (t *lifetime) end(cause error) {
	if t.ended != nil {
		return
	}
	t.ended = cause
	if t.cancel != nil {
		t.cancel(cause)
	}
	if t.onEnd != nil {
		t.onEnd(cause, t.since)
	}
}

// finish stops the expiry and the watchdog entry and ends the lifetime
// with cause.
func (t *lifetime) finish(cause error) {
	t.stopExpiry()
	t.unwatch()
	t.end(cause)
}
