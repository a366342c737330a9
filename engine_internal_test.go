package lualock

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/wake"
)

// The acquisition engine driven without Redis: a fake contender scripts
// the outcomes of its attempts and records its give-up steps, a fake
// transport stands for pub/sub (it confirms every subscription; the test
// sends the messages).

// fakeTransport confirms every subscription at once, in a goroutine of
// its own (the hub calls Subscribe under its lock).
type fakeTransport struct {
	mu   sync.Mutex
	ev   wake.Events
	subs int
	wg   sync.WaitGroup
}

func (t *fakeTransport) Start(ev wake.Events) { t.ev = ev }
func (t *fakeTransport) Subscribe(ch string) {
	t.mu.Lock()
	t.subs++
	t.mu.Unlock()
	t.wg.Add(1)
	go func() { defer t.wg.Done(); t.ev.Confirmed(ch) }()
}
func (t *fakeTransport) Unsubscribe(string) {}
func (t *fakeTransport) Counts() (int, int) { return 0, 0 }
func (t *fakeTransport) Close() error       { t.wg.Wait(); return nil }
func (t *fakeTransport) subscriptions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subs
}

// newEngineClient returns a Client with only what the engine uses: its
// config, its closing channel, a hub over a fake transport.
func newEngineClient(t *testing.T, o Options) (*Client, *fakeTransport) {
	t.Helper()
	cfg, err := o.normalize()
	if err != nil {
		t.Fatal(err)
	}
	ft := &fakeTransport{}
	c := &Client{cfg: cfg, closing: make(chan struct{})}
	c.hub = wake.New(ft, wake.Config{Closing: c.closing, ErrClosed: ErrClosed})
	t.Cleanup(func() {
		close(c.closing)
		_ = c.hub.Close()
		c.bg.Wait()
	})
	return c, ft
}

// fakeContender returns its scripted outcomes in order (the last one
// again once they run out) and records its attempts and give-ups.
type fakeContender struct {
	mu      sync.Mutex
	outs    []outcome
	tries   []time.Time
	gaveUp  []leftover
	given   chan leftover // each give-up step, as it runs
	others  bool          // exit's answer: another call of the owner still waits
	channel string
}

func newFakeContender(outs ...outcome) *fakeContender {
	return &fakeContender{outs: outs, given: make(chan leftover, 8), channel: "ch"}
}

func (f *fakeContender) try(context.Context, time.Duration) outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries = append(f.tries, time.Now())
	o := f.outs[0]
	if len(f.outs) > 1 {
		f.outs = f.outs[1:]
	}
	return o
}
func (f *fakeContender) waitSpec() waitSpec { return waitSpec{channel: f.channel, mode: wake.WakeOne} }
func (f *fakeContender) timer(time.Duration) (floor, ceil time.Duration) {
	return time.Hour, time.Hour // only a message or a fresh subscription wakes the waiter
}
func (f *fakeContender) enter()       {}
func (f *fakeContender) exit() bool   { return f.others }
func (f *fakeContender) holdOps()     {}
func (f *fakeContender) releaseOps()  {}
func (f *fakeContender) grants() bool { return false }
func (f *fakeContender) revoke(context.Context) error {
	return nil
}
func (f *fakeContender) giveUp(_ context.Context, g leftover) error {
	f.mu.Lock()
	f.gaveUp = append(f.gaveUp, g)
	f.mu.Unlock()
	f.given <- g
	return nil
}

func (f *fakeContender) attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tries)
}

var errNet = io.ErrUnexpectedEOF // a transient error without Redis's reply

