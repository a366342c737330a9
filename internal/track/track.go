// Package track tells a holder within milliseconds that its hold is gone
// from Redis, whatever removed it, through Redis's server-assisted
// client-side caching (CLIENT TRACKING, RESP3 invalidation pushes).
//
// The tracker keeps one connection per node that holds watched keys (one
// on a single server or behind Sentinel, one per primary of a cluster),
// in RESP3 with tracking on in OPTIN mode with NOLOOP: Redis remembers
// the keys read by a command after CLIENT CACHING yes and pushes an
// invalidation at their next change (write, delete, expiry, eviction,
// FLUSHALL/FLUSHDB) by another connection. An invalidation is only a
// hint: the watched keys it names are checked with their spec's read-only
// script on the same connection, which tracks them again (by its reads,
// or by an EXISTS before it for a call of more than armApart keys) and
// says per key whether the hold is still there and how
// long its lease has left. A hold found gone ends its watch and calls its
// callback; a hold with a lease is checked again when the lease runs out
// (an expired key is only deleted, and announced, when Redis gets to it).
// A watch's first check is sent within Config.Gather of its add, with the
// first checks of the other holds added meanwhile: a change between the
// acquisition and the watch is seen by it, holds taken close together
// share a call and a wake-up of the sender, and a hold released within
// that window costs nothing. Every other check (an invalidation, a lease's
// end, a reconnect) is sent at once. When the connection breaks,
// every watch of the node is checked again on the next one (a restart
// that lost the keys is seen when the server answers again); MOVED and
// ASK replies move the watches to the node they name, unless the tracker
// failed to reach it less than unreachedFor before (a replica that has not
// yet promoted itself names its dead master): then, as after CLUSTERDOWN,
// the watches are parked on the node that refused them until it has
// promoted itself (asked ROLE every probeEvery), follows another master,
// or its master answers again.
//
// Relay sends a renewal call on the tracking connection that watches its
// keys: with NOLOOP its writes announce nothing to this connection, so the
// holder's own renewals wake no check. Redis forgets who tracks a key when
// the key changes, NOLOOP trackers included: the renewal script reads its
// keys again after its writes, tracked (a larger call is followed by an
// EXISTS, in a MULTI with it).
//
// A change watch (WatchChange) has no loss semantics: it only wants to
// hear of every change of its key, and its callback runs after each check
// that follows one (the reply is not read), so that a waiter may try again
// on a change that nobody announced.
//
// The package knows nothing of locks: a target is a key, a field and a
// spec.
package track

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Spec is the check of one kind of hold: a read-only script (by its SHA1
// and source) whose KEYS are keys of one slot and whose ARGV are their
// fields, one per key, and whose reply has per key -3 (the key is of
// another type: overwritten), -2 (the hold is gone), -1 (held, no expiry)
// or the milliseconds its lease has left.
type Spec struct {
	Name, SHA1, Source string
}

// Target is what a watch checks: its field in its key, by spec.
type Target struct {
	Spec       *Spec
	Key, Field string
}

// Loss is why a watched hold ended.
type Loss int

const (
	// Gone: the field or the key is gone (deleted, expired, flushed,
	// lost by a restart).
	Gone Loss = iota
	// Overwritten: the key holds another type now.
	Overwritten
)

// Dialer is how the tracker reaches the node of a key.
type Dialer struct {
	// Addr returns the address of the node (the primary) that serves key.
	Addr func(ctx context.Context, key string) (string, error)
	// Dial opens a connection to addr (TLS included, when used).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Auth returns the credentials of HELLO (none when both are empty).
	Auth func(ctx context.Context) (username, password string, err error)
	// DB is the database to SELECT (0: none).
	DB int
	// Refresh, when not nil, is called with the address of a node that
	// could not be reached, before the watches of that node are placed
	// again by Addr (a cluster's slot map).
	Refresh func(ctx context.Context, addr string)
	// DialAddr, when not nil, dials a given address (Dial may ignore its
	// own: a Sentinel client's finds the primary itself). It turns on the
	// primary check: every connection must answer ROLE as a primary, and
	// when the node cannot be reached, the replicas its last primary named
	// and the servers it met before are dialed at once (candidates), so
	// that a replica promoted by a failover is found as soon as it answers
	// as a primary, before Sentinel names it.
	DialAddr func(ctx context.Context, addr string) (net.Conn, error)
}

// Config sets the tracker's bounds.
type Config struct {
	// Batch is the most keys per check call (default 100).
	Batch int
	// Slot groups the keys of one call (a cluster's slots); nil: one group.
	Slot func(key string) int
	// Ping is how often an idle connection with watches is probed
	// (default 10s); Timeout, how long a reply may take before the
	// connection is taken for dead (default 3s).
	Ping, Timeout time.Duration
	// MaxBackoff caps the wait between two attempts to connect, and
	// before a check that failed is sent again (default 10ms).
	MaxBackoff time.Duration
	// Gather is how long the first check of a new watch may wait for
	// others to share its call (default 1ms; negative: none). While the
	// watches of a node stop before their first check (holds released
	// within the wait), the wait doubles, up to gatherStretch × Gather;
	// it is Gather again after a wait that ends with a check to send.
	Gather time.Duration
}

// gatherStretch bounds how far a node's wait for first checks stretches
// (Config.Gather): a loop of holds released within the wait wakes the
// tracker every 8ms at most instead of every 1ms, and a hold that outlives
// such a loop is first checked within 8ms of its acquisition.
const gatherStretch = 8

// Tracker watches holds. Its methods are safe for concurrent use.
type Tracker struct {
	d      Dialer
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	nodes  map[string]*node
	closed bool
	// parkFor is how long a node keeps parked watches before it asks
	// whether their master answers again (parkMax), and unreachedFor how
	// long a failed dial keeps a MOVED to it from being followed (tests
	// may set them).
	parkFor, unreachedFor time.Duration
	// unreached are the addresses whose last dial failed, and when: a
	// MOVED that names one within unreachedFor is not followed (replied).
	unreached map[string]time.Time
}

// New returns a tracker. It sends nothing until the first Watch.
func New(d Dialer, cfg Config) *Tracker {
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Ping <= 0 {
		cfg.Ping = 10 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Millisecond
	}
	if cfg.Gather == 0 {
		cfg.Gather = time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Tracker{d: d, cfg: cfg, ctx: ctx, cancel: cancel, nodes: map[string]*node{}, unreached: map[string]time.Time{}, parkFor: parkMax, unreachedFor: unreachedFor}
}

// Watch is one watched hold. The zero value is ready for Add. An owner
// may keep one Watch and add it again for each of its holds once the last
// one was stopped or lost: a hold costs no allocation, and the reply to a
// check of an earlier hold is told apart by a count of the adds.
type Watch struct {
	t *Tracker // set by the first add

	// under t.mu
	target     Target
	tag        uint64                     // handed back to lost
	lost       func(tag uint64, how Loss) // a hold watch's callback
	changed    func()                     // a change watch's callback (lost is nil)
	inc        uint64                     // counts the adds: a check sent for an earlier one is stale
	n          *node
	prev, next *Watch // the other watches of target.Key on n
	queuedOn   *node  // the node whose queue holds it (nil: none)
	counted    bool   // counted in queuedOn's queued: not stopped since it was queued, or added again since
	parkedOn   *node  // the node whose parked list holds it (nil: none)
	inflight   bool   // a check of it was sent and has no reply yet
	apart      bool   // its check in flight tracked the keys before reading them (armApart)
	again      bool   // announced while an apart check was in flight: checked again after its reply
	fresh      bool   // added, its first check not sent yet: it may wait for Gather
	stopped    bool
	timer      *time.Timer // the next check at the end of its lease, or after a failure
}

// watchRef is a watch as one of its checks sent it: a reply for an earlier
// add (inc) is stale.
type watchRef struct {
	w   *Watch
	inc uint64
}

// current reports whether the check r is of w's current add. t.mu is held.
func (r watchRef) current() bool { return r.w.inc == r.inc }

// Reply is the reply of a relayed call: Val is an int64, a string, nil or
// a []any of them; Err is an error reply, or why no reply came.
type Reply struct {
	Val any
	Err error
}

// ErrNoReply: the tracking connection broke, or the tracker closed, before
// a relayed call's reply came (the call may have run).
var ErrNoReply = errors.New("track: no reply on the tracking connection")

// relay is one call sent by Relay.
type relay struct {
	script  *Spec
	args    []string
	renewed []Target
	lease   time.Duration
	reply   chan Reply // buffered: its caller may have left
	n       *node      // the node it is queued on
	written bool       // written to the connection: it may run
	multi   bool       // sent in a MULTI: the reply is its EXEC's
	armed   *armed     // a small call's CLIENT CACHING yes (nil: in a MULTI)
	refused string     // the error that refused the call inside its MULTI
}

// fail answers r with ErrNoReply.
func (r *relay) fail() { r.reply <- Reply{Err: ErrNoReply} }

// Relay sends args, an EVALSHA of script (loaded first when needed), on
// the connection that watches renewed[0].Key; the script reads its keys
// again after its writes, and replies per target 1 when it set its lease
// to lease, which moves the lease check of that target's watches. It
// returns nil, sending nothing, when no connection up watches the key or
// after Close; else a channel that gets the reply (ErrNoReply when the
// connection breaks first), and cancel, which withdraws the call if it is
// not written yet and reports whether it will not run: false means it was
// written, and its reply (or ErrNoReply) is still to come. With server
// not empty, only a connection to the server of that run_id (read with
// Dialer.DialAddr's primary check) carries the call; one that breaks
// before writing it answers ErrNoReply, so the call is never written to
// another.
func (t *Tracker) Relay(server string, script *Spec, args []string, renewed []Target, lease time.Duration) (reply <-chan Reply, cancel func() bool) {
	if len(renewed) == 0 {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil
	}
	for _, n := range t.nodes {
		if n.conn == nil || n.watches[renewed[0].Key] == nil {
			continue
		}
		if server != "" && n.runID != server {
			return nil, nil
		}
		r := &relay{script: script, args: args, renewed: renewed, lease: lease, reply: make(chan Reply, 1), n: n}
		n.relays = append(n.relays, r)
		n.kicked()
		return r.reply, func() bool { return t.withdraw(r) }
	}
	return nil, nil
}

// withdraw withdraws r if it is not written yet, and reports whether it
// will not run.
func (t *Tracker) withdraw(r *relay) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.written {
		return false
	}
	if i := slices.Index(r.n.relays, r); i >= 0 {
		r.n.relays = slices.Delete(r.n.relays, i, i+1)
	}
	return true
}

// Watch starts watching target: lost is called once, on a goroutine of
// the tracker, when a check finds the hold gone, unless Stop came first.
// Its first check is sent within Config.Gather. It returns nil after Close. It sends
// nothing itself and does not wait: on a cluster (Config.Slot set) the
// key's node is found on a goroutine of the tracker, since Addr may ask
// Redis.
func (t *Tracker) Watch(target Target, lost func(Loss)) *Watch {
	w := new(Watch)
	if !t.Add(w, target, 0, func(_ uint64, how Loss) { lost(how) }) {
		return nil
	}
	return w
}

// Add is Watch on a Watch of the caller's: w is the zero value, or was
// stopped (or reported lost) since its last add; lost gets tag. The add
// and the Stop of one Watch must not run concurrently. Add returns false,
// watching nothing, after Close.
func (t *Tracker) Add(w *Watch, target Target, tag uint64, lost func(tag uint64, how Loss)) bool {
	return t.add(w, target, tag, lost, nil)
}

// WatchChange starts watching target's key for any change (a write, a
// delete, an expiry, an eviction, a flush): changed is called on a
// goroutine of the tracker after every check of the key, which follows
// each change announced, the first placement of the watch (a change
// before the key was tracked went unannounced) and every reconnect, until
// Stop. Its check's reply is not read: the watch reports no loss and
// follows no lease. It returns nil after Close.
func (t *Tracker) WatchChange(target Target, changed func()) *Watch {
	w := new(Watch)
	if !t.add(w, target, 0, nil, changed) {
		return nil
	}
	return w
}

// add places w (on a goroutine of the tracker on a cluster) and queues
// its first check.
func (t *Tracker) add(w *Watch, target Target, tag uint64, lost func(uint64, Loss), changed func()) bool {
	var addr string
	var err error
	if t.cfg.Slot == nil {
		addr, err = t.d.Addr(t.ctx, target.Key)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if w.t != nil && w.t != t {
		panic("track: Add of a watch of another tracker")
	}
	if w.t != nil && !w.stopped {
		panic("track: Add of a live watch")
	}
	if w.t == nil {
		// Written once: a timer of an earlier add (due) reads w.t before
		// it takes t.mu, so a reused watch must not have it written again.
		w.t = t
	}
	w.target, w.tag, w.lost, w.changed = target, tag, lost, changed
	w.inc++
	w.stopped, w.inflight, w.again = false, false, false // a check in flight is the earlier add's
	w.fresh = true
	switch {
	case t.cfg.Slot != nil:
		w.after(0)
	case err != nil:
		w.retry() // placed again after the backoff
	default:
		t.place(w, addr)
	}
	return true
}

// Stop ends the watch: lost (or changed) is not called after it returns,
// unless it is running.
func (w *Watch) Stop() {
	if w == nil || w.t == nil {
		return
	}
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	w.stopLocked()
}

func (w *Watch) stopLocked() {
	if n := w.queuedOn; n != nil && w.counted {
		w.counted = false
		n.queued--
	}
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.n != nil {
		w.n.remove(w)
		w.n = nil
	}
}

// place puts w on the node at addr and queues its check. t.mu is held.
func (t *Tracker) place(w *Watch, addr string) {
	n := t.nodes[addr]
	if n == nil {
		n = t.newNode(addr)
		t.nodes[addr] = n
		t.wg.Add(1)
		go n.run()
	}
	if w.n != n {
		if w.n != nil {
			w.n.remove(w)
		}
		w.n = n
		w.prev, w.next = nil, n.watches[w.target.Key]
		if w.next != nil {
			w.next.prev = w
		}
		n.watches[w.target.Key] = w
	}
	w.inflight, w.again = false, false
	if w.fresh && t.cfg.Gather > 0 {
		n.enqueueLater(w)
		return
	}
	n.enqueue(w)
}

// newNode returns the node at addr, with no goroutine yet.
func (t *Tracker) newNode(addr string) *node {
	n := &node{t: t, addr: addr, watches: map[string]*Watch{}, kick: make(chan struct{}, 1), loaded: map[*Spec]bool{}, wait: t.cfg.Gather}
	n.gather = time.AfterFunc(time.Hour, n.gathered)
	n.gather.Stop()
	n.probe = time.NewTimer(time.Hour)
	n.probe.Stop()
	return n
}

// retry checks w again after the backoff (placing it again first when
// it has no node). t.mu is held.
func (w *Watch) retry() { w.after(w.t.cfg.MaxBackoff) }

// after runs w's timer after d. t.mu is held.
func (w *Watch) after(d time.Duration) {
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.due)
	} else {
		w.timer.Reset(d)
	}
}

