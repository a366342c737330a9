package lualock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
)

// watchdog renews the lease of every watched hold of a client, every
// WatchdogLease/3, in one script call per batch of locks (per cluster slot
// on a cluster), all batches in one pipeline (on a cluster, one pipeline per
// primary, sent independently). A lock the
// script reports gone is lost. When renewals fail (Redis unreachable) it
// retries sooner, and reports a hold lost lossMargin before its last
// renewed lease would run out.
type watchdog struct {
	c       *Client
	mu      sync.Mutex
	entries map[*Lock]watch
	closed  bool // set by close: add refuses new holds
	stop    chan struct{}
	done    chan struct{}
	ctx     context.Context // cancelled at close, ends calls in flight
	cancel  context.CancelFunc
	// The renewal round in flight: the locks it renews, and a channel
	// closed when its calls have returned.
	flying map[*Lock]struct{}
	landed chan struct{}
}

// lossMargin is how long before a lease runs out by the client's clock a
// hold is reported at its end: the watchdog's loss (ErrLockLost) and a fixed
// lease's end (ErrNotHeld) come that much early, so that a holder that stops
// at Done has stopped before Redis lets another owner in. It is Redlock's
// allowance, 1% of the lease plus 2ms (at most half the lease): the 1%
// covers the rate drift between the client's clock and Redis's (NTP keeps
// it under 0.05%, a free-running quartz under 0.01%) with room to spare,
// the 2ms Redis's millisecond expiry (a key set to expire at t is gone at
// t+1ms at the latest) and the lateness of the client's own timer. The
// lease is counted from the moment its call was sent, not from the reply,
// so the time the call took on its way to Redis is on the safe side too.
// For the default 30s lease it is 302ms.
func lossMargin(lease time.Duration) time.Duration {
	return min(lease/100+2*time.Millisecond, lease/2)
}

type watch struct {
	gen     uint64
	renewed time.Time // when the lease was last set: by the acquisition or a renewal
	paused  bool      // an acquisition with a fixed lease is under way: skip it
	stopped bool      // an Unlock whose ctx ended stopped its renewal: skip it for good
}

func newWatchdog(c *Client) *watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchdog{c: c, entries: map[*Lock]watch{}, stop: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	go w.run()
	return w
}

// add watches hold gen of l, whose lease was set at start (or later). It
// returns false once the watchdog is closed.
func (w *watchdog) add(l *Lock, gen uint64, start time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.entries[l] = watch{gen: gen, renewed: start}
	return true
}

// quiesce keeps renewals off l while an acquisition sets a fixed lease on
// it: it makes the next rounds skip l and waits for a round in flight that
// renews l, so that no renewal sent before the acquisition stretches the
// fixed lease to WatchdogLease afterwards. resume lets rounds renew l again
// if it is still watched. It returns ctx's error if ctx ends first.
func (w *watchdog) quiesce(ctx context.Context, l *Lock) (resume func(), err error) {
	w.mu.Lock()
	e, watched := w.entries[l]
	if watched {
		e.paused = true
		w.entries[l] = e
	}
	var landed chan struct{}
	if _, ok := w.flying[l]; ok {
		landed = w.landed
	}
	w.mu.Unlock()
	resume = func() {
		if !watched {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if e, ok := w.entries[l]; ok && !e.stopped {
			e.paused = false
			w.entries[l] = e
		}
	}
	if landed != nil {
		select {
		case <-landed:
		case <-ctx.Done():
			resume()
			return nil, ctx.Err()
		}
	}
	return resume, nil
}

// stopRenewing keeps renewals off l for good while still watching its
// lease: expire reports it when the lease runs out, unless the hold ends
// first.
func (w *watchdog) stopRenewing(l *Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entries[l]; ok {
		e.paused, e.stopped = true, true
		w.entries[l] = e
	}
}

func (w *watchdog) remove(l *Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, l)
}

func (w *watchdog) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

// close stops the loop, waits for it, and ends the watched holds with
// ErrClosed: nothing renews them any more.
func (w *watchdog) close() {
	close(w.stop)
	w.cancel()
	<-w.done
	w.mu.Lock()
	left := w.entries
	w.entries = map[*Lock]watch{}
	w.closed = true
	w.mu.Unlock()
	for l, e := range left {
		l.endHold(e.gen, fmt.Errorf("%w: the watchdog stopped renewing the lock", ErrClosed), false)
	}
}

func (w *watchdog) run() {
	defer close(w.done)
	every := w.c.cfg.renewEvery
	retry := min(every/4, time.Second)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		started := time.Now()
		var next time.Duration
		if w.round() {
			// The period counts from the start of the last round, so that
			// a slow round does not stretch it.
			next = every - time.Since(started)
		} else {
			// Renewals fail: try again soon, and be awake when the first
			// lease that was not renewed runs out.
			next = min(retry, w.untilExpiry())
		}
		w.expire()
		t.Reset(max(next, time.Millisecond))
	}
}

