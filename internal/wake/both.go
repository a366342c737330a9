package wake

import "sync"

// Both returns a transport that subscribes every channel on a and on b (a
// plain and a sharded transport, for PubSubBoth). A channel is confirmed
// once both have confirmed it; a message on either is a message, and a
// resubscription on either is a resubscription (it wakes every waiter even
// while the other kind has not confirmed yet). Its counts are the sums of
// theirs.
func Both(a, b Transport) Transport {
	return &both{parts: [2]Transport{a, b}, chans: map[string]*[2]bool{}}
}

type both struct {
	parts [2]Transport
	ev    Events
	mu    sync.Mutex
	chans map[string]*[2]bool // which parts confirmed each channel
}

func (t *both) Start(ev Events) {
	t.ev = ev
	for i, p := range t.parts {
		p.Start(part{t, i})
	}
}

func (t *both) Subscribe(channel string) {
	t.mu.Lock()
	t.chans[channel] = new([2]bool)
	t.mu.Unlock()
	for _, p := range t.parts {
		p.Subscribe(channel)
	}
}

func (t *both) Unsubscribe(channel string) {
	t.mu.Lock()
	delete(t.chans, channel)
	t.mu.Unlock()
	for _, p := range t.parts {
		p.Unsubscribe(channel)
	}
}

func (t *both) Counts() (subscriptions, conns int) {
	for _, p := range t.parts {
		s, c := p.Counts()
		subscriptions += s
		conns += c
	}
	return subscriptions, conns
}

func (t *both) Close() error {
	var first error
	for _, p := range t.parts {
		if err := p.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// part is the Events of one of the two transports.
type part struct {
	t *both
	i int
}

func (p part) Confirmed(channel string) {
	t := p.t
	t.mu.Lock()
	st := t.chans[channel]
	if st == nil || st[p.i] {
		t.mu.Unlock()
		return
	}
	st[p.i] = true
	all := st[0] && st[1]
	t.mu.Unlock()
	if all {
		t.ev.Confirmed(channel)
	}
}

func (p part) Resubscribed(channel string) { p.t.ev.Resubscribed(channel) }

func (p part) Message(channel string) { p.t.ev.Message(channel) }
