package lualock

import (
	"context"
	"time"
)

// waiting is the state of one acquire call between attempts: its
// subscription to the channel that announces releases and, for the fair
// lock, whether it may stand in the queue.
type waiting struct {
	l        *Lock
	sub      *subscription
	queued   bool // fair lock: an attempt may have put the waiter in the queue
	acquired bool
}

// subscribe listens on the channel that announces the lock's release to
// this waiter: the lock's channel, or for the fair lock the waiter's own. It
// reports whether the subscription is new, in which case a release may have
// gone unheard since the last attempt.
func (w *waiting) subscribe(ctx context.Context) (fresh bool, err error) {
	ch := w.l.channel
	if w.l.kind == fair {
		ch = w.l.waiterChannel()
	}
	sub, fresh, err := w.l.c.subs.subscribe(ctx, ch)
	if err != nil {
		return false, err
	}
	w.sub = sub
	return fresh, nil
}

// sleep waits for a wake-up on the subscription (when pause < 0) or for
// pause, and never past deadline (when set). It returns ctx's error when ctx
// ends and ErrClosed when the client closes.
func (w *waiting) sleep(ctx context.Context, pause time.Duration, deadline time.Time) error {
	d := pause
	if !deadline.IsZero() {
		if until := time.Until(deadline); d < 0 || until < d {
			d = max(until, 0)
		}
	}
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var wake <-chan struct{}
	if pause < 0 && w.sub != nil {
		wake = w.sub.wake
	}
	select {
	case <-wake:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.l.c.closing:
		return ErrClosed
	}
	return nil
}

// end runs when the acquire call returns: it drops the subscription and, for
// a fair waiter that did not get the lock, leaves the queue.
func (w *waiting) end(ctx context.Context) {
	if w.sub != nil {
		w.sub.release(w.acquired)
	}
	if w.queued && !w.acquired {
		w.l.giveUp(ctx)
	}
}
