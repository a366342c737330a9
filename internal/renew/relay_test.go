package renew

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
)

// fakeRelay carries the calls of one spec on a client of its own, or
// fails them (a broken tracking connection), or holds them unanswered
// until release.
type fakeRelay struct {
	rdb     *redis.Client
	spec    *Spec
	fail    atomic.Bool
	hang    atomic.Bool // calls held, unanswered, until release
	written atomic.Bool // held calls count as written: Cancel cannot withdraw them

	mu   sync.Mutex
	args [][]any     // the calls it carried
	held []*fakeCall // the calls held, not withdrawn
}

// fakeCall is one call of a fakeRelay.
type fakeCall struct {
	r       *fakeRelay
	cmd     *redis.Cmd
	reply   chan *redis.Cmd // held calls: their answer, run on a copy
	written bool
}

func (r *fakeRelay) Send(spec *Spec, _, _ []string, cmd *redis.Cmd) Relayed {
	if spec != r.spec {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.args = append(r.args, cmd.Args())
	c := &fakeCall{r: r, cmd: cmd}
	if r.hang.Load() {
		c.reply, c.written = make(chan *redis.Cmd, 1), r.written.Load()
		r.held = append(r.held, c)
	}
	return c
}

func (c *fakeCall) Wait(ctx context.Context) bool {
	if c.reply == nil {
		if c.r.fail.Load() {
			c.cmd.SetErr(errors.New("relay: no reply"))
		} else {
			_ = c.r.rdb.Process(ctx, c.cmd)
		}
		return true
	}
	select {
	case got := <-c.reply:
		if got.Err() != nil {
			c.cmd.SetErr(got.Err())
		} else {
			c.cmd.SetVal(got.Val())
		}
		return true
	case <-ctx.Done():
		c.cmd.SetErr(ctx.Err())
		return false
	}
}

func (c *fakeCall) Cancel() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if c.written {
		return false
	}
	c.r.held = slices.DeleteFunc(c.r.held, func(x *fakeCall) bool { return x == c })
	return true
}

// release runs the calls held, each on the relay's client, and answers
// them; it returns how many.
func (r *fakeRelay) release(ctx context.Context) int {
	r.mu.Lock()
	held := r.held
	r.held = nil
	r.mu.Unlock()
	for _, c := range held {
		got := redis.NewCmd(ctx, c.cmd.Args()...)
		_ = r.rdb.Process(ctx, got)
		c.reply <- got
	}
	return len(held)
}

// carried reports whether some call the relay carried renews key, and
// whether every such call asked for rearm.
func (r *fakeRelay) carried(key string) (carried, rearm bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rearm = true
	for _, a := range r.args {
		// EVALSHA sha 1 key lease rearm field
		if len(a) == 7 && a[3] == key {
			carried = true
			rearm = rearm && a[5] == true
		}
	}
	return carried, carried && rearm
}

