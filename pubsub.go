package lualock

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// confirmWait bounds how long a new waiter waits for Redis to confirm its
// subscription before it goes on with the fallback timer alone.
const confirmWait = 2 * time.Second

// subscriber shares one pub/sub connection among every waiter of a client
// (one per primary with sharded pub/sub on a cluster). Each channel is subscribed
// once, while at least one waiter listens on it. A message wakes one waiter
// of its channel; a resubscription after a reconnect wakes all of them,
// since messages may have been lost meanwhile. Each channel also has one
// fallback timer, set to the earliest retry time its waiters asked for, which
// wakes one waiter when it fires; so an idle lock costs one retry per timer
// period per client, however many goroutines wait on it.
//
// The state lives under mu; the network does not. SUBSCRIBE, UNSUBSCRIBE
// and the opening and closing of connections are queued under mu, in the
// order of the state changes they follow, and sent by one sender goroutine
// outside it, so a slow Redis never holds up the delivery of messages or
// the bookkeeping of other waiters.
type subscriber struct {
	c       *Client
	sharded bool // SSUBSCRIBE rather than SUBSCRIBE
	mu      sync.Mutex
	conns   map[string]*psConn // by node address; "" for the one unsharded connection
	chans   map[string]*chanSub
	ops     []psOp         // commands to send, in order
	sending bool           // the sender goroutine runs
	wg      sync.WaitGroup // listener goroutines and the sender
	closed  bool
}

// psConn is one go-redis PubSub and the goroutine that reads it.
type psConn struct {
	ps      *redis.PubSub // nil until the sender has opened it
	key     string        // the node of a per-node connection; "" otherwise
	perNode bool          // one of the sharded connections of a cluster, one per primary
	chans   int
	dead    bool // dropped: its last channel left
	// ownUnsubs counts the SUNSUBSCRIBE sent on it whose confirmation has
	// not come, to tell them from those Redis sends when a slot moves.
	ownUnsubs map[string]int
}

// psOp is a pub/sub command for the sender.
type psOp struct {
	kind    psOpKind
	conn    *psConn
	channel string
	// movedFrom is the node a moved slot's channel was on (opPlace): the
	// cluster's slot map must be reloaded until it points elsewhere.
	movedFrom string
}

type psOpKind int

const (
	opSubscribe psOpKind = iota
	opUnsubscribe
	opClose
	opPlace // sharded on a cluster: find the channel's primary, then subscribe there
)

type chanSub struct {
	name      string
	conn      *psConn
	ready     chan struct{} // closed at the first confirmation
	confirmed bool
	waiters   []*subscription
	timer     *time.Timer
	timerAt   time.Time
	ceil      time.Duration // the longest timer its waiters asked for
	linger    *time.Timer   // unsubscribes a channel left without waiters
	pending   bool          // a message came while no waiter listened
	// watchers are held locks listening for a force release (see
	// holdwatch.go): every message reaches all of them.
	watchers []*holdWatcher
}

// subscription is one waiter's interest in a channel.
type subscription struct {
	s    *subscriber
	ch   *chanSub
	wake chan struct{} // one pending wake-up at most
	done bool
	// twin is the same waiter's subscription on the other kind of pub/sub
	// (PubSubBoth). The two share wake, so a message on either wakes the
	// waiter, and hint and release act on both.
	twin *subscription
}

func newSubscriber(c *Client, sharded bool) *subscriber {
	return &subscriber{c: c, sharded: sharded, conns: map[string]*psConn{}, chans: map[string]*chanSub{}}
}

// newSubscribers returns the subscribers of mode (resolved): one, or with
// PubSubBoth a plain one and a sharded one.
func newSubscribers(c *Client, mode PubSubMode) []*subscriber {
	switch mode {
	case PubSubSharded:
		return []*subscriber{newSubscriber(c, true)}
	case PubSubBoth:
		return []*subscriber{newSubscriber(c, false), newSubscriber(c, true)}
	default:
		return []*subscriber{newSubscriber(c, false)}
	}
}

// subscribe registers a waiter on channel with every subscriber of the
// client, as subscriber.subscribe does with one. With two (PubSubBoth) the
// waiter gets one subscription whose twin is the other, sharing one wake-up
// channel; it is fresh when either is.
func (c *Client) subscribe(ctx context.Context, channel string) (*subscription, bool, error) {
	sub, fresh, err := c.subs[0].subscribe(ctx, channel, nil)
	if err != nil || len(c.subs) == 1 {
		return sub, fresh, err
	}
	twin, fresh2, err := c.subs[1].subscribe(ctx, channel, sub.wake)
	if err != nil {
		sub.release(false, 0)
		return nil, false, err
	}
	sub.twin = twin
	return sub, fresh || fresh2, nil
}

