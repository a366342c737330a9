// Package wake is lualock's wake-up hub: the goroutines that wait for a
// lock's release share one subscription per channel, and the hub decides
// which of them a release message, a fallback timer or a reconnect wakes.
//
// The hub holds no connection: it drives a Transport (plain pub/sub,
// sharded pub/sub, or both at once) and hears back through Events. Its
// unit tests drive it with a fake transport and a fake clock.
//
// The semantics, which the lock runtime relies on:
//   - Subscribe waits (up to Config.ConfirmWait) until Redis confirmed the
//     channel's subscription, so that an attempt made after it returns
//     cannot miss the next release; it tells whether the subscription is
//     fresh (a release may have gone unheard since the caller's last
//     attempt).
//   - A message wakes one waiter of its channel that asked to be woken
//     one per message (WakeOne), the one idle longest, and every waiter
//     that asked to be woken by every message (WakeAll, WakeShared: a
//     release that may serve several waiters, such as a write release for
//     the readers or a semaphore's release); a message that finds no
//     waiter is kept for the next one. A WakeShared waiter that gets the
//     lock wakes the other WakeShared waiters (what let one reader in lets
//     them all in).
//   - A resubscription (after a reconnect or a move) wakes every waiter
//     and every watcher: messages may have been lost meanwhile.
//   - Each channel has one fallback timer, set to the earliest retry time
//     its waiters asked for; it wakes one waiter and, while others remain,
//     arms itself again at the channel's ceiling. An idle lock costs one
//     retry per timer period per hub, however many goroutines wait on it.
//   - The last waiter of a channel unsubscribes it at once when it gives up,
//     after Config.Linger when it got the lock.
//   - Watchers (held locks listening for a force release) hear every
//     message and every resubscription of their channel.
//   - Wake wakes a channel's waiters as a message would, for a change
//     seen on the key itself that nobody published (its watchers are not
//     told).
package wake

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrClosed is what Subscribe returns once the hub is closed, unless
// Config.ErrClosed names another error.
var ErrClosed = errors.New("wake: hub closed")

// Transport carries the subscriptions of a hub. The hub calls Subscribe and
// Unsubscribe under its own lock, in the order of its state changes, so a
// transport must not block in them (it queues the network work) and must
// not call the hub's Events while it holds a lock of its own that those
// methods take. Each channel is subscribed once until it is unsubscribed.
type Transport interface {
	// Start gives the transport the events to report to; the hub calls
	// it once, in New, before anything else. It must send nothing.
	Start(ev Events)
	Subscribe(channel string)
	Unsubscribe(channel string)
	// Counts returns the channels subscribed (once per kind of pub/sub)
	// and the connections open.
	Counts() (subscriptions, conns int)
	// Close closes every connection and waits for the transport's
	// goroutines. No method is called after it.
	Close() error
}

// Events is how a transport reports back to its hub. Each may be called
// from any goroutine, never with a lock held that the transport's own
// Subscribe or Unsubscribe takes. Events of a channel the hub no longer
// has are ignored.
type Events interface {
	// Confirmed reports the first confirmation of a channel's
	// subscription since Subscribe: waiters waiting for it go on.
	Confirmed(channel string)
	// Resubscribed reports a confirmation after the first one (a
	// reconnect, a slot that moved): releases may have gone unheard
	// meanwhile, so every waiter and watcher of the channel wakes.
	Resubscribed(channel string)
	// Message reports a release message on a channel.
	Message(channel string)
}

