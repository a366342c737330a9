package lualock

import (
	"context"
	"time"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/wake"
)

// The semaphores' and the latch's side of the acquisition engine
// (engine.go): they have no owner field, hold count or hold, so they are
// not *Lock handles; each call hands the engine a waitFuncs. A semaphore
// waiter also keeps the anti-starvation claim (claim), which both
// semaphores share.

const (
	// claimRefresh is how often, at most, the semaphore waiter that holds
	// the claim (its last refusal said so) attempts again without a
	// message, on a timer of its own, to keep its claim (capped by
	// Options.MaxWaitTimer); other waiters wait for a message or the hub's
	// fallback timer (Options.MaxWaitTimer, or the hint of the reply).
	claimRefresh = time.Second
	// claimPolls: a waiter's claim lives this many refreshes, so that it
	// outlives the waiter's pauses and lapses soon after a dead waiter's.
	claimPolls = 3
)

// waitFuncs is a contender (engine.go) made of funcs: a semaphore's
// acquire or a latch's Await. Every release message wakes every waiter of
// the client (a release may serve several); the fallback timer is from
// 1ms, capped by Options.MaxWaitTimer.
type waitFuncs struct {
	ch       string
	maxTimer time.Duration
	attempt  func(ctx context.Context) outcome
	clean    func(ctx context.Context, g leftover) error // nil: nothing to clean up
}

func (w *waitFuncs) try(ctx context.Context, _ time.Duration) outcome { return w.attempt(ctx) }
func (w *waitFuncs) waitSpec() waitSpec                               { return waitSpec{channel: w.ch, mode: wake.WakeAll} }
func (w *waitFuncs) timer(time.Duration) (floor, ceil time.Duration) {
	return time.Millisecond, w.maxTimer
}
func (w *waitFuncs) enter()      {}
func (w *waitFuncs) exit() bool  { return false }
func (w *waitFuncs) holdOps()    {}
func (w *waitFuncs) releaseOps() {}

// grants: a semaphore's attempt takes permits, which its clean-up step
// gives back; a latch's takes nothing and has none.
func (w *waitFuncs) grants() bool { return w.clean != nil }

// revoke gives back the permits the last attempt took, as the give-up
// step does for an attempt whose reply was lost.
func (w *waitFuncs) revoke(ctx context.Context) error {
	return w.clean(ctx, leftover{unknown: true})
}
func (w *waitFuncs) giveUp(ctx context.Context, g leftover) error {
	if w.clean == nil {
		return nil
	}
	return w.clean(ctx, g)
}

// claim is a semaphore waiter's anti-starvation claim: a refused waiter
// claims its permits when no larger claim exists, and lualock's other
// acquisitions must then leave them. The waiter that holds it (its last
// refusal said so) keeps it alive by retrying on a timer of its own; the
// give-up step drops it.
type claim struct {
	c      *Client
	key    string // the semaphore's claim key
	waiter string // this waiter's id
	ms     int64  // the claim's lifetime sent with each attempt; 0: never claims (a wait of 0)
}

func newClaim(c *Client, key, waiter string, wait time.Duration) claim {
	cl := claim{c: c, key: key, waiter: waiter}
	if wait != 0 {
		cl.ms = claimPolls * cl.refresh().Milliseconds()
	}
	return cl
}

// refresh is how often the claimer retries to keep its claim.
func (cl claim) refresh() time.Duration { return min(claimRefresh, cl.c.cfg.MaxWaitTimer) }

// refused is the outcome of a refusal that says whether this waiter holds
// the claim, and hints at the nearest permit deadline (negative: none).
func (cl claim) refused(held bool, hint time.Duration) outcome {
	o := outcome{wait: hint, queued: held}
	if held {
		// Keep the claim alive: it lapses after claimPolls refreshes.
		o.poll = cl.refresh()
		if hint >= 0 {
			o.poll = min(o.poll, hint+time.Millisecond)
		}
	}
	return o
}

// failed is the outcome of an attempt that met err: without Redis's
// reply it may have taken permits, and may have claimed.
func (cl claim) failed(err error) outcome {
	if isRedisError(err) {
		return outcome{sent: sentRefused, err: err} // refused: it changed nothing
	}
	return outcome{sent: sentUnknown, queued: cl.ms > 0, err: err}
}

// drop gives up the claim, if this waiter holds it.
func (cl claim) drop(ctx context.Context) error {
	_, err := generated.SemaphoreUnclaim(ctx, cl.c.env.calls, generated.SemaphoreUnclaimKeys{Claim: cl.key}, generated.SemaphoreUnclaimArgs{Waiter: cl.waiter})
	return err
}