// due is w's timer: its lease ran out, or a check failed.
func (w *Watch) due() {
	t := w.t
	t.mu.Lock()
	if w.stopped || t.closed {
		t.mu.Unlock()
		return
	}
	if w.n != nil {
		w.n.enqueue(w)
		t.mu.Unlock()
		return
	}
	key, inc := w.target.Key, w.inc
	t.mu.Unlock()
	addr, err := t.d.Addr(t.ctx, key)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case w.stopped || t.closed || w.n != nil || w.inc != inc:
	case err != nil:
		w.retry()
	default:
		t.place(w, addr)
	}
}

// Counts returns the number of watches (change watches aside) and of
// tracking connections (none after Close).
func (t *Tracker) Counts() (watches, conns int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, 0
	}
	for _, n := range t.nodes {
		n.each(func(w *Watch) {
			if w.changed == nil {
				watches++
			}
		})
		if n.conn != nil {
			conns++
		}
	}
	return watches, conns
}

// Close stops every watch (no callback is called after it returns) and
// closes the connections.
func (t *Tracker) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	for _, n := range t.nodes {
		n.gather.Stop()
		n.each(func(w *Watch) {
			w.stopped = true
			if w.timer != nil {
				w.timer.Stop()
			}
		})
		if n.conn != nil {
			n.conn.Close()
		}
	}
	t.cancel()
	t.mu.Unlock()
	t.wg.Wait()
}