// round runs one renewal round in a goroutine of its own and waits for it,
// meanwhile reporting lost the holds whose lease runs out: a call that hangs
// (a Redis that stopped answering holds a go-redis call for its ReadTimeout
// unless ContextTimeoutEnabled is set) must not delay a loss past the lease.
// At close it still waits for the round, which the cancelled context or
// go-redis's timeout ends. It returns false when some call failed. (A
// renewal that lands after its hold was reported lost leaves the lock in
// Redis until that lease runs out; renewed skips the hold, which stays
// lost.)
func (w *watchdog) round() bool {
	res := make(chan bool, 1)
	go func() { res <- w.renewAll() }()
	for {
		t := time.NewTimer(max(w.untilExpiry(), time.Millisecond))
		select {
		case ok := <-res:
			t.Stop()
			return ok
		case <-t.C:
			w.expire()
		case <-w.stop:
			t.Stop()
			return <-res
		}
	}
}

// lossAfter is how long after its lease was set a hold is reported lost
// unless renewed: the lease less lossMargin.
func (w *watchdog) lossAfter() time.Duration {
	return w.c.cfg.WatchdogLease - lossMargin(w.c.cfg.WatchdogLease)
}

// untilExpiry is the time until the earliest watched hold is due to be
// reported lost (lossAfter after its lease was last set); lossAfter when
// nothing is watched.
func (w *watchdog) untilExpiry() time.Duration {
	lease := w.lossAfter()
	w.mu.Lock()
	defer w.mu.Unlock()
	left := lease
	for _, e := range w.entries {
		left = min(left, lease-time.Since(e.renewed))
	}
	return left
}

// untilExpiryOf is untilExpiry among the holds of batches.
func (w *watchdog) untilExpiryOf(batches []*batch) time.Duration {
	lease := w.lossAfter()
	w.mu.Lock()
	defer w.mu.Unlock()
	left := lease
	for _, b := range batches {
		for i, l := range b.locks {
			if e, ok := w.entries[l]; ok && e.gen == b.gens[i] {
				left = min(left, lease-time.Since(e.renewed))
			}
		}
	}
	return left
}

// expire reports lost every hold whose last renewed lease has run out, but
// for lossMargin: Redis drops it then, whatever the failed renewals said.
func (w *watchdog) expire() {
	lease := w.lossAfter()
	type gone struct {
		l   *Lock
		gen uint64
	}
	var lost []gone
	w.mu.Lock()
	for l, e := range w.entries {
		if time.Since(e.renewed) >= lease {
			delete(w.entries, l)
			lost = append(lost, gone{l, e.gen})
		}
	}
	w.mu.Unlock()
	for _, g := range lost {
		g.l.expired(g.gen, fmt.Errorf("%w: %w", ErrLockLost, errLostRenewalsFailed))
	}
}

// batch is one renewal script call: lock_renew, or for read holds of a
// read-write lock (read) rwlock_read_renew.
type batch struct {
	locks []*Lock
	gens  []uint64
	read  bool
	keys  generated.LockRenewKeys
	args  generated.LockRenewArgs
	cmd   *redis.Cmd
}

// readRenewer is implemented by the protocols whose holds the watchdog
// renews with rwlock_read_renew rather than lock_renew (the read lock).
type readRenewer interface{ readRenewal() bool }

func renewsReads(l *Lock) bool {
	r, ok := l.p.(readRenewer)
	return ok && r.readRenewal()
}

// queue queues b's renewal call on p.
func (b *batch) queue(ctx context.Context, p redis.Pipeliner) {
	if !b.read {
		b.cmd = generated.LockRenewCmd(ctx, p, b.keys, b.args)
		return
	}
	ks := make([]string, 0, 2*len(b.keys.Locks))
	for _, name := range b.keys.Locks {
		ks = append(ks, name, keys.RWTimeoutPrefix(name))
	}
	b.cmd = generated.RwlockReadRenewCmd(ctx, p, generated.RwlockReadRenewKeys{Keys: ks},
		generated.RwlockReadRenewArgs{LeaseMS: b.args.LeaseMS, Fields: b.args.Fields})
}

// result reads b's reply.
func (b *batch) result() ([]int64, error) {
	if b.read {
		return generated.RwlockReadRenewResult(b.cmd)
	}
	return generated.LockRenewResult(b.cmd)
}

// renewAll renews every watched hold once. It returns false when some call
// failed, so that the loop retries sooner.
//
// On a cluster the batches go to their nodes independently, one pipeline
// per primary, each in its own goroutine with its own deadline: a node
// that is down or slow fails (or delays) only the renewals of the locks it
// serves, never those of the others (a go-redis cluster pipeline that hits
// its deadline on one node sets that error on all its commands). Each
// node's replies are applied as soon as they land.
func (w *watchdog) renewAll() bool {
	batches := w.batches()
	if len(batches) == 0 {
		return true
	}
	defer w.land()
	groups := w.byNode(batches)
	if len(groups) == 1 {
		return w.renewGroup(groups[0])
	}
	var wg sync.WaitGroup
	oks := make([]bool, len(groups))
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			oks[i] = w.renewGroup(g)
		}()
	}
	wg.Wait()
	for _, ok := range oks {
		if !ok {
			return false
		}
	}
	return true
}