// Clock is the time source of a hub's timers; tests drive a fake one.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, unless stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a Clock's pending call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether
	// it did.
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Config tunes a Hub. The zero value is usable.
type Config struct {
	// Linger is how long a channel stays subscribed after its last waiter
	// got the lock (Release with acquired) or its last watcher stopped.
	// 0: unsubscribe at once.
	Linger time.Duration
	// ConfirmWait bounds how long Subscribe waits for Redis to confirm a
	// new subscription before it returns (fresh) without it. Default 2s.
	ConfirmWait time.Duration
	// MaxTimer is a channel's fallback timer ceiling until a waiter's Hint
	// sets it. Default 10s.
	MaxTimer time.Duration
	// Closing, when set, is closed when the hub's owner begins to close:
	// from then on the hub counts as closed (no new waiter, no
	// unsubscription), as after Close.
	Closing <-chan struct{}
	// ErrClosed is the error Subscribe returns once the hub is closed.
	// Default ErrClosed.
	ErrClosed error
	// OnResubscribe, when set, is called at every resubscription with the
	// channel and its number of waiters, under the hub's lock: it must not
	// block nor call the hub.
	OnResubscribe func(channel string, waiters int)
	// Clock drives the timers. Default: the real clock.
	Clock Clock
}

// Hub shares one subscription per channel among the waiters and watchers of
// a client. It is safe for concurrent use.
type Hub struct {
	t     Transport
	cfg   Config
	mu    sync.Mutex
	chans map[string]*channel
	// closed is set by Close; closedLocked also looks at cfg.Closing.
	closed bool
	done   chan struct{} // closed by Close
}

// channel is the hub's state of one subscribed channel.
type channel struct {
	name      string
	ready     chan struct{} // closed at the first confirmation
	confirmed bool
	waiters   []*Waiter // longest idle first
	timer     Timer     // the fallback timer
	timerAt   time.Time
	ceil      time.Duration // the longest timer its waiters asked for
	linger    Timer         // unsubscribes a channel left without waiters
	pending   bool          // a message came while no waiter listened
	heard     time.Time     // the last message or resubscription
	watchers  []*Watch
}