// subscribe registers a waiter on channel, subscribing it if it is new, and
// waits (up to confirmWait) until Redis has confirmed the subscription, so
// that an attempt made after it returns cannot miss the next release. fresh
// is false when the channel was subscribed and confirmed already (a
// lingering subscription): then no release since the caller's last attempt
// can have gone unheard, since a message with no waiter to wake is kept for
// the next one. A subscription Redis does not confirm in time (it is
// unreachable) is not an error: go-redis subscribes again when it
// reconnects, and the waiter's fallback timer covers the meantime.
//
// wake, when not nil, is the wake-up channel of the waiter's subscription
// on the other kind of pub/sub (PubSubBoth), shared by this one.
func (s *subscriber) subscribe(ctx context.Context, channel string, wake chan struct{}) (sub *subscription, fresh bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false, ErrClosed
	}
	cs := s.chans[channel]
	if cs != nil && cs.linger != nil {
		cs.linger.Stop()
		cs.linger = nil
	}
	if cs == nil {
		cs = s.add(channel)
	}
	if wake == nil {
		wake = make(chan struct{}, 1)
	}
	sub = &subscription{s: s, ch: cs, wake: wake}
	cs.waiters = append(cs.waiters, sub)
	if cs.pending {
		cs.pending = false
		sub.signal()
	}
	ready, fresh := cs.ready, !cs.confirmed
	s.mu.Unlock()
	if !fresh {
		return sub, false, nil
	}

	t := time.NewTimer(confirmWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
		sub.release(false, 0)
		return nil, false, ctx.Err()
	case <-s.c.closing:
		sub.release(false, 0)
		return nil, false, ErrClosed
	}
	return sub, true, nil
}

// add records a new channel and queues its subscription. s.mu is held.
func (s *subscriber) add(channel string) *chanSub {
	cs := &chanSub{name: channel, ready: make(chan struct{}), ceil: s.c.cfg.MaxWaitTimer}
	s.chans[channel] = cs
	s.attach(cs, "")
	return cs
}

// attach puts cs on its connection and queues its subscription: the one
// connection, or with sharded pub/sub on a cluster the connection to the
// primary of its slot, which the sender looks up (opPlace); movedFrom is
// the node its slot has left, if it moved. s.mu is held.
func (s *subscriber) attach(cs *chanSub, movedFrom string) {
	if _, cluster := s.c.rdb.(*redis.ClusterClient); cluster && s.sharded {
		s.enqueue(psOp{kind: opPlace, channel: cs.name, movedFrom: movedFrom})
		return
	}
	conn := s.conns[""]
	if conn == nil {
		conn = &psConn{ownUnsubs: map[string]int{}}
		s.conns[""] = conn
	}
	s.join(cs, conn)
}

// join puts cs on conn and queues its subscription. s.mu is held.
func (s *subscriber) join(cs *chanSub, conn *psConn) {
	conn.chans++
	cs.conn = conn
	s.enqueue(psOp{kind: opSubscribe, conn: conn, channel: cs.name})
}