// node is the tracking connection to one Redis node and the watches of
// the keys it serves.
type node struct {
	t    *Tracker
	addr string
	kick chan struct{} // the queue has work
	// gather runs gathered Gather after a first check was queued with
	// nothing else to send (gathering, under t.mu): only then is the
	// sender woken, and only if a watch in the queue is live. A hold
	// released within Gather wakes no goroutine of the tracker.
	gather    *time.Timer
	gathering bool
	wait      time.Duration // the next gathering's length: Gather to gatherStretch × Gather
	// probe fires probeEvery while watches are parked: a ROLE is sent.
	probe *time.Timer

	// under t.mu
	watches map[string]*Watch // by key: the first of the key's list (prev, next)
	queue   []*Watch          // to check
	queued  int               // the watches in queue that were not stopped there (at least)
	relays  []*relay          // to send (Relay)
	pending []sent            // commands sent, in order, awaiting replies
	loaded  map[*Spec]bool    // scripts loaded on this connection
	// replicas are the replicas the node's last primary named (ROLE),
	// with Dialer.DialAddr: where to look when the node cannot be reached.
	// roleAt is when they were last read.
	replicas []string
	roleAt   time.Time
	// runID is the run_id (INFO server) of the server the connection
	// reached, read with the primary check: a Relay for a given server
	// is carried only by a connection to it.
	runID string
	// parked are the watches whose check the node refused with MOVED to
	// a master the tracker could not reach, or with CLUSTERDOWN (their
	// parkedOn is n): the node is a replica of that master that has not
	// promoted itself yet. It is asked ROLE every probeEvery, and once it
	// answers as a primary, or names another master, they are checked
	// again at once; every parkFor its master is dialed (reach), and if it
	// answers they are placed again by Addr. parkedAt is when the first was parked (zero: none), probing
	// that a ROLE is in flight, wasReplica that one found the node a
	// replica (a node that was a primary at the first ROLE shows no
	// promotion: its parked watches are placed again at once).
	parked     []*Watch
	parkedAt   time.Time
	probing    bool
	wasReplica bool
	// parkMaster is the master the replica's ROLE names; reaching, that
	// a dial of it is under way (reach); requeuedAt, when parked watches
	// were last sent again to a node that was a primary at its first ROLE.
	parkMaster string
	reaching   bool
	requeuedAt time.Time
	// replID is the connected primary's replication id (INFO
	// replication, read again with each ROLE), primaryAt its address,
	// and known the servers the node met, most recent first: where else
	// connect looks (candidates).
	replID    string
	primaryAt string
	known     []string
	written   uint64 // commands written on the connection, to tell an idle one

	// writeChecks's buffers, reused from call to call
	order  []checkGroup
	groups map[checkGroup][]watchRef
	args   []string
	conn   net.Conn
}

// checkGroup is the watches one check call may carry: one spec, one slot.
type checkGroup struct {
	spec *Spec
	slot int
}

// sent is one command awaiting its reply: a check of watches, a relayed
// call, or a command whose reply only says the connection works (nil).
type sent struct {
	check []watchRef
	spec  *Spec
	relay *relay
	// queued: the relay whose call this is, inside its MULTI (the reply
	// is QUEUED, or the error that will abort the EXEC)
	queued *relay
	// arming: a CLIENT CACHING yes, or the EXISTS after it, whose refusal
	// leaves the keys of the check or relayed call it precedes untracked
	arming *armed
	armed  *armed // a check's arming commands
	role   bool   // a ROLE of the primary check
	probe  bool   // a ROLE asking whether a replica was promoted
	// replInfo: an INFO replication sent with a ROLE of the primary check
	replInfo bool
	at       time.Time // when it was written: its reply is due Timeout later
}

// each calls f for every watch of n. t.mu is held.
func (n *node) each(f func(*Watch)) {
	for _, w := range n.watches {
		n.eachOf(w, f)
	}
}

// eachOf calls f for w and the watches after it in its key's list. f may
// remove the watch it is given. t.mu is held.
func (n *node) eachOf(w *Watch, f func(*Watch)) {
	for w != nil {
		next := w.next
		f(w)
		w = next
	}
}

func (n *node) enqueue(w *Watch) {
	if w.stopped || !n.queueUp(w) {
		return
	}
	if w.parkedOn == n {
		w.parkedOn = nil
	}
	n.kicked()
}

// queueUp appends w to the queue and counts it in queued. A watch the
// queue holds already is not appended again, but counted again if it was
// stopped there and added again since (a handle's watch, reused for its
// next hold). It reports whether w was appended. t.mu is held.
func (n *node) queueUp(w *Watch) bool {
	if !w.counted || w.queuedOn != n {
		n.queued++
	}
	w.counted = true
	if w.queuedOn == n {
		return false
	}
	w.queuedOn = n
	n.queue = append(n.queue, w)
	return true
}

// enqueueLater queues the first check of w, to be sent within Gather
// with the others queued meanwhile (at once if the sender is woken for
// something else first). t.mu is held.
func (n *node) enqueueLater(w *Watch) {
	if w.stopped || !n.queueUp(w) {
		return
	}
	if !n.gathering {
		n.gathering = true
		n.gather.Reset(n.wait)
	}
}

// gathered runs when the first checks have gathered (n.wait): it wakes
// the sender if a watch in the queue is live, and the next wait is
// Gather; otherwise every watch queued has stopped, the queue is emptied
// without a wake, and the next wait is twice as long, up to
// gatherStretch × Gather.
func (n *node) gathered() {
	t := n.t
	t.mu.Lock()
	defer t.mu.Unlock()
	n.gathering = false
	switch {
	case n.queued > 0:
		n.wait = t.cfg.Gather
		n.kicked()
		return
	case len(n.queue) == 0:
		// Another send took the checks gathered: they went out.
		n.wait = t.cfg.Gather
		return
	}
	n.wait = min(2*n.wait, gatherStretch*t.cfg.Gather)
	n.unqueueAll()
}

// unqueueAll empties the queue: its watches are no longer queued. t.mu is
// held.
func (n *node) unqueueAll() {
	for _, x := range n.queue {
		if x.queuedOn == n {
			x.queuedOn, x.counted = nil, false
		}
	}
	clear(n.queue)
	n.queue = n.queue[:0]
	n.queued = 0
}