// New returns a hub over t. It sends nothing: t opens its connections when
// the first channel is subscribed.
func New(t Transport, cfg Config) *Hub {
	if cfg.ConfirmWait <= 0 {
		cfg.ConfirmWait = 2 * time.Second
	}
	if cfg.MaxTimer <= 0 {
		cfg.MaxTimer = 10 * time.Second
	}
	if cfg.Linger < 0 {
		cfg.Linger = 0
	}
	if cfg.ErrClosed == nil {
		cfg.ErrClosed = ErrClosed
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	h := &Hub{t: t, cfg: cfg, chans: map[string]*channel{}, done: make(chan struct{})}
	t.Start(events{h})
	return h
}

// closedLocked reports whether the hub is closed or closing. h.mu is held.
func (h *Hub) closedLocked() bool {
	if h.closed {
		return true
	}
	select {
	case <-h.cfg.Closing: // a nil channel never is
		return true
	default:
		return false
	}
}

// Mode is how a channel's messages wake a waiter.
type Mode uint8

const (
	// WakeOne: a message wakes one WakeOne waiter of the channel, the one
	// idle longest (an exclusive lock's release serves one waiter).
	WakeOne Mode = iota
	// WakeAll: every message wakes every WakeAll (and WakeShared) waiter
	// of the channel (a release that may serve several: a semaphore's
	// permits, a latch that opens).
	WakeAll
	// WakeShared is WakeAll whose waiters share what one of them gets:
	// a WakeShared waiter that got the lock (Release with acquired) wakes
	// every other WakeShared waiter of the channel, as what let one reader
	// in lets every reader in, even when no message said so (a downgrade
	// that publishes nothing, seen by one reader at its fallback timer).
	WakeShared
)

// Waiter is one goroutine's interest in a channel, from Subscribe to
// Release.
type Waiter struct {
	h    *Hub
	ch   *channel
	mode Mode
	wake chan struct{} // one pending wake-up at most
	done bool          // released
}

// Subscribe registers a waiter on channel, woken by its messages as mode
// says, subscribing the channel if it is new, and waits (up to
// Config.ConfirmWait) until Redis has confirmed the subscription, so that
// an attempt made after it returns cannot miss the next release. fresh is
// false when the channel was subscribed and confirmed already (a
// lingering subscription, or other waiters) and no message came on it
// since since (the start of the caller's last attempt, by the hub's
// clock; zero: not asked): then no release since that attempt can have
// gone unheard, since a message with no waiter to wake is kept for the
// next one. (A message that other waiters heard since then may have freed
// what this one waits for: a WakeAll waiter must try again.) A subscription
// Redis does not confirm in time (it is unreachable) is not an error: the
// transport subscribes again when it reconnects, and the waiter's fallback
// timer covers the meantime.
//
// It returns ctx's error when ctx ends during the wait, and Config.ErrClosed
// when the hub is closed or closes meanwhile; the waiter is then released.
func (h *Hub) Subscribe(ctx context.Context, channel string, mode Mode, since time.Time) (w *Waiter, fresh bool, err error) {
	h.mu.Lock()
	if h.closedLocked() {
		h.mu.Unlock()
		return nil, false, h.cfg.ErrClosed
	}
	cs := h.use(channel)
	w = &Waiter{h: h, ch: cs, mode: mode, wake: make(chan struct{}, 1)}
	cs.waiters = append(cs.waiters, w)
	if cs.pending {
		cs.pending = false
		w.Signal()
	}
	ready, confirmed := cs.ready, cs.confirmed
	heard := !since.IsZero() && cs.heard.After(since)
	h.mu.Unlock()
	if confirmed {
		return w, heard, nil
	}

	expired := make(chan struct{})
	t := h.cfg.Clock.AfterFunc(h.cfg.ConfirmWait, func() { close(expired) })
	defer t.Stop()
	select {
	case <-ready:
	case <-expired:
	case <-ctx.Done():
		w.Release(false, 0)
		return nil, false, ctx.Err()
	case <-h.cfg.Closing:
		w.Release(false, 0)
		return nil, false, h.cfg.ErrClosed
	case <-h.done:
		w.Release(false, 0)
		return nil, false, h.cfg.ErrClosed
	}
	return w, true, nil
}

// use returns the channel's state, subscribing it if it is new and keeping
// it from a linger's end. h.mu is held.
func (h *Hub) use(name string) *channel {
	cs := h.chans[name]
	if cs == nil {
		cs = &channel{name: name, ready: make(chan struct{}), ceil: h.cfg.MaxTimer}
		h.chans[name] = cs
		h.t.Subscribe(name)
		return cs
	}
	if cs.linger != nil {
		cs.linger.Stop()
		cs.linger = nil
	}
	return cs
}

// C returns the waiter's wake-up channel. It holds one pending wake-up at
// most: a receive takes it.
func (w *Waiter) C() <-chan struct{} { return w.wake }

// Signal leaves a wake-up for the waiter; false when one is pending
// already. A waiter that ends without acting on a wake-up it took signals
// it back before Release, which then passes it to another waiter.
func (w *Waiter) Signal() bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// Hint asks for a wake-up just after ttl (a negative ttl: the lock has no
// expiry), at least floor and at most ceil from now, by moving the
// channel's fallback timer earlier (never later). ceil becomes the
// channel's ceiling, at which the timer arms itself again.
func (w *Waiter) Hint(ttl, floor, ceil time.Duration) {
	h := w.h
	d := ceil
	if ttl >= 0 {
		d = min(max(ttl+time.Millisecond, floor), ceil)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	at := h.cfg.Clock.Now().Add(d)
	cs := w.ch
	if w.done || (cs.timer != nil && !at.Before(cs.timerAt)) {
		return
	}
	cs.ceil = ceil
	h.arm(cs, d)
}

// arm sets the channel's fallback timer to fire after d. When it fires it
// wakes one waiter and, while others remain, arms itself again at the
// channel's ceiling: the woken waiter may get the lock and never ask for
// another timer, and a lease that runs out publishes nothing. h.mu is held.
func (h *Hub) arm(cs *channel, d time.Duration) {
	if cs.timer != nil {
		cs.timer.Stop()
	}
	cs.timerAt = h.cfg.Clock.Now().Add(d)
	var t Timer
	t = h.cfg.Clock.AfterFunc(d, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if cs.timer != t {
			return
		}
		cs.timer = nil
		cs.wakeOne()
		if len(cs.waiters) > 1 && !h.closedLocked() {
			h.arm(cs, cs.ceil)
		}
	})
	cs.timer = t
}

// Release ends the waiter's interest: a wake-up it did not use passes to
// another waiter, and the last waiter of a channel unsubscribes it, at once
// or, when it got the lock (acquired), after Config.Linger. A waiter that
// got the lock with a lease leaves the others a timer at that lease (at
// most the channel's ceiling): if the lease runs out, nothing is
// published. Release is idempotent.
func (w *Waiter) Release(acquired bool, lease time.Duration) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	cs := w.ch
	cs.waiters = slices.DeleteFunc(cs.waiters, func(x *Waiter) bool { return x == w })
	select {
	case <-w.wake:
		// An unused wake-up passes to another waiter. One taken by a
		// WakeAll or WakeShared waiter that got the lock is dropped: the
		// others of its mode heard the same message (or its sharing).
		if (!acquired || w.mode == WakeOne) && !cs.wakeOne() && len(cs.waiters) == 0 {
			cs.pending = true
		}
	default:
	}
	if acquired && w.mode == WakeShared {
		for _, x := range cs.waiters {
			if x.mode == WakeShared {
				x.Signal()
			}
		}
	}
	if h.closedLocked() {
		return
	}
	if len(cs.waiters) == 0 && len(cs.watchers) > 0 {
		if cs.timer != nil { // the watchers need no timer
			cs.timer.Stop()
			cs.timer = nil
		}
		return
	}
	if len(cs.waiters) > 0 {
		d := cs.ceil
		if acquired {
			d = min(lease+time.Millisecond, cs.ceil)
		}
		if cs.timer == nil || h.cfg.Clock.Now().Add(d).Before(cs.timerAt) {
			h.arm(cs, d) // the others must not go without a timer
		}
		return
	}
	h.idle(cs, acquired)
}