// A Relay carries the calls it takes, with rearm, and the client sends
// none of them; the calls it refuses go through the client without
// rearm; a relayed call that fails, or gets no reply in half the round's
// time, goes through the client in the same round, so its entry is
// renewed all the same.
func TestWatchdog_relay(t *testing.T) {
	t.Parallel()
	r := &fakeRelay{spec: lockSpec}
	mr, _, h, w := start(t, Config{Lease: 600 * time.Millisecond, Relay: r})
	r.rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() { _ = r.rdb.Close() }()
	if err := generated.LockRenewScript.Load(t.Context(), r.rdb); err != nil {
		t.Fatal(err)
	}
	held(t, mr, "relayed", "direct")
	s := newEnds()
	relayed := s.add(t, w, lockSpec, "relayed", time.Now())
	direct := s.add(t, w, otherSpec, "direct", time.Now())
	first := time.Now()
	waitFor(t, 10*time.Second, "a renewal of both", func() bool {
		return renewedAt(w, relayed).After(first) && renewedAt(w, direct).After(first)
	})
	if carried, rearm := r.carried("relayed"); !carried || !rearm {
		t.Errorf("relay: carried %v, with rearm %v; want both", carried, rearm)
	}
	if carried, _ := r.carried("direct"); carried {
		t.Error("relay carried a call of a spec it refuses")
	}
	if p := h.sentSince(0); carries(p, "relayed") || !carries(p, "direct") {
		t.Errorf("client's pipelines carry relayed %v, direct %v; want false, true", carries(p, "relayed"), carries(p, "direct"))
	}

	r.fail.Store(true)
	sent, failed := h.sent(), time.Now()
	waitFor(t, 10*time.Second, "a renewal of the relayed entry after the relay fails", func() bool {
		return renewedAt(w, relayed).After(failed)
	})
	if !carries(h.sentSince(sent), "relayed") {
		t.Error("the failed relayed call was not sent by the client")
	}

	r.fail.Store(false)
	r.hang.Store(true)
	sent, hung := h.sent(), time.Now()
	waitFor(t, 10*time.Second, "a renewal of the relayed entry while the relay hangs", func() bool {
		return renewedAt(w, relayed).After(hung)
	})
	if !carries(h.sentSince(sent), "relayed") {
		t.Error("the hung relayed call was not sent by the client")
	}
	if got, _ := s.of("relayed"); len(got) != 0 {
		t.Errorf("relayed ended: %v", got)
	}
}

// A relayed call that got no reply in its half of the round but was
// written may still run: the client renews its entry in that round and
// the next ones, and Pause waits until the call is answered, so that no
// renewal sent before Pause returned lands after it. A call not yet
// written is withdrawn: its entry lands with the client's.
func TestWatchdog_relayWrittenHoldsPause(t *testing.T) {
	t.Parallel()
	r := &fakeRelay{spec: lockSpec}
	r.hang.Store(true)
	r.written.Store(true)
	mr, _, h, w := start(t, Config{Lease: 3 * time.Second, Relay: r})
	r.rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() { _ = r.rdb.Close() }()
	if err := generated.LockRenewScript.Load(t.Context(), r.rdb); err != nil {
		t.Fatal(err)
	}
	held(t, mr, "k")
	s := newEnds()
	e := s.add(t, w, lockSpec, "k", time.Now())
	sent, first := h.sent(), time.Now()
	waitFor(t, 10*time.Second, "the client's renewal of a relayed call unanswered", func() bool {
		return renewedAt(w, e).After(first)
	})
	if !carries(h.sentSince(sent), "k") {
		t.Fatal("the entry was renewed without the client sending it")
	}
	// Later rounds renew it while that call is still unanswered.
	again := renewedAt(w, e)
	waitFor(t, 10*time.Second, "a renewal in a later round, the relayed call still unanswered", func() bool {
		return renewedAt(w, e).After(again)
	})
	var returned atomic.Bool
	paused := make(chan error, 1)
	go func() {
		err := e.Pause(t.Context())
		returned.Store(true)
		paused <- err
	}()
	time.Sleep(200 * time.Millisecond) // a Pause that does not wait returns now
	if returned.Load() {
		t.Fatal("Pause returned while a renewal written on the relay was unanswered")
	}
	if n := r.release(t.Context()); n < 2 {
		t.Fatalf("%d relayed calls held, want one per round (at least 2)", n)
	}
	// A round that took e before Pause sends its call after this release
	// at worst: release again until Pause returns.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case err := <-paused:
			if err != nil {
				t.Fatalf("Pause: %v", err)
			}
			done = true
		case <-tick.C:
			r.release(t.Context())
		case <-timeout:
			t.Fatal("Pause did not return in 10s after the relayed calls were answered")
		}
	}
	// Not written: withdrawn, the entry lands with the client's call.
	r.written.Store(false)
	e.Resume()
	second := time.Now()
	waitFor(t, 10*time.Second, "a renewal with the relayed call withdrawn", func() bool {
		return renewedAt(w, e).After(second)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.Pause(ctx); err != nil {
		t.Fatalf("Pause with the relayed calls withdrawn: %v", err)
	}
	if n := r.release(t.Context()); n != 0 {
		t.Errorf("%d relayed calls held after their withdrawal, want 0", n)
	}
}
