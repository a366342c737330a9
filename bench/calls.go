package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// callTimeout bounds every Lock, TryLock, Unlock and renewal call the bench
// makes, for every library, so that one stuck call cannot hold a run up.
// The only calls it does not bound are the waits a workload is about
// (the waiters of fair-queue-depth and waiting-at-scale), which end with
// their phase instead.
//
// The context of a Lock or TryLock call is cancelled when the call
// overruns, not when it returns: rueidislock derives a hold's context from
// the one it waited with, and the hold must outlive the call.
const callTimeout = 3 * time.Second

// errOverran is counted for a call that succeeded only after callTimeout,
// when its context was already cancelled.
var errOverran = errors.New("call returned after the per-call bound")

// calls counts the failed calls of one library's run. A stall is a failed
// call that hit callTimeout while the run itself went on.
type calls struct {
	errs, stalls atomic.Int64
	first        atomic.Pointer[error]
}

// do runs f under a context that is cancelled if f runs for callTimeout
// (and, unless acquire, when f returns), and counts its error, unless ctx
// ended first: the end of the run is not an error of the library.
func (c *calls) do(ctx context.Context, acquire bool, f func(context.Context) error) error {
	cctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(callTimeout, cancel)
	err := f(cctx)
	overran := !t.Stop()
	if err != nil || !acquire {
		cancel()
	}
	if ctx.Err() == nil {
		c.count(err, overran)
	}
	return err
}

// count records the outcome of a call; overran says it hit callTimeout.
func (c *calls) count(err error, overran bool) {
	switch {
	case err == nil && !overran:
		return
	case err == nil:
		err = errOverran
	}
	c.fail(err, overran)
}

// fail counts an error; stalled says the call hit callTimeout.
func (c *calls) fail(err error, stalled bool) {
	c.errs.Add(1)
	if stalled {
		c.stalls.Add(1)
	}
	c.first.CompareAndSwap(nil, &err)
}

func (c *calls) lock(ctx context.Context, m mutex) error   { return c.do(ctx, true, m.lock) }
func (c *calls) unlock(ctx context.Context, m mutex) error { return c.do(ctx, false, m.unlock) }
func (c *calls) renew(ctx context.Context, m mutex) error  { return c.do(ctx, false, m.renew) }

func (c *calls) tryLock(ctx context.Context, m mutex) (ok bool, err error) {
	err = c.do(ctx, true, func(cctx context.Context) error {
		var e error
		ok, e = m.tryLock(cctx)
		return e
	})
	return ok, err
}

// slot is the call context of one goroutine of a measured loop, where a
// context and a timer per call would add their allocations and CPU to the
// numbers: one context serves every call of the goroutine, and watch
// cancels it when a call has run for callTimeout.
type slot struct {
	ctx      context.Context // only the slot's goroutine reads and replaces it
	deadline time.Time       // of ctx: the end of the run, with a margin
	mu       sync.Mutex      // guards cancel
	cancel   context.CancelFunc
	since    atomic.Int64 // start of the call in progress (UnixNano); 0: none
}

// newSlot returns a slot whose context ends at deadline at the latest.
// (Callers give Lock a deadline, as applications do: without one,
// redislock's Obtain makes one of its own on every call.)
func newSlot(deadline time.Time) *slot {
	s := &slot{deadline: deadline}
	s.ctx, s.cancel = context.WithDeadline(context.Background(), deadline)
	return s
}

func (s *slot) lock(c *calls, m mutex) error {
	s.since.Store(time.Now().UnixNano())
	return s.done(c, m.lock(s.ctx))
}

func (s *slot) unlock(c *calls, m mutex) error {
	s.since.Store(time.Now().UnixNano())
	return s.done(c, m.unlock(s.ctx))
}

// done counts a call's outcome and, when watch cancelled the context,
// gives the slot a fresh one.
func (s *slot) done(c *calls, err error) error {
	s.since.Store(0)
	overran := s.ctx.Err() != nil
	c.count(err, overran)
	if overran {
		s.mu.Lock()
		s.ctx, s.cancel = context.WithDeadline(context.Background(), s.deadline)
		s.mu.Unlock()
	}
	return err
}

// watch cancels the context of every slot whose call has run for
// callTimeout, every callTimeout/30, until stop is called.
func watch(slots []*slot) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(callTimeout / 30)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				for _, s := range slots {
					if st := s.since.Load(); st != 0 && now.UnixNano()-st >= int64(callTimeout) {
						s.mu.Lock()
						s.cancel()
						s.mu.Unlock()
					}
				}
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
	}
}

// recCalls records a run's errors and stalls (zero included, so that the
// median is over every round) and notes its first error.
func (e *env) recCalls(workload, library string, c *calls) {
	n, s := c.errs.Load(), c.stalls.Load()
	e.rec(workload, library, "errors", float64(n))
	e.rec(workload, library, "stalls", float64(s))
	if p := c.first.Load(); p != nil {
		e.note(workload, "%s: round %d: %d failed calls, %d of them stalls (cut at the %v per-call bound); first: %v",
			library, e.round, n, s, callTimeout, *p)
	}
}
