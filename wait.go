package lualock

import (
	"context"
	"time"

	"github.com/lualock/lualock/internal/wake"
)

// waiting is the state of one acquire call between attempts: its
// subscription to the channel that announces releases and, for the fair
// lock, whether it may stand in the queue.
type waiting struct {
	l           *Lock
	sub         *wake.Waiter
	queued      bool          // fair lock: an attempt may have put the waiter in the queue
	maybeHeld   int           // the hold count an attempt with a lost reply may have reached
	lease       time.Duration // the lease that attempt set
	unreachable bool          // the last attempt failed on the network: Redis seems down
	acquired    bool
	leaseSet    time.Duration // the lease the acquisition set
	woken       bool          // a wake-up was taken and no attempt has used it yet
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
	sub, fresh, err := w.l.c.hub.Subscribe(ctx, ch)
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
		wake = w.sub.C()
	}
	select {
	case <-wake:
		w.woken = true
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.l.c.closing:
		return ErrClosed
	}
	return nil
}

// cleanupWait bounds the clean-up that end does before the acquire call
// returns; what is not done by then goes on in the background.
const cleanupWait = 100 * time.Millisecond

// end runs when the acquire call returns: it drops the subscription and,
// when the lock was not obtained, gives back a hold that an attempt with a
// lost reply may have taken, and leaves the fair queue. When Redis answered
// the last attempt, that is done when end returns. Otherwise (or when Redis
// does not answer within cleanupWait) the clean-up goes on in a goroutine of
// the client, which Close waits for; the handle's next call waits for it too.
func (w *waiting) end(ctx context.Context) {
	if w.sub != nil {
		if w.woken {
			// The call ends without acting on a release it was told of:
			// hand it back so that release passes it to another waiter.
			w.sub.Signal()
		}
		w.sub.Release(w.acquired, w.leaseSet)
	}
	l := w.l
	l.mu.Lock()
	l.acquiring--
	if l.acquiring > 0 {
		// Another call of this handle waits as the same owner, in the same
		// place in the fair queue: leaving would send it to the back.
		w.queued = false
	}
	l.mu.Unlock()
	if w.acquired || (w.maybeHeld == 0 && !w.queued) {
		return
	}
	// The clean-up may outlive the call: it copies what it needs, so that
	// w stays on the caller's stack.
	maybeHeld, lease, queued := w.maybeHeld, w.lease, w.queued
	clean := func(ctx context.Context) error {
		if maybeHeld > 0 {
			if err := l.undo(ctx, maybeHeld, lease); err != nil {
				return err
			}
		}
		if queued {
			return l.leaveQueue(ctx)
		}
		return nil
	}
	l.op.lockAlways()
	if w.maybeHeld == 0 && !w.unreachable {
		// Redis answered the last attempt: clean up before returning, so
		// that the caller finds the queue without this waiter.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupWait)
		err := clean(sctx)
		cancel()
		if err == nil {
			l.op.unlock()
			return
		}
	}
	// Hand the handle's op lock to the goroutine: the handle's next call
	// waits until the clean-up is over.
	l.c.background(func() {
		defer l.op.unlock()
		bctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
		defer cancel()
		_ = clean(bctx)
	})
}