// wakeOne wakes the longest-idle waiter that has no wake-up pending and
// moves it to the back. It reports whether it woke one. h.mu is held.
func (cs *channel) wakeOne() bool {
	for i, w := range cs.waiters {
		if w.Signal() {
			cs.waiters = append(append(cs.waiters[:i:i], cs.waiters[i+1:]...), w)
			return true
		}
	}
	return false
}

// idle drops a channel left without waiters or watchers: at once or, when
// linger is asked for, after Config.Linger. h.mu is held.
func (h *Hub) idle(cs *channel, linger bool) {
	if cs.timer != nil {
		cs.timer.Stop()
		cs.timer = nil
	}
	if d := h.cfg.Linger; linger && d > 0 {
		var t Timer
		t = h.cfg.Clock.AfterFunc(d, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if cs.linger == t && len(cs.waiters) == 0 && len(cs.watchers) == 0 && !h.closedLocked() {
				cs.linger = nil
				h.unsubscribe(cs)
			}
		})
		cs.linger = t
		return
	}
	h.unsubscribe(cs)
}

// unsubscribe drops a channel that has no waiters. h.mu is held.
func (h *Hub) unsubscribe(cs *channel) {
	if h.chans[cs.name] != cs {
		return
	}
	delete(h.chans, cs.name)
	h.t.Unsubscribe(cs.name)
}

// Watch is a held lock's interest in its channel: it hears every message
// and every resubscription, and needs no timer.
type Watch struct {
	h      *Hub
	ch     *channel
	notify func()
	done   bool
}

// Watch calls notify at every message and every resubscription of channel,
// subscribing it if it is new, until Stop. notify runs under the hub's
// lock: it must not block nor call the hub. Watch returns nil once the hub
// is closed.
func (h *Hub) Watch(channel string, notify func()) *Watch {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closedLocked() {
		return nil
	}
	cs := h.use(channel)
	w := &Watch{h: h, ch: cs, notify: notify}
	cs.watchers = append(cs.watchers, w)
	return w
}