// kicked tells the sender there is work.
func (n *node) kicked() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *node) remove(w *Watch) {
	switch {
	case w.prev != nil:
		w.prev.next = w.next
	case w.next != nil:
		n.watches[w.target.Key] = w.next
	default:
		delete(n.watches, w.target.Key)
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	if w.parkedOn == n {
		w.parkedOn = nil
	}
	// A queued or in-flight check of w finds it stopped.
}

func (n *node) empty() bool { return len(n.watches) == 0 }

// run connects, checks every watch of the node, and then sends the checks
// that invalidations, leases and failures queue, until Close.
func (n *node) run() {
	t := n.t
	defer t.wg.Done()
	backoff := time.Millisecond
	for t.ctx.Err() == nil {
		conn, r, err := n.connect()
		if errors.Is(err, errUnsupported) {
			// No client-side caching (a server that is not Redis 6+, or
			// refuses it): its watches stay, unchecked; the renewal is
			// their fallback.
			return
		}
		if err != nil {
			t.mu.Lock()
			t.failedDial(n.addr)
			if n.empty() || t.closed {
				delete(t.nodes, n.addr)
				n.gather.Stop()
				t.mu.Unlock()
				return
			}
			t.mu.Unlock()
			if n.replace() {
				return // every watch moved away: no dial more
			}
			if !sleep(t.ctx, backoff) {
				return
			}
			backoff = min(2*backoff, t.cfg.MaxBackoff)
			continue
		}
		backoff = time.Millisecond
		t.mu.Lock()
		delete(t.unreached, n.addr)
		if t.closed {
			t.mu.Unlock()
			conn.Close()
			return
		}
		n.conn = conn
		n.pending = n.pending[:0]
		n.unpark() // the watches are checked again below
		clear(n.loaded)
		n.each(func(w *Watch) {
			w.inflight, w.again = false, false
			n.enqueue(w) // a change while disconnected went unannounced
		})
		t.mu.Unlock()
		done := make(chan struct{})
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer close(done)
			n.read(conn, r)
		}()
		n.send(conn, done)
		conn.Close()
		<-done
		t.mu.Lock()
		n.conn = nil
		for _, p := range n.pending {
			for _, r := range p.check {
				if r.current() {
					r.w.inflight, r.w.again = false, false
				}
			}
			if p.relay != nil {
				p.relay.fail()
			}
		}
		n.pending = n.pending[:0]
		for _, r := range n.relays {
			r.fail() // queued for this connection: its caller sends it otherwise
		}
		n.relays = n.relays[:0]
		t.mu.Unlock()
	}
}

// unreachedFor is how long after a failed dial of a node a MOVED that
// names it is not followed: while a crashed master's replica has not yet
// promoted itself, the node is dialed again at most once in that time
// (through Addr), and a slot map that names it again later (the master
// came back, a migration) is followed then.
const unreachedFor = 100 * time.Millisecond

// failedDial records that addr could not be reached just now, and
// forgets the addresses that failed long ago. t.mu is held.
func (t *Tracker) failedDial(addr string) {
	now := time.Now()
	for a, at := range t.unreached {
		if now.Sub(at) > time.Minute {
			delete(t.unreached, a)
		}
	}
	t.unreached[addr] = now
}

