package lualock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lualock/lualock/internal/wake"
)

// A held lock listens on its lock's channel when Options.WatchHolds is set
// (the lualock command sets it): a force release publishes there (Redisson's
// forceUnlock of an RLock, and this package's ForceUnlock of either lock),
// and the holder checks its own hold at once (one HEXISTS), instead of at
// its next renewal. The channel is subscribed through the client's shared
// pub/sub connection, as waiters subscribe it; a message wakes one waiter of
// the channel, as before, and reaches every watcher. A resubscription after
// a reconnect makes every watcher check too, since a message may have been
// lost meanwhile. The renewal stays the fallback: a lost message, or a
// force release that publishes nowhere a holder listens (Redisson's
// forceUnlock of a fair lock publishes only to the head of its queue, and
// nothing when nobody waits), is noticed at the next renewal, as without
// the option.

// holdWatcher is one held lock's interest in its channel.
type holdWatcher struct {
	l     *Lock
	gen   uint64
	watch *wake.Watch // nil when the client was closed

	mu       sync.Mutex
	checking bool // a check runs
	again    bool // a message came during the check: check again
	stopped  bool
}

// watchHold makes hold gen of l listen on channel, on every kind of
// pub/sub the client listens to, until stop. It returns nil without
// Options.WatchHolds. The hold's mutex is held.
func (c *Client) watchHold(channel string, l *Lock, gen uint64) *holdWatcher {
	if !c.cfg.WatchHolds {
		return nil
	}
	w := &holdWatcher{l: l, gen: gen}
	w.watch = c.hub.Watch(channel, w.notify)
	return w
}

// stop ends the hold's listening. The hold's mutex is held.
func (w *holdWatcher) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	if w.watch != nil {
		w.watch.Stop() // the channel lingers, then goes: the handle may lock again soon
	}
}

// notify has the watcher check its hold. The hub calls it under its lock,
// at every message and resubscription of the channel: the check runs in a
// goroutine of the client.
func (w *holdWatcher) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if w.checking {
		w.again = true
		return
	}
	if w.l.c.closed() {
		return // Close ends the holds; and background would run inline, under the caller's locks
	}
	w.checking = true
	w.l.c.background(w.run)
}

// run checks the hold until no message came during the last check.
func (w *holdWatcher) run() {
	for {
		w.check()
		w.mu.Lock()
		if !w.again || w.stopped {
			w.checking = false
			w.mu.Unlock()
			return
		}
		w.again = false
		w.mu.Unlock()
	}
}

// check asks Redis whether the hold's field is still in the lock, and ends
// the hold as lost when it is not. A failed check changes nothing: the
// renewal decides.
func (w *holdWatcher) check() {
	l := w.l
	// Under the client's context, which Close cancels.
	ctx, cancel := context.WithTimeout(l.c.ctx, undoTimeout)
	defer cancel()
	held, err := l.c.primary(ctx, l.name).HExists(ctx, l.name, l.field).Result()
	if err != nil || held {
		return
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	// Only while this watcher is the hold's: one stopped meanwhile (the
	// hold was released, or ended otherwise) has nothing left to report.
	l.h.watcherLost(w, fmt.Errorf("%w: the lock was deleted (force-unlocked) while held", ErrLockLost))
}
