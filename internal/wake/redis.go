package wake

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Plain returns a transport that listens with SUBSCRIBE on one pub/sub
// connection of rdb, opened with the first channel.
func Plain(rdb redis.UniversalClient) Transport { return newPubSub(rdb, false) }

// Sharded returns a transport that listens with SSUBSCRIBE (Redis 7 sharded
// pub/sub). On a *redis.ClusterClient it opens one connection per primary
// whose slots have channels, reads each itself (a ping after nodeCheck of
// silence tells a dead node), places every channel again where its slot
// now is when its connection breaks or when Redis unsubscribes it (its slot
// moved), and closes a connection left without channels. On any other
// client it uses one connection, as Plain.
func Sharded(rdb redis.UniversalClient) Transport { return newPubSub(rdb, true) }

// opTimeout bounds each network step of the sender (a SUBSCRIBE, the
// lookup of a slot's primary).
const opTimeout = 2 * time.Second

// nodeCheck is how long a per-node connection may stay silent before it is
// pinged, and then before it counts as broken.
const nodeCheck = 3 * time.Second

// pubsub is the go-redis transport of one kind of pub/sub.
//
// The state lives under mu; the network does not. SUBSCRIBE, UNSUBSCRIBE
// and the opening and closing of connections are queued under mu, in the
// order of the state changes they follow, and sent by one sender goroutine
// outside it, so a slow Redis never holds up the delivery of messages or
// the hub's bookkeeping. Events go to the hub with mu released.
type pubsub struct {
	rdb     redis.UniversalClient
	sharded bool // SSUBSCRIBE rather than SUBSCRIBE
	ev      Events
	mu      sync.Mutex
	conns   map[string]*psConn // by node address; "" for the one connection
	chans   map[string]*psChan
	ops     []psOp         // commands to send, in order
	sending bool           // the sender goroutine runs
	wg      sync.WaitGroup // listener goroutines and the sender
	closed  bool
	closing chan struct{} // closed by Close
}

// psConn is one go-redis PubSub and the goroutine that reads it.
type psConn struct {
	ps      *redis.PubSub // nil until the sender has opened it
	key     string        // the node of a per-node connection; "" otherwise
	perNode bool          // one of the sharded connections of a cluster, one per primary
	chans   int
	dead    bool // dropped: its last channel left, or it broke
	heard   bool // a subscription was confirmed on it
	// ownUnsubs counts the SUNSUBSCRIBE sent on it whose confirmation has
	// not come, to tell them from those Redis sends when a slot moves.
	ownUnsubs map[string]int
}