// place puts a channel on the connection to the primary that serves its
// slot (or, when its slot moved, the primary it moved to), opening one if
// needed. It runs in the sender: the lookup may reach Redis.
func (s *subscriber) place(ctx context.Context, op psOp) {
	cc := s.c.rdb.(*redis.ClusterClient)
	addr := masterOf(ctx, cc, op.channel)
	if op.movedFrom != "" {
		addr = s.relocated(ctx, cc, op.channel, op.movedFrom)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chans[op.channel]
	if s.closed || cs == nil || cs.conn != nil {
		return // gone meanwhile, or placed by a later op
	}
	conn := s.conns[addr]
	if conn == nil {
		conn = &psConn{key: addr, perNode: true, ownUnsubs: map[string]int{}}
		s.conns[addr] = conn
	}
	s.join(cs, conn)
}

// drop closes a per-node connection that no channel uses. s.mu is held.
func (s *subscriber) drop(conn *psConn) {
	conn.dead = true
	if s.conns[conn.key] == conn {
		delete(s.conns, conn.key)
	}
	s.enqueue(psOp{kind: opClose, conn: conn})
}

// enqueue queues op for the sender, starting it if it is idle. s.mu is held.
func (s *subscriber) enqueue(op psOp) {
	if s.closed {
		return
	}
	s.ops = append(s.ops, op)
	if !s.sending {
		s.sending = true
		s.wg.Add(1)
		go s.send()
	}
}

// send runs the queued commands in order until the queue is empty or the
// subscriber closes.
func (s *subscriber) send() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if s.closed || len(s.ops) == 0 {
			s.ops, s.sending = nil, false
			s.mu.Unlock()
			return
		}
		op := s.ops[0]
		s.ops[0] = psOp{}
		s.ops = s.ops[1:]
		var ps *redis.PubSub
		if op.conn != nil {
			ps = op.conn.ps
		}
		s.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), confirmWait)
		sharded := s.sharded
		// Errors are left to go-redis: a PubSub keeps its channels and
		// subscribes them again when it reconnects, which the listener sees
		// as a confirmation that wakes the channel's waiters.
		switch {
		case op.kind == opPlace:
			s.place(ctx, op)
		case op.kind == opSubscribe && ps == nil:
			s.open(ctx, op)
		case op.kind == opSubscribe && sharded:
			_ = ps.SSubscribe(ctx, op.channel)
		case op.kind == opSubscribe:
			_ = ps.Subscribe(ctx, op.channel)
		case ps == nil:
			// never opened: nothing to undo
		case op.kind == opUnsubscribe && sharded:
			_ = ps.SUnsubscribe(ctx, op.channel)
		case op.kind == opUnsubscribe:
			_ = ps.Unsubscribe(ctx, op.channel)
		case op.kind == opClose:
			_ = ps.Close()
		}
		cancel()
	}
}

// open opens op's connection with op's channel and starts its listener.
func (s *subscriber) open(ctx context.Context, op psOp) {
	var ps *redis.PubSub
	switch {
	case s.sharded:
		// A cluster client binds a sharded PubSub to the node of its first
		// channel: create it with the channel.
		ps = s.c.rdb.SSubscribe(ctx, op.channel)
	default:
		ps = s.c.rdb.Subscribe(ctx)
		_ = ps.Subscribe(ctx, op.channel)
	}
	s.mu.Lock()
	if s.closed || op.conn.dead {
		s.mu.Unlock()
		_ = ps.Close()
		return
	}
	op.conn.ps = ps
	s.wg.Add(1)
	if op.conn.perNode {
		s.mu.Unlock()
		go s.listenNode(op.conn)
		return
	}
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	s.mu.Unlock()
	go s.listen(op.conn, msgs)
}

// relocated waits until the cluster client routes channel to a node other
// than from, where its slot was, reloading the client's slot map (go-redis
// reloads it in the background), and returns that node. It gives up at
// ctx's end: the subscription may then go to the old node, which refuses
// it, and the channel's waiters fall back on their timers.
func (s *subscriber) relocated(ctx context.Context, cc *redis.ClusterClient, channel, from string) string {
	for {
		cc.ReloadState(ctx)
		if addr := masterOf(ctx, cc, channel); addr != from && addr != "" {
			return addr
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return from
		case <-s.c.closing:
			t.Stop()
			return from
		}
	}
}

// masterOf returns the address of the node that cc routes key to.
func masterOf(ctx context.Context, cc *redis.ClusterClient, key string) string {
	n, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return n.Options().Addr
}

// listen routes what one pub/sub connection receives until it is closed.
func (s *subscriber) listen(conn *psConn, msgs <-chan any) {
	defer s.wg.Done()
	for m := range msgs {
		s.route(conn, m)
	}
}

// route handles one thing a pub/sub connection received.
func (s *subscriber) route(conn *psConn, m any) {
	switch m := m.(type) {
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			s.confirmed(conn, m.Channel)
		case "sunsubscribe":
			s.unsubscribed(conn, m.Channel)
		}
	case *redis.Message:
		s.message(m.Channel)
	}
}

// nodeCheck is how long a per-node connection may stay silent before it is
// pinged, and then before it counts as broken.
const nodeCheck = 3 * time.Second