// replace asks Addr again for every watch of a node that cannot be
// reached, and moves those now served elsewhere (a cluster's failover).
// It reports whether it closed the node, which has no watch left.
func (n *node) replace() bool {
	t := n.t
	if t.d.Refresh == nil {
		return false
	}
	t.d.Refresh(t.ctx, n.addr)
	t.mu.Lock()
	var ws []watchRef
	var ks []string
	n.each(func(w *Watch) {
		ws = append(ws, watchRef{w, w.inc})
		ks = append(ks, w.target.Key)
	})
	t.mu.Unlock()
	for i, r := range ws {
		addr, err := t.d.Addr(t.ctx, ks[i])
		if err != nil || addr == n.addr {
			continue
		}
		t.mu.Lock()
		if w := r.w; !w.stopped && !t.closed && w.n == n && r.current() {
			t.place(w, addr)
		}
		t.mu.Unlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.empty() && !t.closed {
		delete(t.nodes, n.addr)
		n.gather.Stop()
		return true
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// connect dials the node and turns tracking on. With Dialer.DialAddr the
// node's own dial (Dial, where a Sentinel client finds the primary) and
// the servers it knows (candidates) are tried at once, and the first
// that answers as a primary (of the same replication history, for a
// server not named by the last primary) is the node's connection: a
// primary that does not answer (a host down, no reset) delays nothing.
func (n *node) connect() (net.Conn, *bufio.Reader, error) {
	t := n.t
	if t.d.DialAddr == nil {
		conn, r, _, err := n.handshake(t.ctx, try{dial: t.d.Dial, addr: n.addr})
		return conn, r, err
	}
	t.mu.Lock()
	tries := n.candidates()
	t.mu.Unlock()
	conn, r, s, err := n.firstPrimary(tries)
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	n.learned(s)
	t.mu.Unlock()
	return conn, r, nil
}

// knownMax bounds the servers a node remembers (known).
const knownMax = 8

// try is one server connect dials: with dial (Dial for the node's own
// address, else DialAddr), taken only if it answers as a primary whose
// replication ids include lineage (when not empty).
type try struct {
	dial    func(context.Context, string) (net.Conn, error)
	addr    string
	lineage string
	own     bool   // the node's own dial: its error is connect's
	wait    bool   // a named replica: waited for until promoted (parkMax)
	runID   string // when set, the server must have this run_id (the same process)
	// first counts the round's tries that do not wait and have not ended
	// their first attempt: a wait lasts until they have (a dial of a host
	// that is down may take Timeout, and meanwhile only the waits look).
	first *atomic.Int64
}

// candidates returns what connect dials: the node's own address; the
// replicas its last primary named, taken as before this was known (any
// primary); and, when that primary's replication id is known, the other
// servers the node met (an old primary that rejoined as a replica at its
// address and was promoted again), taken only if their master_replid or
// master_replid2 is that id: a server at a known address that is a
// primary of another history (restarted empty, another deployment) says
// nothing of the holds. At the last primary's own address (reached
// through the node's own dial too) only the same process is taken (its
// run_id): restarted from its RDB, it would answer with its old id as
// master_replid2 and old data.
// t.mu is held.
func (n *node) candidates() []try {
	t := n.t
	tries := []try{{dial: t.d.Dial, addr: n.addr, own: true}}
	for _, a := range n.replicas {
		tries = append(tries, try{dial: t.d.DialAddr, addr: a, wait: true})
	}
	if n.replID == "" {
		return tries
	}
	for _, a := range n.known {
		switch {
		case slices.Contains(n.replicas, a):
		case a != n.primaryAt:
			tries = append(tries, try{dial: t.d.DialAddr, addr: a, lineage: n.replID})
		case n.runID != "":
			// The same process only: one just promoted, not yet named
			// by a Sentinel, to which the connection broke.
			tries = append(tries, try{dial: t.d.DialAddr, addr: a, lineage: n.replID, runID: n.runID})
		}
	}
	return tries
}

// learned records what the handshake of the node's new connection read:
// the replicas its primary names, its run_id, replication id and
// address, and the servers met, most recent first. t.mu is held.
func (n *node) learned(s serverInfo) {
	n.replicas, n.roleAt = s.replicas, time.Now()
	n.runID, n.replID, n.primaryAt = s.runID, s.replID, s.addr
	n.remember(append([]string{s.addr}, s.replicas...))
}

// remember adds addrs to the servers the node knows, most recent first.
// t.mu is held.
func (n *node) remember(addrs []string) {
	for _, a := range slices.Backward(addrs) {
		if a == "" {
			continue
		}
		n.known = slices.DeleteFunc(n.known, func(k string) bool { return k == a })
		n.known = slices.Insert(n.known, 0, a)
	}
	if len(n.known) > knownMax {
		n.known = n.known[:knownMax]
	}
}

// firstPrimary runs the handshakes of tries at once and returns the first
// connection that passes its primary check; the others are closed as
// their handshakes end. When none passes, the error is the node's own
// dial's.
func (n *node) firstPrimary(tries []try) (net.Conn, *bufio.Reader, serverInfo, error) {
	t := n.t
	type result struct {
		conn net.Conn
		r    *bufio.Reader
		s    serverInfo
		err  error
		own  bool
	}
	results := make(chan result, len(tries))
	// The round ends the others' waits once one has won.
	round, end := context.WithCancel(t.ctx)
	defer end()
	// others counts the tries still running besides the node's own dial,
	// which is tried again (backing off) while they wait for a replica's
	// promotion: a primary that answers again is taken at once.
	var others, first atomic.Int64
	others.Store(int64(len(tries) - 1))
	for i := range tries {
		tries[i].first = &first
		if !tries[i].wait {
			first.Add(1)
		}
	}
	t.wg.Add(len(tries)) // the node's own goroutine keeps the count above 0
	for _, a := range tries {
		go func() {
			defer t.wg.Done()
			if !a.own {
				defer others.Add(-1)
			}
			start := time.Now()
			conn, r, s, err := n.handshake(round, a)
			if !a.wait {
				first.Add(-1)
			}
			// A Sentinel that promotes a replica closes its clients'
			// connections (CLIENT KILL TYPE normal): the wait goes on on a
			// new one.
			for errors.Is(err, errWaitBroken) && time.Since(start) < parkMax && sleep(round, probeEvery) {
				conn, r, s, err = n.handshake(round, a)
			}
			for backoff := time.Millisecond; a.own && err != nil && !errors.Is(err, errUnsupported) && others.Load() > 0; backoff = min(2*backoff, t.cfg.MaxBackoff) {
				if !sleep(round, backoff) {
					break
				}
				conn, r, s, err = n.handshake(round, a)
			}
			if err == nil {
				s.addr = a.addr
				if a.own {
					s.addr = "" // Dial may ignore the address: the server's is the connection's
					if ra := conn.RemoteAddr(); ra != nil {
						s.addr = ra.String()
					}
				}
			}
			results <- result{conn, r, s, err, a.own}
		}()
	}
	var ownErr error
	for i := range tries {
		x := <-results
		if x.err != nil {
			if x.own {
				ownErr = x.err
			}
			continue
		}
		if rest := len(tries) - i - 1; rest > 0 {
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				for range rest {
					if y := <-results; y.err == nil {
						y.conn.Close()
					}
				}
			}()
		}
		return x.conn, x.r, x.s, nil
	}
	return nil, nil, serverInfo{}, ownErr
}

// errWaitBroken: the connection to a named replica broke while connect
// waited for its promotion.
var errWaitBroken = errors.New("track: the connection broke while waiting for a promotion")

// errNotPrimary: with the primary check on, the node answered ROLE as a
// replica (or a Sentinel's stale answer named one), or as a primary of
// another replication history than the one connect looked for.
var errNotPrimary = errors.New("track: the node is not a primary")

// serverInfo is what a handshake with the primary check read: the
// replicas the primary names (ROLE), its run_id (INFO server), its
// replication ids (INFO replication) and the address it was reached at.
type serverInfo struct {
	addr            string
	replicas        []string
	runID           string
	replID, replID2 string
}

// handshake dials addr with dial and turns tracking on: HELLO 3 (with
// AUTH), SELECT, CLIENT TRACKING ON OPTIN NOLOOP (and a CLIENT CACHING
// yes, which must pass), and with Dialer.DialAddr a
// ROLE that must say primary, an INFO server for the server's run_id and
// an INFO replication for its replication ids, which must include
// lineage when it is not empty.
func (n *node) handshake(round context.Context, a try) (net.Conn, *bufio.Reader, serverInfo, error) {
	t := n.t
	var s serverInfo
	dial, addr, lineage := a.dial, a.addr, a.lineage
	ctx, cancel := context.WithTimeout(round, t.cfg.Timeout)
	defer cancel()
	conn, err := dial(ctx, addr)
	if err != nil {
		return nil, nil, s, err
	}
	// A round that another try won, or the tracker's Close, ends the
	// handshake at once, even while it waits for a reply.
	stop := context.AfterFunc(round, func() { conn.Close() })
	fail := func(err error) (net.Conn, *bufio.Reader, serverInfo, error) {
		stop()
		conn.Close()
		return nil, nil, s, err
	}
	_ = conn.SetDeadline(time.Now().Add(t.cfg.Timeout))
	w := bufio.NewWriter(conn)
	hello := []string{"HELLO", "3"}
	if t.d.Auth != nil {
		user, pass, err := t.d.Auth(ctx)
		if err != nil {
			return fail(err)
		}
		if pass != "" {
			hello = append(hello, "AUTH", cmpOr(user, "default"), pass)
		}
	}
	writeCmd(w, hello...)
	cmds := 1
	if t.d.DB != 0 {
		writeCmd(w, "SELECT", strconv.Itoa(t.d.DB))
		cmds++
	}
	writeCmd(w, "CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP")
	// Every check and renewal sends CLIENT CACHING yes: a server (or an
	// ACL) that refuses it is one without tracking. (The flag it sets
	// goes to the connection's first command: a SCRIPT LOAD, a ROLE, or
	// a check that sets it anyway.)
	writeCmd(w, "CLIENT", "CACHING", "yes")
	cmds += 2
	role := t.d.DialAddr != nil
	if role {
		writeCmd(w, "ROLE")
		writeCmd(w, "INFO", "server")
		writeCmd(w, "INFO", "replication")
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	r := bufio.NewReaderSize(conn, 16<<10)
	for range cmds {
		v, err := readReply(r)
		if err != nil {
			return fail(err)
		}
		if v.kind == '-' {
			if transientReply(v.str) {
				return fail(errors.New(v.str))
			}
			return fail(fmt.Errorf("%w: %s", errUnsupported, v.str))
		}
	}
	if role {
		var vs [3]value
		for i := range vs {
			if vs[i], err = readReply(r); err != nil {
				return fail(err)
			}
		}
		replicas, ok := primaryRole(vs[0])
		if !ok && a.wait {
			// A named replica is asked ROLE again every probeEvery, for up
			// to parkMax, until it has promoted itself (or another try won
			// the round: the Sentinel's answer, a primary that answers
			// again); then its INFO is read again.
			for end := time.Now().Add(parkMax); !ok && (time.Now().Before(end) || a.first.Load() > 0); {
				if !sleep(round, probeEvery) {
					return fail(round.Err())
				}
				if vs[0], err = roundTrip(conn, w, r, t.cfg.Timeout, "ROLE"); err != nil {
					return fail(fmt.Errorf("%w: %w", errWaitBroken, err))
				}
				replicas, ok = primaryRole(vs[0])
			}
			if ok {
				if vs[1], err = roundTrip(conn, w, r, t.cfg.Timeout, "INFO", "server"); err != nil {
					return fail(fmt.Errorf("%w: %w", errWaitBroken, err))
				}
				if vs[2], err = roundTrip(conn, w, r, t.cfg.Timeout, "INFO", "replication"); err != nil {
					return fail(fmt.Errorf("%w: %w", errWaitBroken, err))
				}
			}
		}
		if !ok {
			return fail(errNotPrimary)
		}
		// None from an error reply (a proxy that refuses INFO): nothing
		// is relayed for the server, and no lineage is known.
		s.replicas, s.runID = replicas, RunID(vs[1].str)
		s.replID, s.replID2 = infoField(vs[2].str, "master_replid"), infoField(vs[2].str, "master_replid2")
		if lineage != "" && s.replID != lineage && s.replID2 != lineage || a.runID != "" && s.runID != a.runID {
			return fail(errNotPrimary)
		}
	}
	if !stop() {
		return fail(round.Err()) // closed by the round's end
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, r, s, nil
}

// roundTrip sends one command on a connection being set up and reads its
// reply, within timeout.
func roundTrip(conn net.Conn, w *bufio.Writer, r *bufio.Reader, timeout time.Duration, args ...string) (value, error) {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	writeCmd(w, args...)
	if err := w.Flush(); err != nil {
		return value{}, err
	}
	return readReply(r)
}

// readReply reads the next reply, skipping push messages: on a connection
// being set up they announce nothing of the watches (it has read no key
// yet, and every watch is checked once it is up), but a flush announces
// itself to every tracking connection.
func readReply(r *bufio.Reader) (value, error) {
	for {
		v, err := readValue(r)
		if err != nil || v.kind != '>' {
			return v, err
		}
	}
}

// RunID returns the run_id in the text of INFO server ("" when none).
func RunID(info string) string { return infoField(info, "run_id") }

// infoField returns the value of field in the text of an INFO reply (""
// when none).
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}

// primaryRole reports whether v, a ROLE reply, is a primary's, and the
// addresses of the replicas it names: ["master", offset, [[ip, port,
// offset], ...]].
func primaryRole(v value) (replicas []string, ok bool) {
	if v.kind != '*' || len(v.elems) < 3 || v.elems[0].str != "master" {
		return nil, false
	}
	for _, x := range v.elems[2].elems {
		if len(x.elems) >= 2 && x.elems[0].str != "" && x.elems[1].str != "" {
			replicas = append(replicas, net.JoinHostPort(x.elems[0].str, x.elems[1].str))
		}
	}
	return replicas, true
}

// errUnsupported: the node refused to turn tracking on.
var errUnsupported = errors.New("track: the server refused client-side caching")

// transientReply reports whether an error reply may pass when sent again.
func transientReply(s string) bool {
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// send writes the queued checks (and a PING after Ping without one)
// until the connection fails or Close.
func (n *node) send(conn net.Conn, done <-chan struct{}) {
	t := n.t
	w := bufio.NewWriter(conn)
	ping := time.NewTicker(t.cfg.Ping)
	defer ping.Stop()
	// With the primary check, ROLE is read again when due (roleDue): the
	// replicas are where a promoted one is looked for.
	var roleTick <-chan time.Time
	if t.d.DialAddr != nil {
		rt := time.NewTicker(min(time.Second, t.cfg.Ping))
		defer rt.Stop()
		roleTick = rt.C
	}
	wrote := false  // since the last ping tick
	var last uint64 // n.written at the last flush
	for {
		select {
		case <-roleTick:
			t.mu.Lock()
			if !n.roleDue(time.Second) {
				t.mu.Unlock()
				continue
			}
			_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeout))
			n.writeRole(conn, w, time.Second)
			t.mu.Unlock()
		case <-t.ctx.Done():
			return
		case <-done:
			return
		case <-ping.C:
			if wrote {
				wrote = false
				continue
			}
			// The deadline is set before writing: a write that fills
			// the buffer flushes at once, and must not meet the
			// deadline of the last flush, long past on an idle link.
			_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeout))
			t.mu.Lock()
			if n.empty() {
				t.mu.Unlock()
				continue
			}
			writeCmd(w, "PING")
			n.sentLocked(conn, sent{})
			t.mu.Unlock()
		case <-n.probe.C:
			_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeout))
			t.mu.Lock()
			n.writeProbe(conn, w)
			t.mu.Unlock()
		case <-n.kick:
			_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.Timeout))
			t.mu.Lock()
			n.writeRole(conn, w, 100*time.Millisecond)
			n.writeChecks(conn, w)
			n.writeRelays(conn, w)
			t.mu.Unlock()
		}
		// A tick that wrote nothing (every watch it found had stopped)
		// leaves the link idle: the next ping tick probes it.
		t.mu.Lock()
		if n.written != last {
			wrote, last = true, n.written
		}
		t.mu.Unlock()
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// sentLocked records a command written (before its flush: its reply
// cannot come first) and bounds the wait for it. t.mu is held.
func (n *node) sentLocked(conn net.Conn, s sent) {
	s.at = time.Now()
	n.written++
	if len(n.pending) == 0 {
		_ = conn.SetReadDeadline(s.at.Add(n.t.cfg.Timeout))
	}
	n.pending = append(n.pending, s)
}