// nodeGroup is the batches served by one node, and that node's client
// (nil when not on a cluster, or when the node is not known).
type nodeGroup struct {
	node    *redis.Client
	batches []*batch
}

// byNode groups the batches by the primary that serves their slot, as the
// cluster client last knew it: one group in all when not on a cluster.
func (w *watchdog) byNode(batches []*batch) []nodeGroup {
	cc, ok := w.c.rdb.(*redis.ClusterClient)
	if !ok {
		return []nodeGroup{{batches: batches}}
	}
	var out []nodeGroup
	index := map[string]int{}
	for _, b := range batches {
		node, err := cc.MasterForKey(w.ctx, b.keys.Locks[0])
		addr := ""
		if err == nil {
			addr = node.Options().Addr
		} else {
			node = nil
		}
		i, seen := index[addr]
		if !seen {
			i = len(out)
			index[addr] = i
			out = append(out, nodeGroup{node: node})
		}
		out[i].batches = append(out[i].batches, b)
	}
	return out
}

// renewGroup sends one node's batches in one pipeline and applies the
// replies. It returns false when some call failed.
func (w *watchdog) renewGroup(g nodeGroup) bool {
	start := time.Now() // the leases are set at start or later
	// A call may take no longer than the time to the first expiry among
	// these holds, so that a hung node cannot delay their loss past the
	// lease.
	ctx, cancel := context.WithTimeout(w.ctx, max(min(w.c.cfg.renewEvery, w.untilExpiryOf(g.batches)), time.Millisecond))
	defer cancel()
	err := w.send(ctx, g.batches)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		var loader redis.Scripter = w.c.rdb
		if g.node != nil {
			loader = g.node // only the node that lost its scripts
		}
		if err = generated.LockRenewScript.Load(ctx, loader); err == nil {
			err = generated.RwlockReadRenewScript.Load(ctx, loader)
		}
		if err == nil {
			_ = w.send(ctx, g.batches) // each batch's result is read from its cmd below
		}
	}
	took := time.Since(start)
	ok := true
	for _, b := range g.batches {
		res, err := b.result()
		if err == nil && len(res) != len(b.locks) {
			err = fmt.Errorf("renewal reply has %d results for %d locks", len(res), len(b.locks))
		}
		w.renewCalled(b, took, err)
		if err != nil {
			ok = false // the holds wait for the next try; expire ends those whose lease ran out
			continue
		}
		w.renewed(b, res, start)
	}
	return ok
}

// land ends the round in flight: acquisitions waiting for it go on.
func (w *watchdog) land() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.landed != nil {
		close(w.landed)
		w.landed, w.flying = nil, nil
	}
}

// send runs every batch in one pipeline and returns the first error.
func (w *watchdog) send(ctx context.Context, batches []*batch) error {
	_, err := w.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, b := range batches {
			b.queue(ctx, p)
		}
		return nil
	})
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	return err
}

// batches groups the watched holds into renewal calls: per slot on a
// cluster, one lock each on a Ring, otherwise as one group; none larger
// than RenewBatch.
func (w *watchdog) batches() []*batch {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Batches per renewal script (read holds apart), and per slot on a cluster.
	group := func(l *Lock) int { return int(b2i(renewsReads(l))) }
	limit := w.c.cfg.RenewBatch
	if _, ok := w.c.rdb.(*redis.ClusterClient); ok {
		group = func(l *Lock) int { return 2*slot(l.name) + int(b2i(renewsReads(l))) }
	}
	open := map[int]*batch{}
	var out []*batch
	lease := w.c.cfg.WatchdogLease.Milliseconds()
	for l, e := range w.entries {
		if e.paused {
			continue
		}
		if w.flying == nil {
			w.flying, w.landed = map[*Lock]struct{}{}, make(chan struct{})
		}
		w.flying[l] = struct{}{}
		g := group(l)
		b := open[g]
		if b == nil || len(b.locks) >= limit {
			b = &batch{args: generated.LockRenewArgs{LeaseMS: lease}, read: renewsReads(l)}
			open[g] = b
			out = append(out, b)
		}
		b.locks = append(b.locks, l)
		b.gens = append(b.gens, e.gen)
		b.keys.Locks = append(b.keys.Locks, l.name)
		b.args.Fields = append(b.args.Fields, l.countField())
	}
	return out
}

func (w *watchdog) renewed(b *batch, res []int64, at time.Time) {
	var lost []int
	w.mu.Lock()
	for i, l := range b.locks {
		e, ok := w.entries[l]
		if !ok || e.gen != b.gens[i] {
			continue // unlocked meanwhile
		}
		if res[i] == 1 {
			e.renewed = at
			w.entries[l] = e
			continue
		}
		delete(w.entries, l)
		lost = append(lost, i)
	}
	w.mu.Unlock()
	for _, i := range lost {
		b.locks[i].endHold(b.gens[i], fmt.Errorf("%w: %w", ErrLockLost, errLostGone), true)
	}
}
