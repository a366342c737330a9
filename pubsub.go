package lualock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// confirmWait bounds how long a new waiter waits for Redis to confirm its
// subscription before it goes on with the fallback timer alone.
const confirmWait = 2 * time.Second

// subscriber shares one pub/sub connection among every waiter of a client
// (one per cluster slot with sharded pub/sub). Each channel is subscribed
// once, while at least one waiter listens on it. A message wakes one waiter
// of its channel; a resubscription after a reconnect wakes all of them,
// since messages may have been lost meanwhile. Each channel also has one
// fallback timer, set to the earliest retry time its waiters asked for, which
// wakes one waiter when it fires; so an idle lock costs one retry per timer
// period per client, however many goroutines wait on it.
type subscriber struct {
	c      *Client
	mu     sync.Mutex
	conns  map[int]*psConn
	chans  map[string]*chanSub
	wg     sync.WaitGroup // listener goroutines
	closed bool
}

// psConn is one go-redis PubSub and the goroutine that reads it.
type psConn struct {
	ps      *redis.PubSub
	key     int
	perSlot bool // one of the sharded connections of a cluster, one per slot
	chans   int
}

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
}

// subscription is one waiter's interest in a channel.
type subscription struct {
	s    *subscriber
	ch   *chanSub
	wake chan struct{} // one pending wake-up at most
	done bool
}

func newSubscriber(c *Client) *subscriber {
	return &subscriber{c: c, conns: map[int]*psConn{}, chans: map[string]*chanSub{}}
}

// subscribe registers a waiter on channel, subscribing it if it is new, and
// waits (up to confirmWait) until Redis has confirmed the subscription, so
// that an attempt made after it returns cannot miss the next release. fresh
// is false when the channel was subscribed and confirmed already (a
// lingering subscription): then no release since the caller's last attempt
// can have gone unheard, since a message with no waiter to wake is kept for
// the next one.
func (s *subscriber) subscribe(ctx context.Context, channel string) (sub *subscription, fresh bool, err error) {
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
		if cs, err = s.add(ctx, channel); err != nil {
			s.mu.Unlock()
			return nil, false, err
		}
	}
	sub = &subscription{s: s, ch: cs, wake: make(chan struct{}, 1)}
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

// add subscribes a new channel. s.mu is held.
func (s *subscriber) add(ctx context.Context, channel string) (*chanSub, error) {
	key := 0
	_, cluster := s.c.rdb.(*redis.ClusterClient)
	if s.c.cfg.ShardedPubSub && cluster {
		key = slot(channel)
	}
	conn := s.conns[key]
	var err error
	switch {
	case conn != nil && s.c.cfg.ShardedPubSub:
		err = conn.ps.SSubscribe(ctx, channel)
	case conn != nil:
		err = conn.ps.Subscribe(ctx, channel)
	case s.c.cfg.ShardedPubSub:
		// A cluster client binds a sharded PubSub to the node of its first
		// channel: create it with the channel.
		conn = &psConn{ps: s.c.rdb.SSubscribe(ctx, channel), key: key, perSlot: cluster}
	default:
		conn = &psConn{ps: s.c.rdb.Subscribe(ctx), key: key}
		err = conn.ps.Subscribe(ctx, channel)
	}
	if err != nil {
		if conn.chans == 0 && s.conns[key] == nil {
			_ = conn.ps.Close()
		}
		return nil, fmt.Errorf("subscribe %s: %w", channel, err)
	}
	if s.conns[key] == nil {
		s.conns[key] = conn
		msgs := conn.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
		s.wg.Add(1)
		go s.listen(msgs)
	}
	conn.chans++
	cs := &chanSub{name: channel, conn: conn, ready: make(chan struct{}), ceil: s.c.cfg.MaxWaitTimer}
	s.chans[channel] = cs
	return cs, nil
}

// listen routes what one pub/sub connection receives until it is closed.
func (s *subscriber) listen(msgs <-chan any) {
	defer s.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				s.confirmed(m.Channel)
			}
		case *redis.Message:
			s.message(m.Channel)
		}
	}
}

func (s *subscriber) confirmed(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.chans[channel]
	if cs == nil {
		return
	}
	if !cs.confirmed {
		cs.confirmed = true
		close(cs.ready)
		return
	}
	// Subscribed again after a reconnect: a release may have gone unheard.
	for _, w := range cs.waiters {
		w.signal()
	}
	if len(cs.waiters) == 0 {
		cs.pending = true // for the next waiter of a lingering channel
	}
}

func (s *subscriber) message(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs := s.chans[channel]; cs != nil && !cs.wakeOne() && len(cs.waiters) == 0 {
		cs.pending = true
	}
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
	if len(cs.waiters) > 0 {
		d := cs.ceil
		if acquired {
			d = min(lease+time.Millisecond, cs.ceil)
		}
		if cs.timer == nil || time.Now().Add(d).Before(cs.timerAt) {
			s.arm(cs, d) // the others must not go without a timer
		}
		return
	}
	if cs.timer != nil {
		cs.timer.Stop()
		cs.timer = nil
	}
	if linger := s.c.cfg.SubscriptionLinger; acquired && linger > 0 {
		var t *time.Timer
		t = time.AfterFunc(linger, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if cs.linger == t && len(cs.waiters) == 0 && !s.closed {
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
	conn.chans--
	ctx, cancel := context.WithTimeout(context.Background(), confirmWait)
	defer cancel()
	if conn.perSlot && conn.chans == 0 {
		// One connection per slot: close it rather than keep it idle.
		delete(s.conns, conn.key)
		_ = conn.ps.Close()
		return
	}
	if s.c.cfg.ShardedPubSub {
		_ = conn.ps.SUnsubscribe(ctx, cs.name)
	} else {
		_ = conn.ps.Unsubscribe(ctx, cs.name)
	}
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

// close closes every pub/sub connection and waits for the listeners.
func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	var first error
	for _, conn := range s.conns {
		if err := conn.ps.Close(); err != nil && first == nil {
			first = err
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
	clear(s.chans)
	clear(s.conns)
	s.mu.Unlock()
	s.wg.Wait()
	return first
}