// probeEvery is how often a node with parked watches is asked ROLE: the
// most a promotion waits to be seen (a ROLE costs Redis about as little as
// a PING; during a failover, 500 a second per client and replica).
const probeEvery = 2 * time.Millisecond

// parkMax is how long watches stay parked on a replica before they are
// placed again by Addr (a master that answers again is found then: the
// replica's ROLE cannot tell, its link to a crashed host may be said
// connected until repl-timeout), and how long connect waits for a named
// replica to promote itself: the dead master is dialed at most once in
// that time.
const parkMax = time.Second

// park keeps w on n until n is promoted (parked). t.mu is held.
func (n *node) park(w *Watch) {
	if w.parkedOn == n {
		return
	}
	w.parkedOn = n
	n.parked = append(n.parked, w)
	if n.parkedAt.IsZero() {
		n.parkedAt = time.Now()
		n.probe.Reset(0)
	}
}

// eachParked calls f for the watches parked on n that are still live.
// t.mu is held.
func (n *node) eachParked(f func(*Watch)) {
	for _, w := range n.parked {
		if w.parkedOn == n && w.n == n && !w.stopped {
			f(w)
		}
	}
}

// unpark forgets the parked watches (they are checked or placed again by
// the caller). t.mu is held.
func (n *node) unpark() {
	for _, w := range n.parked {
		if w.parkedOn == n {
			w.parkedOn = nil
		}
	}
	clear(n.parked)
	n.parked = n.parked[:0]
	n.parkedAt, n.wasReplica, n.parkMaster = time.Time{}, false, ""
	n.probing = false // in flight only on a connection that broke
	n.probe.Stop()
}

// replaceParked places the parked watches again by Addr after the
// backoff, as for any refusal. t.mu is held.
func (n *node) replaceParked() {
	n.eachParked(func(w *Watch) {
		n.remove(w)
		w.n = nil
		w.retry()
	})
	n.unpark()
}

// writeProbe writes the ROLE of a probe (parked), or gives the parked
// watches up after parkFor. t.mu is held.
func (n *node) writeProbe(conn net.Conn, w *bufio.Writer) {
	if n.parkedAt.IsZero() || n.probing {
		return
	}
	live := false
	n.eachParked(func(*Watch) { live = true })
	switch {
	case !live:
		n.unpark()
	case time.Since(n.parkedAt) >= n.t.parkFor && !n.reaching:
		if n.parkMaster == "" {
			n.replaceParked()
			return
		}
		// Does the replica's master answer again? Dialed aside, while
		// the probes go on: a host that is down may take Timeout.
		n.reaching = true
		n.t.wg.Add(1)
		go n.reach(n.parkMaster, n.parkedAt)
		fallthrough
	default:
		n.probing = true
		writeCmd(w, "ROLE")
		n.sentLocked(conn, sent{probe: true})
	}
}

// reach dials master, which the replica n names, for the watches parked
// since episode: if it answers, they are placed again by Addr (it serves
// them, or names who does); if not, they stay for another parkFor.
func (n *node) reach(master string, episode time.Time) {
	t := n.t
	defer t.wg.Done()
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.Timeout)
	conn, err := t.d.Dial(ctx, master)
	cancel()
	if err == nil {
		conn.Close()
	} else if t.d.Refresh != nil {
		t.d.Refresh(t.ctx, master)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n.reaching = false
	if !n.parkedAt.Equal(episode) {
		return // unparked meanwhile
	}
	if err == nil {
		n.replaceParked()
		return
	}
	t.failedDial(master)
	n.parkedAt = time.Now()
}

// probed handles a probe's reply v: a node promoted since it was found a
// replica has its parked watches checked at once. t.mu is held.
func (n *node) probed(v value) {
	n.probing = false
	if n.parkedAt.IsZero() {
		return
	}
	_, primary := primaryRole(v)
	master := replicaOf(v)
	switch {
	case primary && (n.wasReplica || time.Since(n.requeuedAt) >= unreachedFor):
		// Promoted since the refusals (or, once in a while, promoted
		// before the first ROLE): the checks are sent again at once.
		n.requeuedAt = time.Now()
		n.eachParked(n.enqueue)
		n.unpark()
	case primary:
		// A primary refusing (the cluster is down, or a MOVED to a dead
		// master from a master): placed again, as for any refusal.
		n.replaceParked()
	case master != "" && n.parkMaster != "" && master != n.parkMaster:
		// It follows another master (another replica was promoted): its
		// refusals now name a node that answers.
		n.eachParked(n.enqueue)
		n.unpark()
	default:
		n.wasReplica = true
		if master != "" {
			n.parkMaster = master
		}
		n.probe.Reset(probeEvery)
	}
}

