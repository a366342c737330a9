// Package renew is lualock's watchdog: one goroutine per client that keeps
// the leases of held keys alive and says when one ends.
//
// An entry is a key, an owner field, a renewal spec (the script that
// renews, how to queue it and read its reply) and a callback for how the
// entry ended. The watchdog knows nothing of locks. Every Lease/3 it renews
// every entry that is not paused: one script call per spec and cluster
// slot, at most Config.Batch entries each, the calls of one primary in one
// pipeline. On a cluster each primary's pipeline runs in its own goroutine
// with its own deadline, so a dead or slow node delays and fails only the
// entries it serves.
//
// An entry ends once, with one End:
//   - Gone: a renewal found the owner field gone (expired, deleted, wiped);
//   - Expired: its last renewed lease ran out, less LossMargin, with no
//     renewal confirmed (Redis unreachable, or the entry stopped);
//   - Closed: the watchdog was closed.
//
// A lease counts from the moment the call that set it was sent, not from
// its reply. When renewals fail the watchdog tries again sooner, and a round
// that hangs (a node that stopped answering) does not delay an Expired past
// its due time. A node's call that outlives its deadline (a client without
// ContextTimeoutEnabled waits for its ReadTimeout) is left to land on its
// own after a period and a quarter: the next rounds renew the other nodes'
// entries and skip the ones it carries.
//
// A Relay (the hold tracker's) is offered each call first: it sends the
// call on its own connection to the node, with the script asked to read
// the keys again after its writes (rearm). A call it cannot carry, or that
// fails there, goes through the client, in the same round. A Relay that is
// a Rounder is told first, once per node and round.
package renew

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// End tells how an entry ended.
type End int

// The ways an entry ends.
const (
	Gone    End = iota + 1 // a renewal found the owner field gone
	Expired                // its lease ran out, less LossMargin, unrenewed
	Closed                 // the watchdog was closed
)