// psChan is one subscribed channel.
type psChan struct {
	name      string
	conn      *psConn // nil while it is being placed
	confirmed bool    // Redis confirmed it once: the next confirmation is a resubscription
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

func newPubSub(rdb redis.UniversalClient, sharded bool) *pubsub {
	return &pubsub{rdb: rdb, sharded: sharded, conns: map[string]*psConn{}, chans: map[string]*psChan{}, closing: make(chan struct{})}
}

func (s *pubsub) Start(ev Events) { s.ev = ev }

func (s *pubsub) Subscribe(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	cs := &psChan{name: channel}
	s.chans[channel] = cs
	s.attach(cs, "")
}

// attach puts cs on its connection and queues its subscription: the one
// connection, or with sharded pub/sub on a cluster the connection to the
// primary of its slot, which the sender looks up (opPlace); movedFrom is
// the node its slot has left, if it moved. s.mu is held.
func (s *pubsub) attach(cs *psChan, movedFrom string) {
	if _, cluster := s.rdb.(*redis.ClusterClient); cluster && s.sharded {
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
func (s *pubsub) join(cs *psChan, conn *psConn) {
	conn.chans++
	cs.conn = conn
	s.enqueue(psOp{kind: opSubscribe, conn: conn, channel: cs.name})
}

// place puts a channel on the connection to the primary that serves its
// slot (or, when its slot moved, the primary it moved to), opening one if
// needed. It runs in the sender: the lookup may reach Redis.
func (s *pubsub) place(ctx context.Context, op psOp) {
	cc := s.rdb.(*redis.ClusterClient)
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
func (s *pubsub) drop(conn *psConn) {
	conn.dead = true
	if s.conns[conn.key] == conn {
		delete(s.conns, conn.key)
	}
	s.enqueue(psOp{kind: opClose, conn: conn})
}

// enqueue queues op for the sender, starting it if it is idle. s.mu is held.
func (s *pubsub) enqueue(op psOp) {
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
// transport closes.
func (s *pubsub) send() {
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

		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		// Errors are left to go-redis: a PubSub keeps its channels and
		// subscribes them again when it reconnects, which the listener sees
		// as a resubscription that wakes the channel's waiters.
		switch {
		case op.kind == opPlace:
			s.place(ctx, op)
		case op.kind == opSubscribe && ps == nil:
			s.open(ctx, op)
		case op.kind == opSubscribe && s.sharded:
			_ = ps.SSubscribe(ctx, op.channel)
		case op.kind == opSubscribe:
			_ = ps.Subscribe(ctx, op.channel)
		case ps == nil:
			// never opened: nothing to undo
		case op.kind == opUnsubscribe && s.sharded:
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
func (s *pubsub) open(ctx context.Context, op psOp) {
	var ps *redis.PubSub
	switch {
	case s.sharded:
		// A cluster client binds a sharded PubSub to the node of its first
		// channel: create it with the channel.
		ps = s.rdb.SSubscribe(ctx, op.channel)
	default:
		ps = s.rdb.Subscribe(ctx)
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
func (s *pubsub) relocated(ctx context.Context, cc *redis.ClusterClient, channel, from string) string {
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
		case <-s.closing:
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
func (s *pubsub) listen(conn *psConn, msgs <-chan any) {
	defer s.wg.Done()
	for m := range msgs {
		s.route(conn, m)
	}
}

// route handles one thing a pub/sub connection received.
func (s *pubsub) route(conn *psConn, m any) {
	switch m := m.(type) {
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			s.confirmed(conn, m.Channel)
		case "sunsubscribe":
			s.unsubscribed(conn, m.Channel)
		}
	case *redis.Message:
		s.ev.Message(m.Channel)
	}
}

// listenNode reads a per-node sharded connection itself rather than through
// go-redis's channel: on a reconnect go-redis would pick a random node and
// subscribe every channel of the connection in one SSUBSCRIBE, which Redis
// refuses across slots (CROSSSLOT), leaving the channels dead. Here a broken
// connection (a read error, or silence after a ping) is dropped and its
// channels are placed again, each on the primary of its slot; their waiters
// wake at the new confirmations.
func (s *pubsub) listenNode(conn *psConn) {
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
		if errors.As(err, &ne) && ne.Timeout() && !pinged && s.heard(conn) {
			pinged = true
			if conn.ps.Ping(ctx) == nil {
				continue
			}
		}
		// Broken, or silent without a confirmation (its node does not
		// serve its channels: a demoted primary back as a replica): let a
		// restarting node or a failover settle a moment, while the
		// cluster client reloads its slot map (go-redis does so on its
		// own only every minute), then place its channels again.
		if cc, ok := s.rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
			return
		}
		s.replace(conn)
		return
	}
}

// heard reports whether a subscription was confirmed on conn.
func (s *pubsub) heard(conn *psConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return conn.heard
}

// gone reports whether conn was dropped or the transport closed.
func (s *pubsub) gone(conn *psConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed || conn.dead
}

// replace drops a broken per-node connection and places its channels again.
func (s *pubsub) replace(conn *psConn) {
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
func (s *pubsub) unsubscribed(conn *psConn, channel string) {
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

// confirmed handles a subscription's confirmation: the first one since
// Subscribe, or a resubscription (go-redis reconnected, or the channel was
// placed again).
func (s *pubsub) confirmed(conn *psConn, channel string) {
	s.mu.Lock()
	conn.heard = true
	cs := s.chans[channel]
	if cs == nil || cs.conn != conn {
		s.mu.Unlock()
		return
	}
	again := cs.confirmed
	cs.confirmed = true
	s.mu.Unlock()
	if again {
		s.ev.Resubscribed(channel)
	} else {
		s.ev.Confirmed(channel)
	}
}

func (s *pubsub) Unsubscribe(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chans[channel]
	if s.closed || cs == nil {
		return
	}
	delete(s.chans, channel)
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
		conn.ownUnsubs[channel]++
	}
	s.enqueue(psOp{kind: opUnsubscribe, conn: conn, channel: channel})
}

func (s *pubsub) Counts() (subscriptions, conns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chans), len(s.conns)
}

// Close closes every pub/sub connection and waits for the listeners and
// the sender. It returns the first error of closing a connection.
func (s *pubsub) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	var open []*redis.PubSub
	for _, conn := range s.conns {
		if conn.ps != nil {
			open = append(open, conn.ps)
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