// replicaOf returns the master a ROLE reply of a replica names
// (["slave", ip, port, state, offset]), or "".
func replicaOf(v value) string {
	if v.kind != '*' || len(v.elems) < 3 || v.elems[0].str != "slave" || v.elems[1].str == "" {
		return ""
	}
	port := v.elems[2].str // an integer from Redis
	if v.elems[2].kind == ':' {
		port = strconv.FormatInt(v.elems[2].int, 10)
	}
	if port == "" {
		return ""
	}
	return net.JoinHostPort(v.elems[1].str, port)
}

// roleDue reports whether the primary check's ROLE is to be read again:
// every Ping, and every bare (at most every second when idle, every
// 100ms with new checks) while the primary names no replica (right after
// a failover, until the old primary rejoins as one), while the node has
// watches. t.mu is held.
func (n *node) roleDue(bare time.Duration) bool {
	if n.t.d.DialAddr == nil || n.empty() {
		return false
	}
	since := time.Since(n.roleAt)
	return since >= n.t.cfg.Ping || len(n.replicas) == 0 && since >= bare
}

// writeRole writes a ROLE when one is due (roleDue), with the checks a
// new hold or a change sends: a primary that named no replica 100ms ago
// is asked again as soon as there are holds whose loss a failover could
// hide (a failover may follow the last one at once). t.mu is held.
func (n *node) writeRole(conn net.Conn, w *bufio.Writer, bare time.Duration) {
	if !n.roleDue(bare) {
		return
	}
	n.roleAt = time.Now()
	writeCmd(w, "ROLE")
	n.sentLocked(conn, sent{role: true})
	// A primary's replication id changes when its first replica attaches
	// (Redis starts a new history with the backlog).
	writeCmd(w, "INFO", "replication")
	n.sentLocked(conn, sent{replInfo: true})
}

// writeChecks writes the queue as check calls, by spec and slot, at most
// Batch keys each. t.mu is held.
func (n *node) writeChecks(conn net.Conn, w *bufio.Writer) {
	t := n.t
	if n.groups == nil {
		n.groups = map[checkGroup][]watchRef{}
	}
	order, groups := n.order[:0], n.groups
	for _, x := range n.queue {
		if x.queuedOn == n {
			x.queuedOn, x.counted = nil, false
		}
		if x.stopped || x.n != n || x.inflight {
			continue
		}
		x.fresh = false
		g := checkGroup{spec: x.target.Spec}
		if t.cfg.Slot != nil {
			g.slot = t.cfg.Slot(x.target.Key)
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], watchRef{x, x.inc})
	}
	n.queue = n.queue[:0]
	n.queued = 0
	defer func() {
		// The groups' slices are the checks' now (sent.check).
		clear(groups)
		clear(order)
		n.order = order[:0]
	}()
	for _, g := range order {
		ws := groups[g]
		if !n.loaded[g.spec] {
			writeCmd(w, "SCRIPT", "LOAD", g.spec.Source)
			n.sentLocked(conn, sent{})
			n.loaded[g.spec] = true
		}
		for len(ws) > 0 {
			k := min(len(ws), t.cfg.Batch)
			part := ws[:k:k]
			ws = ws[k:]
			// A small call's reads track its keys; a larger one's keys
			// are tracked first (EXISTS), then read untracked: a change
			// after the EXISTS is announced, one before it is in the
			// check's reply.
			apart := len(part) > armApart
			args := n.args[:0]
			if apart {
				args = append(args, "EXISTS")
				for _, x := range part {
					args = append(args, x.w.target.Key)
				}
			}
			a := &armed{}
			n.arm(conn, w, a, args)
			args = append(args[:0], "EVALSHA_RO", g.spec.SHA1, strconv.Itoa(len(part)))
			for _, x := range part {
				args = append(args, x.w.target.Key)
			}
			for _, x := range part {
				args = append(args, x.w.target.Field)
				x.w.inflight, x.w.apart = true, apart
			}
			writeCmd(w, args...)
			clear(args) // no key outlives its watch here
			n.args = args[:0]
			n.sentLocked(conn, sent{check: part, spec: g.spec, armed: a})
		}
	}
}

// armApart is the most keys a check or relayed call may carry with its
// keys tracked by the script's own reads. The connection tracks in OPTIN
// mode: only a command after CLIENT CACHING yes tracks what it reads, and
// Redis 7.0 tracks, for each read inside a script, every key the call
// names, so a call of k keys that reads each costs k² insertions in the
// tracking table (a 500-key renewal cost the server about 15ms of CPU,
// 2ms with its keys tracked apart: BenchmarkRelay_renewal). A larger call
// is sent untracked, with an EXISTS of its keys tracked apart: before a
// check, after a renewal (in a MULTI with it).
const armApart = 8

// armed says whether a command that tracks the keys of a check or a
// relayed call was refused (a BUSY, a LOADING or a TRYAGAIN that ended
// before the call ran): the call's keys are then not tracked, whatever
// the call's own reply.
type armed struct{ refused bool }

// arm writes CLIENT CACHING yes and then the read args (none: the
// command after it tracks), which tracks the keys it reads. t.mu is held.
func (n *node) arm(conn net.Conn, w *bufio.Writer, a *armed, args []string) {
	writeCmd(w, "CLIENT", "CACHING", "yes")
	n.sentLocked(conn, sent{arming: a})
	if len(args) > 0 {
		writeCmd(w, args...)
		n.sentLocked(conn, sent{arming: a})
	}
}

// writeRelays writes the relayed calls queued. Redis forgets who tracks
// a key when it changes, NOLOOP trackers included: a small call is
// tracked (CLIENT CACHING yes), its script reading its keys again after
// its writes; a larger one goes in a MULTI with an EXISTS of its keys
// after it, tracked apart (armApart). t.mu is held.
func (n *node) writeRelays(conn net.Conn, w *bufio.Writer) {
	for i, r := range n.relays {
		if !n.loaded[r.script] {
			writeCmd(w, "SCRIPT", "LOAD", r.script.Source)
			n.sentLocked(conn, sent{})
			n.loaded[r.script] = true
		}
		if len(r.renewed) <= armApart {
			r.armed = &armed{}
			n.arm(conn, w, r.armed, nil)
			writeCmd(w, r.args...)
			r.written = true
			n.sentLocked(conn, sent{relay: r})
			n.relays[i] = nil
			continue
		}
		r.multi = true
		writeCmd(w, "MULTI")
		n.sentLocked(conn, sent{})
		writeCmd(w, r.args...)
		n.sentLocked(conn, sent{queued: r})
		args := append(n.args[:0], "EXISTS")
		for _, x := range r.renewed {
			args = append(args, x.Key)
		}
		n.arm(conn, w, &armed{}, args) // a refusal aborts the EXEC
		clear(args)
		n.args = args[:0]
		writeCmd(w, "EXEC")
		r.written = true
		n.sentLocked(conn, sent{relay: r})
		n.relays[i] = nil
	}
	n.relays = n.relays[:0]
}