// Stop ends the watch: notify is not called once Stop has returned. A
// channel left with neither waiters nor watchers lingers (Config.Linger),
// then goes. Stop is idempotent.
func (w *Watch) Stop() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	cs := w.ch
	cs.watchers = slices.DeleteFunc(cs.watchers, func(x *Watch) bool { return x == w })
	if h.closedLocked() || h.chans[cs.name] != cs || len(cs.waiters) > 0 || len(cs.watchers) > 0 {
		return
	}
	h.idle(cs, true) // linger: the holder may lock again soon
}

// notifyAll calls every watcher's notify. h.mu is held.
func (cs *channel) notifyAll() {
	for _, w := range cs.watchers {
		w.notify()
	}
}

// events is the hub's side of its transport's Events.
type events struct{ h *Hub }

func (e events) Confirmed(channel string) {
	h := e.h
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.chans[channel]
	if cs == nil || cs.confirmed {
		return
	}
	cs.confirmed = true
	close(cs.ready)
}

func (e events) Resubscribed(channel string) {
	h := e.h
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.chans[channel]
	if cs == nil || h.closedLocked() {
		return
	}
	cs.heard = h.cfg.Clock.Now()
	if f := h.cfg.OnResubscribe; f != nil {
		f(channel, len(cs.waiters))
	}
	for _, w := range cs.waiters {
		w.Signal()
	}
	cs.notifyAll()
	if len(cs.waiters) == 0 {
		cs.pending = true // for the next waiter of a lingering channel
	}
}

func (e events) Message(channel string) { e.h.deliver(channel, true) }

// Wake wakes the waiters of channel as a message on it would, for a
// change that nobody published (seen on the key itself); the watchers,
// which listen for a release, are not told. A channel the hub does not
// subscribe is left alone.
func (h *Hub) Wake(channel string) { h.deliver(channel, false) }

// deliver wakes the waiters a message on channel wakes (and its watchers,
// when asked), or keeps the message for the next waiter.
func (h *Hub) deliver(channel string, watchers bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.chans[channel]
	if cs == nil || h.closedLocked() {
		return
	}
	cs.heard = h.cfg.Clock.Now()
	if !cs.wakeMessage() && len(cs.waiters) == 0 {
		cs.pending = true
	}
	if watchers {
		cs.notifyAll()
	}
}

// wakeMessage wakes the waiters a message wakes: every WakeAll and
// WakeShared waiter,
// and the longest-idle WakeOne waiter that has no wake-up pending (moved
// to the back). It reports whether it woke one. h.mu is held.
func (cs *channel) wakeMessage() bool {
	woke, one := false, false
	for i := 0; i < len(cs.waiters); i++ {
		w := cs.waiters[i]
		switch {
		case w.mode != WakeOne:
			woke = w.Signal() || woke
		case !one && w.Signal():
			one, woke = true, true
			// To the back: the next message wakes another one.
			cs.waiters = append(append(cs.waiters[:i:i], cs.waiters[i+1:]...), w)
			i--
		}
	}
	return woke
}

// Counts returns the number of waiters, of channels subscribed (once per
// kind of pub/sub the transport listens to) and of connections open.
func (h *Hub) Counts() (waiters, subscriptions, conns int) {
	h.mu.Lock()
	for _, cs := range h.chans {
		waiters += len(cs.waiters)
	}
	h.mu.Unlock()
	subscriptions, conns = h.t.Counts()
	return waiters, subscriptions, conns
}

// Close wakes the waiters waiting for a confirmation with Config.ErrClosed,
// stops the timers, closes the transport and waits for its goroutines. It
// returns the transport's error. Subscribe and Watch fail from then on, and
// Release sends no unsubscription. A second call returns nil.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.done)
	for _, cs := range h.chans {
		if cs.timer != nil {
			cs.timer.Stop()
			cs.timer = nil
		}
		if cs.linger != nil {
			cs.linger.Stop()
			cs.linger = nil
		}
	}
	clear(h.chans)
	h.mu.Unlock()
	return h.t.Close()
}