// A lost reply is undone: the give-up step gets the hold count and lease
// the attempt asked for, in the background (Redis did not answer).
func TestEngine_lostReply_undo(t *testing.T) {
	c, _ := newEngineClient(t, Options{})
	lost := undo{holds: 2, lease: 7 * time.Second}
	f := newFakeContender(outcome{sent: sentUnknown, undo: lost, err: errNet})
	_, err := c.acquire(context.Background(), f, 0, 0)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errNet) {
		t.Fatalf("acquire = %v, want ErrUnavailable joined with the last error", err)
	}
	select {
	case g := <-f.given:
		if !g.unknown || g.undo != lost {
			t.Fatalf("give-up got %+v, want the lost attempt's %+v to undo", g, lost)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no give-up step after a lost reply")
	}
	// An answer after the lost reply settles it: nothing to undo.
	f2 := newFakeContender(
		outcome{sent: sentUnknown, undo: lost, err: errNet},
		outcome{sent: sentNot, err: errNet}, // not sent: the lost one stands
		outcome{wait: -1},
	)
	c2, _ := newEngineClient(t, Options{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	_, err = c2.acquire(context.Background(), f2, 500*time.Millisecond, 0)
	if !errors.Is(err, ErrNotObtained) {
		t.Fatalf("acquire = %v, want ErrNotObtained", err)
	}
	if len(f2.gaveUp) != 0 {
		t.Fatalf("give-up steps %+v after an answered attempt, want none", f2.gaveUp)
	}
}

// A lost reply stays to undo when a later attempt is refused by Redis
// without running (BUSY): the refusal changed nothing.
func TestEngine_lostReply_undoAfterRefusal(t *testing.T) {
	c, _ := newEngineClient(t, Options{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	lost := undo{holds: 1, lease: time.Second}
	f := newFakeContender(
		outcome{sent: sentUnknown, undo: lost, err: errNet},
		outcome{sent: sentRefused, err: busyErr{}},
	)
	if _, err := c.acquire(context.Background(), f, 40*time.Millisecond, 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("acquire = %v, want ErrUnavailable", err)
	}
	select {
	case g := <-f.given:
		if !g.unknown || g.undo != lost {
			t.Fatalf("give-up got %+v, want the lost attempt's %+v to undo", g, lost)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no give-up step: the refusal erased the lost reply")
	}
}

// busyErr is Redis's BUSY reply: transient, and the script did not run.
type busyErr struct{}

func (busyErr) Error() string { return "BUSY Redis is busy running a script" }
func (busyErr) RedisError()   {}

// A transient error backs off (the client's backoff, RetryMin 20ms:
// each pause at least 10ms) and retries, without subscribing.
func TestEngine_transient_backoff(t *testing.T) {
	c, ft := newEngineClient(t, Options{RetryMin: 20 * time.Millisecond, RetryMax: 20 * time.Millisecond})
	f := newFakeContender(outcome{err: errNet}, outcome{err: errNet}, outcome{acquired: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.acquire(ctx, f, -1, 0); err != nil {
		t.Fatal(err)
	}
	if n := f.attempts(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	for i := 1; i < len(f.tries); i++ {
		if d := f.tries[i].Sub(f.tries[i-1]); d < 10*time.Millisecond {
			t.Errorf("attempt %d came %v after the transient error, want a backoff of at least 10ms", i+1, d)
		}
	}
	if n := ft.subscriptions(); n != 0 {
		t.Errorf("%d subscriptions after transient errors, want none", n)
	}
	if len(f.gaveUp) != 0 {
		t.Errorf("give-up steps %+v after a success", f.gaveUp)
	}
}

// A refused attempt subscribes; the fresh subscription retries at once
// (a release before its confirmation went unheard), and the next
// refusal sleeps until a message, which wakes it.
func TestEngine_freshSubscription_retry(t *testing.T) {
	c, ft := newEngineClient(t, Options{})
	f := newFakeContender(outcome{wait: -1}, outcome{wait: -1}, outcome{acquired: true})
	done := make(chan error, 1)
	go func() {
		_, err := c.acquire(context.Background(), f, -1, 0)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for f.attempts() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts and no retry after the fresh subscription", f.attempts())
		}
		time.Sleep(time.Millisecond)
	}
	if ft.subscriptions() != 1 {
		t.Fatalf("%d subscriptions, want 1", ft.subscriptions())
	}
	select {
	case err := <-done:
		t.Fatalf("acquire returned %v before a message", err)
	case <-time.After(20 * time.Millisecond):
	}
	ft.ev.Message("ch")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.attempts(); n != 3 {
		t.Fatalf("%d attempts, want 3 (first, after the fresh subscription, after the message)", n)
	}
}

// A call that gives up leaves what its attempts left (a place in a
// queue), before it returns when Redis answered; not when another call of
// the same owner still waits in that place.
func TestEngine_giveUp_leave(t *testing.T) {
	c, _ := newEngineClient(t, Options{})
	for _, others := range []bool{false, true} {
		f := newFakeContender(outcome{wait: -1, queued: true}, outcome{wait: -1})
		f.others = others
		_, err := c.acquire(context.Background(), f, 30*time.Millisecond, 0)
		if !errors.Is(err, ErrNotObtained) {
			t.Fatalf("acquire = %v, want ErrNotObtained", err)
		}
		f.mu.Lock()
		gave := append([]leftover(nil), f.gaveUp...)
		f.mu.Unlock()
		switch {
		case others && len(gave) != 0:
			t.Errorf("give-up %+v while another call of the owner waits, want none", gave)
		case !others && (len(gave) != 1 || !gave[0].queued || gave[0].unknown):
			t.Errorf("give-up steps when acquire returned: %+v, want one that leaves the queue", gave)
		}
	}
}

// A protocol without a channel is polled with the bounded backoff: the
// engine never subscribes, and the waiter still gets the lock once it is
// released.
func TestEngine_noChannel_backsOff(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, Options{RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	holder := c.NewLock("spin")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	p := c.newReentrant("spin")
	p.channel = "" // the reentrant protocol without pub/sub or spin bounds of its own
	spin := c.newLock("spin", p)
	before := mr.CommandCount()
	if err := spin.TryLock(ctx, 150*time.Millisecond); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("TryLock on a held lock: %v", err)
	}
	// With a 1ms..20ms backoff a 150ms wait makes more than 4 attempts
	// and, bounded, far fewer than 150.
	if n := mr.CommandCount() - before; n < 5 || n > 150 {
		t.Errorf("%d commands in a 150ms wait, want a bounded backoff's", n)
	}
	if s := c.Stats(); s.Subscriptions != 0 || s.Waiters != 0 {
		t.Errorf("stats %+v: a protocol without a channel subscribed", s)
	}
	done := make(chan error, 1)
	go func() { done <- spin.TryLock(ctx, 5*time.Second) }()
	time.Sleep(30 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	if err := spin.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