// String returns "gone", "expired" or "closed".
func (e End) String() string {
	switch e {
	case Gone:
		return "gone"
	case Expired:
		return "expired"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("End(%d)", int(e))
}

// Loader loads a script on a node that answered NOSCRIPT. The generated
// wrappers' *Script values are Loaders.
type Loader interface {
	Load(ctx context.Context, c redis.Scripter) error
}

// Spec is how one kind of entry is renewed: a script that renews many keys
// of one slot in one call.
type Spec struct {
	// Name labels the spec's calls in OnRenew.
	Name string
	// Script is loaded again on a node that answered NOSCRIPT.
	Script Loader
	// Cmd queues one renewal call on p for keys and their owner fields
	// (same length, all keys in one slot) that sets lease on each key
	// whose owner still holds it, and with rearm reads the keys again
	// after its writes (the call goes to a Relay). It sends EVALSHA with
	// no NOSCRIPT recovery: the watchdog does that.
	Cmd func(ctx context.Context, p redis.Pipeliner, keys, fields []string, lease time.Duration, rearm bool) *redis.Cmd
	// Result reads a Cmd's reply: per key, in order, 1 when it was renewed
	// and 0 when its owner field was gone (the generated LockRenewResult).
	Result func(cmd *redis.Cmd) ([]int64, error)
}

// Target is what an entry renews: Key for the owner Field, with Spec.
type Target struct {
	Spec       *Spec
	Key, Field string
}

// Call describes one renewal call, for Config.OnRenew.
type Call struct {
	Spec *Spec
	// Keys and Fields are the call's targets, in order. They belong to the
	// watchdog: read them during OnRenew, don't keep them.
	Keys, Fields []string
	// Took is the call's round trip: from sending its pipeline to the
	// reply (or the error).
	Took time.Duration
	// Err is nil when Redis answered; the call's targets found gone end
	// with Gone.
	Err error
}

// Config configures a Watchdog.
type Config struct {
	// Lease is the lease each renewal sets. The watchdog renews every
	// Lease/3. It must be positive.
	Lease time.Duration
	// Batch is the most entries one script call renews. Default 500.
	Batch int
	// Slot returns the cluster slot of key, so that a call's keys share
	// one. Nil when not on a cluster: then calls are batched by spec only.
	Slot func(key string) int
	// OnRenew, when set, is called after each renewal call, from the
	// watchdog's goroutines (several at once on a cluster). It must return
	// quickly and must not call the watchdog.
	OnRenew func(Call)
	// Relay, when set, is offered each renewal call first.
	Relay Relay
}

// Relay carries renewal calls on connections of its own (the hold
// tracker's).
type Relay interface {
	// Send sends cmd, a renewal call of spec for keys and fields queued
	// with rearm (cmd.Args() is the command), and returns the call; nil
	// when it cannot carry the call, having sent nothing.
	Send(spec *Spec, keys, fields []string, cmd *redis.Cmd) Relayed
}

// Rounder is a Relay told when the calls of one node's round are about to
// be offered to it (Round may ask Redis, within ctx, the round's): a
// Relay that carries calls only while its connection reaches the node the
// client reaches learns that here, once per round.
type Rounder interface {
	Round(ctx context.Context)
}

// Relayed is a call a Relay sent.
type Relayed interface {
	// Wait waits for the call's reply and sets it (or the error) on its
	// cmd; it reports false, cmd failed with ctx's error, when ctx ends
	// first.
	Wait(ctx context.Context) bool
	// Cancel withdraws the call if it is not written yet and reports
	// whether it will not run; false: it may run, and its reply (or the
	// news that none will come) is still to come to Wait.
	Cancel() bool
}

// LossMargin is how long before a lease runs out by the client's clock a
// hold is reported at its end: the watchdog's loss (Expired, which the lock
// reports as ErrLockLost) and a fixed lease's end (ErrNotHeld) come that
// much early, so that a holder that stops at Done has stopped before Redis
// lets another owner in. It is Redlock's allowance, 1% of the lease plus
// 2ms (at most half the lease): the 1% covers the rate drift between the
// client's clock and Redis's (NTP keeps it under 0.05%, a free-running
// quartz under 0.01%) with room to spare, the 2ms Redis's millisecond
// expiry (a key set to expire at t is gone at t+1ms at the latest) and the
// lateness of the client's own timer. The lease is counted from the moment
// its call was sent, not from the reply, so the time the call took on its
// way to Redis is on the safe side too. For the default 30s lease it is
// 302ms.
func LossMargin(lease time.Duration) time.Duration {
	return min(lease/100+2*time.Millisecond, lease/2)
}

// Watchdog renews the leases of its entries from one goroutine (and, on a
// cluster, one more per primary during a round) until Close.
type Watchdog struct {
	rdb   redis.UniversalClient
	cfg   Config
	every time.Duration
	// node names the primary that serves key and the client that loads a
	// script on it alone: the cluster's MasterForKey, or ("", rdb). Tests
	// replace it.
	node func(ctx context.Context, key string) (string, redis.Scripter)

	mu      sync.Mutex
	entries map[*Entry]struct{}
	closed  bool // set by Close: Add refuses new entries

	closeOnce sync.Once
	calls     sync.WaitGroup // the nodes' calls of the rounds, some maybe outliving theirs
	stop      chan struct{}
	done      chan struct{}
	ctx       context.Context // cancelled by Close, ends calls in flight
	cancel    context.CancelFunc
}

// Entry is one renewed key. The zero value is ready for Add. An owner
// keeps one Entry and adds it again for each of its holds, once the last
// one ended or was removed: a hold costs no allocation, and a Pause of the
// entry also covers a renewal of an earlier hold still in flight. Its
// methods are safe for concurrent use.
type Entry struct {
	w atomic.Pointer[Watchdog] // set by the first Add

	// Under w.mu.
	t       Target
	tag     uint64 // handed back to onEnd
	onEnd   func(tag uint64, how End)
	inc     uint64          // counts the Adds: a reply for an earlier one is stale
	live    bool            // in w.entries: onEnd not called yet
	renewed time.Time       // when its lease was last set (the sending of the call)
	paused  bool            // Pause or Stop: no round takes it
	stopped bool            // Stop: Resume does not lift the pause
	flight  chan struct{}   // closed when the call carrying it lands; nil when none is in flight
	late    []chan struct{} // each closed when a relayed call that may still run is answered
}

// New starts a watchdog on rdb. It returns an error for a Lease that is
// not positive or a negative Batch.
func New(rdb redis.UniversalClient, cfg Config) (*Watchdog, error) {
	if cfg.Lease <= 0 {
		return nil, fmt.Errorf("renew: lease %v, want > 0", cfg.Lease)
	}
	if cfg.Batch < 0 {
		return nil, fmt.Errorf("renew: batch %d, want >= 0", cfg.Batch)
	}
	if cfg.Batch == 0 {
		cfg.Batch = 500
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watchdog{
		rdb: rdb, cfg: cfg, every: cfg.Lease / 3,
		entries: map[*Entry]struct{}{},
		stop:    make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
	w.node = w.primary
	go w.run()
	return w, nil
}

// primary is the default node: on a cluster the primary that serves key as
// the cluster client last knew it, elsewhere one node for all.
func (w *Watchdog) primary(ctx context.Context, key string) (string, redis.Scripter) {
	if cc, ok := w.rdb.(*redis.ClusterClient); ok {
		if n, err := cc.MasterForKey(ctx, key); err == nil {
			return n.Options().Addr, n
		}
	}
	return "", w.rdb
}

// Add watches e for t, whose lease was set at renewedAt (or later), and
// calls onEnd(tag, how) once when the entry ends, unless Remove comes first.
// onEnd runs on a goroutine of the watchdog (or of Close) with no lock of
// the watchdog held; it may call the entry's methods, and tells the holds of
// a reused entry apart by tag. e must not be live (added, and not ended or
// removed since) and belongs to this watchdog from its first Add on. Add
// returns false, watching nothing, after Close.
func (w *Watchdog) Add(e *Entry, t Target, tag uint64, renewedAt time.Time, onEnd func(tag uint64, how End)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if !e.w.CompareAndSwap(nil, w) && e.w.Load() != w {
		panic("renew: Add of an entry of another watchdog")
	}
	if e.live {
		panic("renew: Add of a live entry")
	}
	e.t, e.tag, e.onEnd = t, tag, onEnd
	e.inc++
	e.live, e.renewed = true, renewedAt
	e.paused, e.stopped = false, false
	w.entries[e] = struct{}{}
	return true
}

// Len returns the number of entries watched, stopped ones included.
func (w *Watchdog) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

// Pause keeps renewals off e until Resume: the next rounds skip it, and
// Pause waits for a round in flight whose call carries e, and for a
// relayed call of e that got no reply in its round but may still run, so
// that no renewal sent before Pause returned sets e's lease afterwards.
// It waits for no other call. This holds for an entry removed or ended too, whose
// last renewal may still be in flight. While paused, e still ends with
// Expired when its last renewed lease runs out. Pause returns ctx's error,
// e not paused, if ctx ends first; on an entry never added it does
// nothing.
func (e *Entry) Pause(ctx context.Context) error {
	w := e.w.Load()
	if w == nil {
		return nil
	}
	w.mu.Lock()
	e.paused = true
	flight, late := e.flight, slices.Clone(e.late) // none: no allocation
	w.mu.Unlock()
	for _, ch := range late {
		if err := e.await(ctx, ch); err != nil {
			return err
		}
	}
	return e.await(ctx, flight)
}

// await waits for ch (nil: nothing), or, e no longer paused, for ctx.
func (e *Entry) await(ctx context.Context, ch chan struct{}) error {
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		e.Resume()
		return ctx.Err()
	}
}

// Resume lets rounds renew e again after Pause, unless it was stopped.
func (e *Entry) Resume() {
	w := e.w.Load()
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !e.stopped {
		e.paused = false
	}
}

// Stop keeps renewals off e for good (until it is added again); e still
// ends with Expired when its last renewed lease runs out, unless removed
// first. A renewal in flight may still land and count.
func (e *Entry) Stop() {
	w := e.w.Load()
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e.paused, e.stopped = true, true
}

// Renewed returns when e's lease was last set: the sending of the call
// that set it (zero for an entry never added).
func (e *Entry) Renewed() time.Time {
	w := e.w.Load()
	if w == nil {
		return time.Time{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return e.renewed
}

// Remove forgets e. It returns true when e was live: its onEnd is then
// never called. It returns false when e had ended already (its onEnd has
// been called or is being called), was removed before, or was never added.
func (e *Entry) Remove() bool {
	w := e.w.Load()
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !e.live {
		return false
	}
	w.drop(e)
	return true
}

// drop takes e out of the watchdog: it has ended, or was removed. w.mu is
// held.
func (w *Watchdog) drop(e *Entry) {
	e.live = false
	delete(w.entries, e)
}

// ending is an entry's onEnd and tag, taken when it ended: the entry may be
// added again before onEnd runs.
type ending struct {
	onEnd func(uint64, End)
	tag   uint64
}

// ended drops e, which ended, and returns its ending. w.mu is held.
func (w *Watchdog) ended(e *Entry) ending {
	w.drop(e)
	return ending{e.onEnd, e.tag}
}

// end calls the onEnd of entries that ended, with no lock held.
func end(ends []ending, how End) {
	for _, x := range ends {
		x.onEnd(x.tag, how)
	}
}

// Close stops the watchdog: it stops the loop, cancels the calls in
// flight, waits for its goroutines to exit, then ends every entry with
// Closed. Add returns false afterwards. Calling it again waits for nothing
// and does nothing.
func (w *Watchdog) Close() {
	first := false
	w.closeOnce.Do(func() {
		first = true
		close(w.stop)
		w.cancel()
	})
	if !first {
		return
	}
	<-w.done
	w.calls.Wait()
	w.mu.Lock()
	w.closed = true
	left := make([]ending, 0, len(w.entries))
	for e := range w.entries {
		left = append(left, w.ended(e))
	}
	w.mu.Unlock()
	end(left, Closed)
}

func (w *Watchdog) run() {
	defer close(w.done)
	retry := min(w.every/4, time.Second)
	t := time.NewTimer(w.every)
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
			// The period counts from the start of the last round, so that a
			// slow round does not stretch it.
			next = w.every - time.Since(started)
		} else {
			// Renewals fail: try again soon, and be awake when the first
			// lease that was not renewed runs out.
			next = min(retry, w.untilExpiry(nil))
		}
		w.expire()
		t.Reset(max(next, time.Millisecond))
	}
}

// round runs one renewal round in a goroutine of its own and waits for it,
// meanwhile ending with Expired the entries whose lease runs out: a call
// that hangs (a Redis that stopped answering holds a go-redis call for its
// ReadTimeout unless ContextTimeoutEnabled is set) must not delay that past
// the lease. At Close it still waits for the round, which the cancelled
// context or go-redis's timeout ends. It returns false when some call
// failed. (A renewal that lands after its entry ended leaves the key in
// Redis until that lease runs out; the entry stays ended.)
func (w *Watchdog) round() bool {
	res := make(chan bool, 1)
	go func() { res <- w.renewAll() }()
	for {
		t := time.NewTimer(max(w.untilExpiry(nil), time.Millisecond))
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

// lossAfter is how long after its lease was set an entry ends with Expired
// unless renewed: the lease less LossMargin.
func (w *Watchdog) lossAfter() time.Duration {
	return w.cfg.Lease - LossMargin(w.cfg.Lease)
}

// untilExpiry is the time until the earliest of the live entries of
// batches (all entries when batches is nil) is due to end with Expired;
// lossAfter when there is none.
func (w *Watchdog) untilExpiry(batches []*batch) time.Duration {
	lease := w.lossAfter()
	left := lease
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if batches == nil {
		for e := range w.entries {
			left = min(left, lease-now.Sub(e.renewed))
		}
		return left
	}
	for _, b := range batches {
		for i, e := range b.entries {
			if e.live && e.inc == b.incs[i] {
				left = min(left, lease-now.Sub(e.renewed))
			}
		}
	}
	return left
}

// expire ends with Expired every entry whose last renewed lease has run
// out, but for LossMargin: Redis drops it then, whatever the failed
// renewals said.
func (w *Watchdog) expire() {
	lease := w.lossAfter()
	var ended []ending
	now := time.Now()
	w.mu.Lock()
	for e := range w.entries {
		if now.Sub(e.renewed) >= lease {
			ended = append(ended, w.ended(e))
		}
	}
	w.mu.Unlock()
	end(ended, Expired)
}

// batch is one renewal script call.
type batch struct {
	spec    *Spec
	entries []*Entry
	incs    []uint64 // each entry's Add count when taken
	keys    []string
	fields  []string
	cmd     *redis.Cmd
	relayed Relayed       // the Relay's call, until its wait; nil: sent by the client
	late    Relayed       // a relayed call that may still run: the batch's entries' late call until answered
	landed  chan struct{} // closed when the call's reply is applied
}

// batches groups the entries that are not paused into renewal calls: per
// spec and slot, none larger than Batch. Each entry taken is marked in
// flight until its batch lands.
func (w *Watchdog) batches() []*batch {
	type group struct {
		spec *Spec
		slot int
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	open := map[group]*batch{}
	var out []*batch
	for e := range w.entries {
		if e.paused || e.flight != nil {
			continue // paused, or carried by a call of an earlier round still in flight
		}
		g := group{spec: e.t.Spec}
		if w.cfg.Slot != nil {
			g.slot = w.cfg.Slot(e.t.Key)
		}
		b := open[g]
		if b == nil || len(b.entries) >= w.cfg.Batch {
			b = &batch{spec: e.t.Spec, landed: make(chan struct{})}
			open[g] = b
			out = append(out, b)
		}
		b.entries = append(b.entries, e)
		b.incs = append(b.incs, e.inc)
		b.keys = append(b.keys, e.t.Key)
		b.fields = append(b.fields, e.t.Field)
		e.flight = b.landed
	}
	return out
}

// renewAll renews every entry that is not paused once. It returns false
// when some call failed, so that the loop retries sooner.
//
// The batches go to their nodes independently, one pipeline per primary,
// each in its own goroutine with its own deadline: a node that is down or
// slow fails (or delays) only the renewals of the keys it serves, never
// those of the others (a go-redis cluster pipeline that hits its deadline
// on one node sets that error on all its commands). Each node's replies are
// applied as soon as they land.
func (w *Watchdog) renewAll() bool {
	batches := w.batches()
	if len(batches) == 0 {
		return true
	}
	groups := w.byNode(batches)
	if len(groups) == 1 {
		return w.renewGroup(groups[0])
	}
	oks := make(chan bool, len(groups))
	for _, g := range groups {
		w.calls.Add(1)
		go func() {
			defer w.calls.Done()
			oks <- w.renewGroup(g)
		}()
	}
	// A node's call ends by its deadline (at most a period), unless the
	// client ignores deadlines (no ContextTimeoutEnabled: a hung node holds
	// it for ReadTimeout). Past the period and a quarter, the round ends
	// without it: the next rounds renew the other nodes' entries, and skip
	// those it carries until it lands.
	late := time.NewTimer(w.every + w.every/4)
	defer late.Stop()
	ok := true
	for range groups {
		select {
		case o := <-oks:
			ok = ok && o
		case <-late.C:
			return false
		}
	}
	return ok
}

// nodeGroup is the batches served by one node, and the client that loads
// a script on that node alone.
type nodeGroup struct {
	loader  redis.Scripter
	batches []*batch
}

// byNode groups the batches by the node that serves their keys.
func (w *Watchdog) byNode(batches []*batch) []nodeGroup {
	var out []nodeGroup
	index := map[string]int{}
	for _, b := range batches {
		addr, loader := w.node(w.ctx, b.keys[0])
		i, seen := index[addr]
		if !seen {
			i = len(out)
			index[addr] = i
			out = append(out, nodeGroup{loader: loader})
		}
		out[i].batches = append(out[i].batches, b)
	}
	return out
}

// renewGroup sends one node's batches in one pipeline and applies the
// replies. It returns false when some call failed.
func (w *Watchdog) renewGroup(g nodeGroup) bool {
	defer w.landAll(g.batches)
	start := time.Now() // the leases are set at start or later
	// A call may take no longer than the time to the first expiry among
	// these entries, so that a hung node cannot delay their loss past the
	// lease.
	ctx, cancel := context.WithTimeout(w.ctx, max(min(w.every, w.untilExpiry(g.batches)), time.Millisecond))
	defer cancel()
	w.send(ctx, w.relay(ctx, g.batches))
	// A relayed call that failed (its connection broke, NOSCRIPT, a slot
	// moved) goes through the client now: the renewal is idempotent. The
	// relayed calls get half the time left, so that a relay that hangs
	// leaves the client the other half. One that got no reply in that time
	// but was written may still run and set the lease later: its entries
	// keep it as their late call until its reply or the news that none
	// will come (landAll), so that Pause waits for it. Later rounds renew
	// them meanwhile.
	deadline, _ := ctx.Deadline()
	rctx, rcancel := context.WithTimeout(ctx, max(time.Until(deadline)/2, time.Millisecond))
	var failed []*batch
	for _, b := range g.batches {
		if b.relayed == nil {
			continue
		}
		if !b.relayed.Wait(rctx) && !b.relayed.Cancel() {
			b.late = b.relayed
		}
		b.relayed = nil
		if b.cmd.Err() != nil {
			failed = append(failed, b)
		}
	}
	rcancel()
	w.send(ctx, failed)
	if again := w.reload(ctx, g); len(again) > 0 {
		w.send(ctx, again) // each batch's result is read from its cmd below
	}
	took := time.Since(start)
	ok := true
	for _, b := range g.batches {
		res, err := b.spec.Result(b.cmd)
		if err == nil && len(res) != len(b.entries) {
			err = fmt.Errorf("renew: %s: reply has %d results for %d keys", b.spec.Name, len(res), len(b.entries))
		}
		if w.cfg.OnRenew != nil {
			w.cfg.OnRenew(Call{Spec: b.spec, Keys: b.keys, Fields: b.fields, Took: took, Err: err})
		}
		if err != nil {
			ok = false // the entries wait for the next try; expire ends those whose lease ran out
			continue
		}
		w.renewed(b, res, start)
	}
	return ok
}

// reload loads, on the group's node, the scripts of the batches that got
// NOSCRIPT (a node restarted, failed over or flushed its scripts), and
// returns the batches to send again: none when nothing was missing or the
// load failed.
func (w *Watchdog) reload(ctx context.Context, g nodeGroup) []*batch {
	var again []*batch
	loaded := map[*Spec]error{}
	for _, b := range g.batches {
		if err := b.cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			continue
		}
		err, done := loaded[b.spec]
		if !done {
			err = b.spec.Script.Load(ctx, g.loader)
			loaded[b.spec] = err
		}
		if err == nil {
			again = append(again, b)
		}
	}
	return again
}

// relay offers the batches to the Relay, and returns those it does not
// carry. A batch it carries has its cmd and its relayed call set.
func (w *Watchdog) relay(ctx context.Context, batches []*batch) []*batch {
	if w.cfg.Relay == nil {
		return batches
	}
	if r, ok := w.cfg.Relay.(Rounder); ok {
		r.Round(ctx)
	}
	p := w.rdb.Pipeline() // queues the commands, never sent
	defer p.Discard()
	var direct []*batch
	for _, b := range batches {
		// The command's context is the wait's: the pipeline never runs.
		cmd := b.spec.Cmd(w.ctx, p, b.keys, b.fields, w.cfg.Lease, true)
		if b.relayed = w.cfg.Relay.Send(b.spec, b.keys, b.fields, cmd); b.relayed == nil {
			direct = append(direct, b)
			continue
		}
		b.cmd = cmd
	}
	return direct
}

// send runs the batches in one pipeline (none: nothing); each call's
// outcome is in its cmd.
func (w *Watchdog) send(ctx context.Context, batches []*batch) {
	if len(batches) == 0 {
		return
	}
	_, _ = w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, b := range batches {
			b.cmd = b.spec.Cmd(ctx, p, b.keys, b.fields, w.cfg.Lease, false)
		}
		return nil
	})
	for _, b := range batches {
		// A pipeline that failed as a whole may leave a command without
		// its error.
		if b.cmd.Err() == nil && b.cmd.Val() == nil {
			b.cmd.SetErr(errNoReply)
		}
	}
}

var errNoReply = errors.New("renew: no reply")

// renewed applies a call's reply: the entries renewed have their lease set
// at the sending, the ones found gone end with Gone.
func (w *Watchdog) renewed(b *batch, res []int64, at time.Time) {
	var gone []ending
	w.mu.Lock()
	for i, e := range b.entries {
		if !e.live || e.inc != b.incs[i] {
			continue // removed or ended meanwhile (and maybe added again)
		}
		if res[i] == 1 {
			if at.After(e.renewed) {
				e.renewed = at
			}
			continue
		}
		gone = append(gone, w.ended(e))
	}
	w.mu.Unlock()
	end(gone, Gone)
}

// landAll lands the batches; one with a relayed call that may still run
// (late) lands again once that call is answered (or will not be, or
// Close): its reply is not applied, the client's was.
func (w *Watchdog) landAll(batches []*batch) {
	w.land(batches)
	for _, b := range batches {
		if b.late == nil {
			continue
		}
		w.calls.Add(1)
		go func() {
			defer w.calls.Done()
			b.late.Wait(w.ctx)
			b.late = nil
			w.land([]*batch{b})
		}()
	}
}

// land ends the flight of the batches: a Pause waiting for them goes on.
// A batch with a late call becomes its entries' late call instead, and
// lands again without it.
func (w *Watchdog) land(batches []*batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range batches {
		for _, e := range b.entries {
			if e.flight == b.landed {
				e.flight = nil
				if b.late != nil {
					e.late = append(e.late, b.landed)
				}
			}
			if b.late == nil && len(e.late) > 0 {
				e.late = slices.DeleteFunc(e.late, func(c chan struct{}) bool { return c == b.landed })
			}
		}
		if b.late == nil {
			close(b.landed)
		}
	}
}
