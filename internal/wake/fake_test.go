package wake_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lualock/lualock/internal/wake"
)

// TestMain fails the run when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeTransport records what the hub asks of it and lets the test play
// Redis: it delivers confirmations and messages through the hub's Events.
type fakeTransport struct {
	mu     sync.Mutex
	ev     wake.Events
	log    []string // "sub CH" and "unsub CH", in order
	subs   map[string]bool
	closed bool
	// autoConfirm confirms every subscription from a goroutine of its own,
	// as a listener would; Close waits for them.
	autoConfirm bool
	wg          sync.WaitGroup
}

func newFakeTransport() *fakeTransport { return &fakeTransport{subs: map[string]bool{}} }

func (f *fakeTransport) Start(ev wake.Events) { f.ev = ev }

func (f *fakeTransport) Subscribe(channel string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "sub "+channel)
	f.subs[channel] = true
	if f.autoConfirm {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.ev.Confirmed(channel)
		}()
	}
}

func (f *fakeTransport) Unsubscribe(channel string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "unsub "+channel)
	delete(f.subs, channel)
}

func (f *fakeTransport) Counts() (subscriptions, conns int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) > 0 {
		conns = 1
	}
	return len(f.subs), conns
}

func (f *fakeTransport) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
	return nil
}

// ops returns what the hub asked so far.
func (f *fakeTransport) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func (f *fakeTransport) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// fakeClock is a Clock that moves only when the test advances it; timers
// fire in the advancing goroutine, earliest first.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	at    time.Time
	f     func()
	ended bool // stopped or fired
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) wake.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.ended {
		return false
	}
	t.ended = true
	return true
}

// Advance moves the clock by d, firing the timers due on the way in order
// of their times (those that firing ones set included).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.ended && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		next.ended = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = end
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t.ended })
	c.mu.Unlock()
}

// armed returns how many timers are pending.
func (c *fakeClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.ended {
			n++
		}
	}
	return n
}

// eventually fails the test unless cond becomes true within a generous
// bound (the machine may be loaded: this asserts an outcome, not a time).
// state, when given, says what the test saw instead.
func eventually(t *testing.T, what string, cond func() bool, state ...func() []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, s := range state {
				t.Logf("seen: %q", s())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// woken reports whether w has a wake-up pending, and takes it.
func woken(w *wake.Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}