// read reads replies and pushes until the connection fails.
func (n *node) read(conn net.Conn, r *bufio.Reader) {
	t := n.t
	for {
		v, err := readValue(r)
		if err != nil {
			conn.Close() // the sender stops at its next flush, or at done
			return
		}
		if v.kind == '>' {
			n.push(v)
			continue
		}
		t.mu.Lock()
		if len(n.pending) == 0 {
			t.mu.Unlock()
			conn.Close()
			return
		}
		s := n.pending[0]
		n.pending = n.pending[1:]
		if len(n.pending) == 0 {
			_ = conn.SetReadDeadline(time.Time{}) // idle: wait for pushes
		} else {
			// The oldest command awaiting its reply bounds the wait:
			// commands sent since do not move it, or a connection that
			// stopped answering would never be taken for dead while
			// new holds keep sending checks.
			_ = conn.SetReadDeadline(n.pending[0].at.Add(t.cfg.Timeout))
		}
		calls := n.replied(s, v)
		t.mu.Unlock()
		for _, c := range calls {
			if c.changed != nil {
				c.changed()
			} else {
				c.lost(c.tag, c.how)
			}
		}
	}
}

// push handles an invalidation: the watches of the keys it names (every
// watch for a flush) are checked, unless a check of theirs is in flight
// that tracks the keys by its own reads (it runs after the change, and
// tracks the key again); after one that tracked them apart, once it has
// replied.
func (n *node) push(v value) {
	if len(v.elems) < 2 || v.elems[0].kind != '$' || !strings.EqualFold(v.elems[0].str, "invalidate") {
		return
	}
	t := n.t
	t.mu.Lock()
	defer t.mu.Unlock()
	queue := func(w *Watch) {
		if !w.inflight {
			n.enqueue(w)
		} else if w.apart {
			// The change may have come after the check's EXISTS and
			// untracked the key: checked again after the reply. (A
			// check that tracks by its own reads runs after the change.)
			w.again = true
		}
	}
	if v.elems[1].kind != '*' {
		n.each(queue)
		return
	}
	for _, k := range v.elems[1].elems {
		n.eachOf(n.watches[k.str], queue)
	}
}

// callback is a watch's callback due: a loss, or a change watch's check,
// taken under t.mu (the watch may be added again before it runs).
type callback struct {
	lost    func(uint64, Loss)
	changed func()
	tag     uint64
	how     Loss
}

// replied handles the reply v of s. t.mu is held; it returns the
// callbacks to call once it is released.
func (n *node) replied(s sent, v value) []callback {
	if s.queued != nil {
		if v.kind == '-' {
			s.queued.refused = v.str
		}
		return nil
	}
	if s.arming != nil {
		if v.kind == '-' {
			s.arming.refused = true
		}
		return nil
	}
	if s.relay != nil {
		n.relayed(s.relay, v)
		return nil
	}
	if s.probe {
		n.probed(v)
		return nil
	}
	if s.replInfo {
		if id := infoField(v.str, "master_replid"); id != "" && infoField(v.str, "role") == "master" {
			n.replID = id
		}
		return nil
	}
	if s.role {
		if replicas, ok := primaryRole(v); ok {
			n.replicas = replicas
			n.remember(replicas)
		} else if n.conn != nil {
			// Demoted: its reads no longer speak for the holds. The
			// watches are checked again on the next connection.
			n.conn.Close()
		}
		return nil
	}
	if s.check == nil || n.t.closed {
		return nil
	}
	t := n.t
	var calls []callback
	var again []*Watch
	for _, r := range s.check {
		if r.current() { // else a check of an earlier add
			r.w.inflight = false
			if r.w.again {
				r.w.again = false
				again = append(again, r.w)
			}
		}
	}
	// live are the watches the check still speaks for.
	live := func(yield func(*Watch) bool) {
		for _, r := range s.check {
			if r.current() && !r.w.stopped && r.w.n == n && !yield(r.w) {
				return
			}
		}
	}
	// Once the reply is read (a lost hold is stopped by it), the watches
	// announced while the check was in flight are checked again, and
	// those whose keys its arming left untracked (refused) after the
	// backoff. (A refused check is sent again anyway, after its own delay.)
	read := false
	defer func() {
		if !read {
			return
		}
		for _, w := range again {
			if !w.stopped && w.n == n {
				n.enqueue(w)
			}
		}
		if s.armed != nil && s.armed.refused {
			for w := range live {
				w.retry()
			}
		}
	}()
	if v.kind == '-' {
		switch {
		case strings.HasPrefix(v.str, "NOSCRIPT"):
			n.loaded[s.spec] = false
			for w := range live {
				n.enqueue(w)
			}
		case strings.HasPrefix(v.str, "MOVED ") || strings.HasPrefix(v.str, "ASK "):
			f := strings.Fields(v.str)
			to := f[len(f)-1]
			if at, down := t.unreached[to]; down && time.Since(at) < t.unreachedFor {
				// A replica not yet promoted names the master that
				// could not be reached: the watches wait on it for its
				// promotion (park), and no dial of the dead node.
				for w := range live {
					n.park(w)
				}
				break
			}
			for w := range live {
				t.place(w, to)
			}
		case strings.HasPrefix(v.str, "CLUSTERDOWN"):
			// Once a crashed master is marked failed, its replica
			// refuses the checks so until it has promoted itself: they
			// wait on it as for a MOVED (a node that is a primary gives
			// them back at its first ROLE, see probed).
			for w := range live {
				n.park(w)
			}
		default: // LOADING, BUSY, ...: again after the backoff
			for w := range live {
				w.retry()
			}
		}
		return nil
	}
	if v.kind != '*' || len(v.elems) != len(s.check) {
		for w := range live {
			w.retry()
		}
		return nil
	}
	read = true
	for i, r := range s.check {
		w := r.w
		if !r.current() || w.stopped || w.n != n {
			continue
		}
		if w.changed != nil {
			calls = append(calls, callback{changed: w.changed}) // the key is tracked again
			continue
		}
		switch left := v.elems[i].int; {
		case left == -3:
			w.stopLocked()
			calls = append(calls, callback{lost: w.lost, tag: w.tag, how: Overwritten})
		case left == -2:
			w.stopLocked()
			calls = append(calls, callback{lost: w.lost, tag: w.tag, how: Gone})
		case left == -1:
			if w.timer != nil {
				w.timer.Stop()
			}
		default: // check again when the lease has run out
			w.after(time.Duration(left+1) * time.Millisecond)
		}
	}
	return calls
}

// relayed hands the call's reply (in v, or in v's EXEC reply) to its
// caller, and moves the lease check of each watch of a target renewed to
// the end of its new lease: the call announced nothing to this
// connection, and its reads tracked the key again. t.mu is held.
func (n *node) relayed(r *relay, v value) {
	switch {
	case !r.multi:
	case r.refused != "":
		v = value{kind: '-', str: r.refused} // EXECABORT: say why
	case v.kind == '*' && len(v.elems) == 3: // the call, CLIENT CACHING, EXISTS
		v = v.elems[0]
	case v.kind != '-':
		v = value{kind: '-', str: fmt.Sprintf("track: EXEC replied %c with %d values", v.kind, len(v.elems))}
	}
	if v.kind == '-' {
		if strings.HasPrefix(v.str, "NOSCRIPT") {
			n.loaded[r.script] = false
		}
		r.reply <- Reply{Err: errors.New(v.str)}
		return
	}
	if r.armed != nil && r.armed.refused {
		// The call ran untracked: its writes untracked the keys, which
		// its watches' checks track again.
		for _, x := range r.renewed {
			n.eachOf(n.watches[x.Key], func(w *Watch) {
				if !w.stopped && !w.inflight {
					n.enqueue(w)
				}
			})
		}
	} else if v.kind == '*' && len(v.elems) == len(r.renewed) {
		for i, x := range r.renewed {
			if v.elems[i].kind != ':' || v.elems[i].int != 1 {
				continue
			}
			n.eachOf(n.watches[x.Key], func(w *Watch) {
				if w.lost != nil && !w.stopped && w.target.Field == x.Field {
					w.after(r.lease + time.Millisecond)
				}
			})
		}
	}
	r.reply <- Reply{Val: v.any()}
}