// listenNode reads a per-node sharded connection itself rather than through
// go-redis's channel: on a reconnect go-redis would pick a random node and
// subscribe every channel of the connection in one SSUBSCRIBE, which Redis
// refuses across slots (CROSSSLOT), leaving the channels dead. Here a broken
// connection (a read error, or silence after a ping) is dropped and its
// channels are placed again, each on the primary of its slot; their waiters
// wake at the new confirmations.
func (s *subscriber) listenNode(conn *psConn) {
	defer s.wg.Done()
	ctx := context.Background()
	pinged := false
	for {
		m, err := conn.ps.ReceiveTimeout(ctx, nodeCheck)
		if err == nil {
			pinged = false
			s.route(conn, m)
			continue
		}
		if s.gone(conn) {
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !pinged {
			pinged = true
			if conn.ps.Ping(ctx) == nil {
				continue
			}
		}
		// Broken: let a restarting node or a failover settle a moment.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-s.c.closing:
			t.Stop()
			return
		}
		s.replace(conn)
		return
	}
}

// gone reports whether conn was dropped or the subscriber closed.
func (s *subscriber) gone(conn *psConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed || conn.dead
}

// replace drops a broken per-node connection and places its channels again.
func (s *subscriber) replace(conn *psConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || conn.dead {
		return
	}
	s.drop(conn)
	for _, cs := range s.chans {
		if cs.conn == conn {
			cs.conn = nil
			conn.chans--
			s.attach(cs, "")
		}
	}
}

// unsubscribed handles a SUNSUBSCRIBE confirmation. One that no
// SUNSUBSCRIBE of ours asked for comes from Redis: the channel's slot has
// moved to another node (or this node is no longer a primary), so the
// channel is subscribed again where its slot now is, leaving the other
// channels of the connection where they are; its waiters wake at the
// confirmation, since releases may have gone unheard meanwhile.
func (s *subscriber) unsubscribed(conn *psConn, channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := conn.ownUnsubs[channel]; n > 0 {
		if n == 1 {
			delete(conn.ownUnsubs, channel)
		} else {
			conn.ownUnsubs[channel] = n - 1
		}
		return
	}
	cs := s.chans[channel]
	if s.closed || cs == nil || cs.conn != conn {
		return
	}
	if !conn.perNode {
		s.enqueue(psOp{kind: opSubscribe, conn: conn, channel: channel})
		return
	}
	cs.conn = nil
	if conn.chans--; conn.chans == 0 {
		s.drop(conn)
	}
	s.attach(cs, conn.key)
}

func (s *subscriber) confirmed(conn *psConn, channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chans[channel]
	if cs == nil || cs.conn != conn {
		return
	}
	if !cs.confirmed {
		cs.confirmed = true
		close(cs.ready)
		return
	}
	// Subscribed again after a reconnect: a release may have gone unheard.
	s.resubscribed(channel, len(cs.waiters))
	for _, w := range cs.waiters {
		w.signal()
	}
	notifyWatchers(cs.watchers)
	if len(cs.waiters) == 0 {
		cs.pending = true // for the next waiter of a lingering channel
	}
}

func (s *subscriber) message(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chans[channel]
	if cs == nil || s.closed {
		return
	}
	if !cs.wakeOne() && len(cs.waiters) == 0 {
		cs.pending = true
	}
	notifyWatchers(cs.watchers)
}

// wakeOne wakes the longest-idle waiter that has no wake-up pending and
// moves it to the back. It reports whether it woke one. s.mu is held.
func (cs *chanSub) wakeOne() bool {
	for i, w := range cs.waiters {
		if w.signal() {
			cs.waiters = append(append(cs.waiters[:i:i], cs.waiters[i+1:]...), w)
			return true
		}
	}
	return false
}

// signal leaves a wake-up for the waiter; false when one is pending already.
func (w *subscription) signal() bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// hint asks for a wake-up just after ttl (a negative ttl: the lock has no
// expiry), at least floor and at most ceil from now, by moving the channel's
// fallback timer earlier.
func (w *subscription) hint(ttl, floor, ceil time.Duration) {
	if w.twin != nil {
		w.twin.hint(ttl, floor, ceil)
	}
	s := w.s
	d := ceil
	if ttl >= 0 {
		d = min(max(ttl+time.Millisecond, floor), ceil)
	}
	at := time.Now().Add(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := w.ch
	if w.done || (cs.timer != nil && !at.Before(cs.timerAt)) {
		return
	}
	cs.ceil = ceil
	s.arm(cs, d)
}

// arm sets the channel's fallback timer to fire after d. When it fires it
// wakes one waiter and, while others remain, arms itself again at the
// channel's ceiling: the woken waiter may get the lock and never ask for
// another timer, and a lease that runs out publishes nothing. s.mu is held.
func (s *subscriber) arm(cs *chanSub, d time.Duration) {
	if cs.timer != nil {
		cs.timer.Stop()
	}
	cs.timerAt = time.Now().Add(d)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if cs.timer != t {
			return
		}
		cs.timer = nil
		cs.wakeOne()
		if len(cs.waiters) > 1 && !s.closed {
			s.arm(cs, cs.ceil)
		}
	})
	cs.timer = t
}

// release ends the waiter's interest: a wake-up it did not use passes to
// another waiter, and the last waiter of a channel unsubscribes it, at once
// or, when it got the lock (acquired), after Options.SubscriptionLinger.
// A waiter that got the lock with a lease (the watchdog's, or a fixed one)
// leaves the others a timer at that lease: if the lease runs out, nothing
// is published.
func (w *subscription) release(acquired bool, lease time.Duration) {
	if w.twin != nil {
		w.twin.release(acquired, lease)
	}
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	cs := w.ch
	cs.waiters = slices.DeleteFunc(cs.waiters, func(x *subscription) bool { return x == w })
	select {
	case <-w.wake:
		if !cs.wakeOne() && len(cs.waiters) == 0 {
			cs.pending = true
		}
	default:
	}
	if s.closed {
		return
	}
	if len(cs.waiters) > 0 || len(cs.watchers) > 0 {
		if len(cs.waiters) == 0 {
			if cs.timer != nil { // the watchers need no timer
				cs.timer.Stop()
				cs.timer = nil
			}
			return
		}
		d := cs.ceil
		if acquired {
			d = min(lease+time.Millisecond, cs.ceil)
		}
		if cs.timer == nil || time.Now().Add(d).Before(cs.timerAt) {
			s.arm(cs, d) // the others must not go without a timer
		}
		return
	}
	s.idle(cs, acquired)
}

// idle drops a channel left without waiters or watchers: at once or, when
// linger is set, after Options.SubscriptionLinger. s.mu is held.
func (s *subscriber) idle(cs *chanSub, linger bool) {
	if cs.timer != nil {
		cs.timer.Stop()
		cs.timer = nil
	}
	if d := s.c.cfg.SubscriptionLinger; linger && d > 0 {
		var t *time.Timer
		t = time.AfterFunc(d, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if cs.linger == t && len(cs.waiters) == 0 && len(cs.watchers) == 0 && !s.closed {
				cs.linger = nil
				s.unsubscribe(cs)
			}
		})
		cs.linger = t
		return
	}
	s.unsubscribe(cs)
}

// unsubscribe drops a channel that has no waiters. s.mu is held.
func (s *subscriber) unsubscribe(cs *chanSub) {
	delete(s.chans, cs.name)
	conn := cs.conn
	if conn == nil {
		return // not placed yet: the placement finds it gone
	}
	conn.chans--
	if conn.perNode && conn.chans == 0 {
		// One connection per primary: close it rather than keep it idle.
		s.drop(conn)
		return
	}
	if s.sharded {
		conn.ownUnsubs[cs.name]++
	}
	s.enqueue(psOp{kind: opUnsubscribe, conn: conn, channel: cs.name})
}

// counts returns the number of waiters, subscribed channels and connections.
func (s *subscriber) counts() (waiters, channels, conns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cs := range s.chans {
		waiters += len(cs.waiters)
	}
	return waiters, len(s.chans), len(s.conns)
}

// markClosed makes subscribe refuse new waiters and release skip the
// UNSUBSCRIBE of a channel: close is about to close the connections.
func (s *subscriber) markClosed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

// close closes every pub/sub connection and waits for the listeners and
// the sender.
func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	var open []*redis.PubSub
	for _, conn := range s.conns {
		if conn.ps != nil {
			open = append(open, conn.ps)
		}
	}
	for _, cs := range s.chans {
		if cs.timer != nil {
			cs.timer.Stop()
			cs.timer = nil
		}
		if cs.linger != nil {
			cs.linger.Stop()
			cs.linger = nil
		}
	}
	// Connections dropped but not closed yet: the sender will not run.
	for _, op := range s.ops {
		if op.kind == opClose && op.conn != nil && op.conn.ps != nil && !slices.Contains(open, op.conn.ps) {
			open = append(open, op.conn.ps)
		}
	}
	s.ops = nil
	clear(s.chans)
	clear(s.conns)
	s.mu.Unlock()
	var first error
	for _, ps := range open {
		if err := ps.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.wg.Wait()
	return first
}
