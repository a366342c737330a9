package renew

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lualock/lualock/generated"
)

// TestMain fails the run when a test leaves a goroutine behind: a
// watchdog loop or a node's round that Close did not stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lockSpec renews lualock's reentrant and fair locks, as the root package
// does.
var lockSpec = &Spec{
	Name:   "lock_renew",
	Script: generated.LockRenewScript,
	Cmd: func(ctx context.Context, p redis.Pipeliner, keys, fields []string, lease time.Duration, rearm bool) *redis.Cmd {
		return generated.LockRenewCmd(ctx, p, generated.LockRenewKeys{Locks: keys},
			generated.LockRenewArgs{LeaseMS: lease.Milliseconds(), Rearm: rearm, Fields: fields})
	},
	Result: generated.LockRenewResult,
}

// otherSpec is the same script under another spec: its calls are batched
// apart.
var otherSpec = func() *Spec { s := *lockSpec; s.Name = "other"; return &s }()

const field = "c:1"

// hook records the renewal pipelines and can hold or fail them.
type hook struct {
	mu    sync.Mutex
	pipes []pipe
	loads int // SCRIPT LOAD calls through this client
	// gate, when set, runs before a pipeline with its calls' keys; a
	// non-nil error fails the pipeline without sending it.
	gate func(ctx context.Context, keys []string) error
}

// pipe is one pipeline: the keys of each EVALSHA in it, and when it was
// handed to the network.
type pipe struct {
	calls [][]string
	sent  time.Time
}

func (h *hook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) >= 2 && strings.EqualFold(fmt.Sprint(a[0]), "script") && strings.EqualFold(fmt.Sprint(a[1]), "load") {
			h.mu.Lock()
			h.loads++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var p pipe
		var all []string
		for _, c := range cmds {
			a := c.Args()
			if len(a) < 3 || !strings.EqualFold(fmt.Sprint(a[0]), "evalsha") {
				continue
			}
			n := int(a[2].(int))
			keys := make([]string, n)
			for i := range n {
				keys[i] = a[3+i].(string)
			}
			p.calls = append(p.calls, keys)
			all = append(all, keys...)
		}
		h.mu.Lock()
		gate := h.gate
		h.mu.Unlock()
		if gate != nil {
			if err := gate(ctx, all); err != nil {
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		p.sent = time.Now()
		h.mu.Lock()
		h.pipes = append(h.pipes, p)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *hook) setGate(g func(ctx context.Context, keys []string) error) {
	h.mu.Lock()
	h.gate = g
	h.mu.Unlock()
}

// sentSince returns the pipelines sent from index i on.
func (h *hook) sentSince(i int) []pipe {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.pipes[min(i, len(h.pipes)):])
}

func (h *hook) sent() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pipes)
}

// carries reports whether some call of the pipelines renews key.
func carries(pipes []pipe, key string) bool {
	for _, p := range pipes {
		for _, c := range p.calls {
			if slices.Contains(c, key) {
				return true
			}
		}
	}
	return false
}

// start returns a miniredis, a client on it with a hook, and a watchdog on
// that client that the test closes at its end.
func start(t *testing.T, cfg Config) (*miniredis.Miniredis, *redis.Client, *hook, *Watchdog) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	h := &hook{}
	rdb.AddHook(h)
	w, err := New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Close()
		_ = rdb.Close()
	})
	return mr, rdb, h, w
}

// held sets the owner field of each key in Redis, as an acquisition does.
func held(t *testing.T, mr *miniredis.Miniredis, keys ...string) {
	t.Helper()
	for _, k := range keys {
		mr.HSet(k, field, "1")
	}
}

// ends collects the ends of entries, by key.
type ends struct {
	mu   sync.Mutex
	got  map[string][]End
	at   map[string]time.Time
	each chan string
}

func newEnds() *ends {
	return &ends{got: map[string][]End{}, at: map[string]time.Time{}, each: make(chan string, 1000)}
}

func (s *ends) add(t *testing.T, w *Watchdog, spec *Spec, key string, renewedAt time.Time) *Entry {
	t.Helper()
	e := &Entry{}
	s.readd(t, w, e, spec, key, 1, renewedAt)
	return e
}

// readd adds e for key again, with tag; its ends are recorded under
// key/tag when tag is not 1.
func (s *ends) readd(t *testing.T, w *Watchdog, e *Entry, spec *Spec, key string, tag uint64, renewedAt time.Time) {
	t.Helper()
	if !w.Add(e, Target{Spec: spec, Key: key, Field: field}, tag, renewedAt, s.record(key)) {
		t.Fatalf("Add %s: refused", key)
	}
}

// record is an onEnd that records the ends of key (key/tag for a tag
// other than 1).
func (s *ends) record(key string) func(uint64, End) {
	return func(tag uint64, how End) {
		k := key
		if tag != 1 {
			k = fmt.Sprintf("%s/%d", key, tag)
		}
		s.mu.Lock()
		s.got[k] = append(s.got[k], how)
		s.at[k] = time.Now()
		s.mu.Unlock()
		s.each <- k
	}
}

func (s *ends) of(key string) ([]End, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[key]), s.at[key]
}

// wait waits for the end of key, for up to limit.
func (s *ends) wait(t *testing.T, key string, limit time.Duration) (End, time.Time) {
	t.Helper()
	deadline := time.After(limit)
	for {
		if got, at := s.of(key); len(got) > 0 {
			if len(got) > 1 {
				t.Errorf("%s ended %d times: %v", key, len(got), got)
			}
			return got[0], at
		}
		select {
		case <-s.each:
		case <-deadline:
			t.Fatalf("%s did not end within %v", key, limit)
		}
	}
}

// waitFor polls cond until it holds, for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func renewedAt(w *Watchdog, e *Entry) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return e.renewed
}

func TestLossMargin(t *testing.T) {
	for _, c := range []struct{ lease, want time.Duration }{
		{30 * time.Second, 302 * time.Millisecond},
		{time.Second, 12 * time.Millisecond},
		{300 * time.Millisecond, 5 * time.Millisecond},
		{3 * time.Millisecond, 1500 * time.Microsecond}, // at most half the lease
	} {
		if got := LossMargin(c.lease); got != c.want {
			t.Errorf("LossMargin(%v) = %v, want %v", c.lease, got, c.want)
		}
	}
}

func TestNew_invalid(t *testing.T) {
	for _, cfg := range []Config{{}, {Lease: -time.Second}, {Lease: time.Second, Batch: -1}} {
		if w, err := New(nil, cfg); err == nil {
			w.Close()
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// A round renews every entry with one call per spec and slot, none
// larger than Batch, all in one pipeline; OnRenew hears of each call.
func TestWatchdog_batches(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []Call
	slot := func(key string) int { return int(key[1] - '0') } // "A1-3" is in slot 1
	mr, _, h, w := start(t, Config{Lease: 3 * time.Second, Batch: 3, Slot: slot, OnRenew: func(c Call) {
		mu.Lock()
		calls = append(calls, Call{Spec: c.Spec, Keys: slices.Clone(c.Keys), Took: c.Took, Err: c.Err})
		mu.Unlock()
	}})
	s := newEnds()
	specs := map[string]*Spec{"A": lockSpec, "B": otherSpec}
	groups := map[string]int{"A0": 7, "A1": 2, "B0": 4, "B1": 3} // calls: 3 + 1 + 2 + 1
	total := 0
	now := time.Now()
	for g, n := range groups {
		for i := range n {
			key := fmt.Sprintf("%s-%d", g, i)
			held(t, mr, key)
			s.add(t, w, specs[g[:1]], key, now)
			total++
		}
	}
	var round pipe
	heard := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(calls)
	}
	waitFor(t, 10*time.Second, "a round with every entry, heard by OnRenew", func() bool {
		if heard() < 7 {
			return false
		}
		for _, p := range h.sentSince(0) {
			n := 0
			for _, c := range p.calls {
				n += len(c)
			}
			if n == total {
				round = p
				return true
			}
		}
		return false
	})
	if len(round.calls) != 7 {
		t.Errorf("round sent %d calls, want 7: %v", len(round.calls), round.calls)
	}
	seen := map[string]bool{}
	for _, c := range round.calls {
		if len(c) > 3 {
			t.Errorf("a call renews %d keys, batch is 3: %v", len(c), c)
		}
		for _, k := range c {
			if k[:2] != c[0][:2] {
				t.Errorf("one call mixes specs or slots: %v", c)
			}
			if seen[k] {
				t.Errorf("%s renewed twice in one round", k)
			}
			seen[k] = true
		}
	}
	if len(seen) != total {
		t.Errorf("round renewed %d keys, want %d", len(seen), total)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) < 7 {
		t.Fatalf("OnRenew heard %d calls, want 7 or more", len(calls))
	}
	for _, c := range calls[:7] {
		if c.Err != nil || c.Took <= 0 || len(c.Keys) == 0 {
			t.Errorf("OnRenew: %+v, want no error, a round trip, keys", c)
		}
		if want := specs[c.Keys[0][:1]]; c.Spec != want {
			t.Errorf("OnRenew: spec %s for %v, want %s", c.Spec.Name, c.Keys, want.Name)
		}
	}
	if w.Len() != total {
		t.Errorf("Len = %d, want %d", w.Len(), total)
	}
	if pttl := mr.TTL("A0-0"); pttl <= 0 {
		t.Errorf("A0-0 has TTL %v after a renewal, want the lease", pttl)
	}
}

// A renewal that finds the owner field gone ends that entry with Gone, and
// no other.
func TestEntry_gone(t *testing.T) {
	t.Parallel()
	mr, _, _, w := start(t, Config{Lease: 3 * time.Second})
	s := newEnds()
	held(t, mr, "kept", "lost")
	kept := s.add(t, w, lockSpec, "kept", time.Now())
	s.add(t, w, lockSpec, "lost", time.Now())
	mr.HDel("lost", field)
	if end, _ := s.wait(t, "lost", 10*time.Second); end != Gone {
		t.Errorf("lost ended with %v, want Gone", end)
	}
	waitFor(t, 10*time.Second, "a renewal of kept", func() bool { return !renewedAt(w, kept).IsZero() && w.Len() == 1 })
	if got, _ := s.of("kept"); len(got) != 0 {
		t.Errorf("kept ended: %v", got)
	}
	if w.Len() != 1 {
		t.Errorf("Len = %d, want 1", w.Len())
	}
}

// When every renewal fails, an entry ends with Expired when its lease
// less LossMargin has run out since it was last set, not before; meanwhile
// the watchdog tries again sooner than every Lease/3.
func TestEntry_expiredWhenRenewalsFail(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	mr, _, h, w := start(t, Config{Lease: lease})
	var mu sync.Mutex
	var tries []time.Time
	h.setGate(func(ctx context.Context, keys []string) error {
		mu.Lock()
		tries = append(tries, time.Now())
		mu.Unlock()
		return errors.New("test: Redis is down")
	})
	s := newEnds()
	held(t, mr, "k")
	set := time.Now()
	s.add(t, w, lockSpec, "k", set)
	end, at := s.wait(t, "k", lease+10*time.Second)
	if end != Expired {
		t.Errorf("ended with %v, want Expired", end)
	}
	due := set.Add(lease - LossMargin(lease))
	if at.Before(due) {
		t.Errorf("Expired %v after the lease was set, before its due time %v", at.Sub(set), lease-LossMargin(lease))
	}
	t.Logf("Expired %v after due", at.Sub(due))
	mu.Lock()
	defer mu.Unlock()
	gap := lease
	for i := 1; i < len(tries); i++ {
		gap = min(gap, tries[i].Sub(tries[i-1]))
	}
	// Retries come every Lease/12 (250ms); the period is Lease/3 (1s).
	if len(tries) < 2 || gap >= lease/6 {
		t.Errorf("%d tries, shortest gap %v: want retries well within the period %v", len(tries), gap, lease/3)
	}
	if w.Len() != 0 {
		t.Errorf("Len = %d after the end, want 0", w.Len())
	}
}

// A lease counts from the sending of the call that renewed it, not from
// its reply.
func TestEntry_leaseCountsFromSending(t *testing.T) {
	t.Parallel()
	mr, rdb, h, w := start(t, Config{Lease: 1500 * time.Millisecond})
	// Loaded beforehand: a NOSCRIPT would send every call twice.
	if err := generated.LockRenewScript.Load(t.Context(), rdb); err != nil {
		t.Fatal(err)
	}
	const delay = 200 * time.Millisecond
	var mu sync.Mutex
	var last time.Time // when the last pipeline was sent
	h.setGate(func(ctx context.Context, keys []string) error {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
		time.Sleep(delay) // the reply comes this much later
		return nil
	})
	s := newEnds()
	held(t, mr, "k")
	added := time.Now()
	e := s.add(t, w, lockSpec, "k", added)
	waitFor(t, 10*time.Second, "a renewal", func() bool { return renewedAt(w, e).After(added) })
	mu.Lock()
	sent := last
	mu.Unlock()
	if got := renewedAt(w, e); got.After(sent) {
		t.Errorf("lease counted from %v after the last call was sent, want from its sending or before", got.Sub(sent))
	}
}

// Pause waits for a round in flight that carries the entry, and for no
// other; a paused entry is not renewed until Resume.
func TestEntry_Pause_waitsForItsRound(t *testing.T) {
	t.Parallel()
	mr, _, h, w := start(t, Config{Lease: 3 * time.Second})
	held(t, mr, "x", "y", "z")
	release := make(chan struct{})
	holding := make(chan struct{}, 1)
	h.setGate(func(ctx context.Context, keys []string) error {
		if slices.Contains(keys, "x") {
			select {
			case holding <- struct{}{}:
				<-release // the first round carrying x is held, whatever its deadline
			default:
			}
		}
		return nil
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	s := newEnds()
	x := s.add(t, w, lockSpec, "x", time.Now())
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("no round carried x")
	}
	// y joined after the round started: pausing it waits for nothing.
	y := s.add(t, w, lockSpec, "y", time.Now())
	if err := y.Pause(t.Context()); err != nil {
		t.Fatalf("Pause y: %v", err)
	}
	y.Resume()
	// Pausing x with a context that ends gives up, unpaused.
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := x.Pause(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pause x with a short ctx while its round is held = %v, want DeadlineExceeded", err)
	}
	// x's round is held: Pause x waits for it.
	paused := make(chan error, 1)
	go func() { paused <- x.Pause(context.Background()) }()
	select {
	case err := <-paused:
		t.Fatalf("Pause x returned (%v) while the round carrying x was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-paused:
		if err != nil {
			t.Fatalf("Pause x: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pause x did not return after its round landed")
	}
	// Paused, x is not renewed; z, y are.
	s.add(t, w, lockSpec, "z", time.Now())
	from := h.sent()
	waitFor(t, 10*time.Second, "two rounds renewing z", func() bool {
		n := 0
		for _, p := range h.sentSince(from) {
			if carries([]pipe{p}, "z") {
				n++
			}
		}
		return n >= 2
	})
	if p := h.sentSince(from); carries(p, "x") {
		t.Error("a round renewed x while it was paused")
	} else if !carries(p, "y") {
		t.Error("no round renewed y after Resume")
	}
	x.Resume()
	from = h.sent()
	waitFor(t, 10*time.Second, "a round renewing x after Resume", func() bool { return carries(h.sentSince(from), "x") })
}

// An entry removed while a call carrying it is in flight and added again
// (the same owner's next hold): Pause waits for that call, and its reply
// (the field gone: the earlier hold was released) does not end the new
// hold.
func TestEntry_reuse_staleReply(t *testing.T) {
	t.Parallel()
	mr, _, h, w := start(t, Config{Lease: 3 * time.Second})
	held(t, mr, "x")
	release := make(chan struct{})
	holding := make(chan struct{}, 1)
	h.setGate(func(ctx context.Context, keys []string) error {
		if slices.Contains(keys, "x") {
			select {
			case holding <- struct{}{}:
				<-release
			default:
			}
		}
		return nil
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	s := newEnds()
	x := s.add(t, w, lockSpec, "x", time.Now())
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("no round carried x")
	}
	if !x.Remove() {
		t.Fatal("Remove = false")
	}
	mr.HDel("x", field) // the held call finds it gone
	s.readd(t, w, x, lockSpec, "x", 2, time.Now())
	paused := make(chan error, 1)
	go func() { paused <- x.Pause(context.Background()) }()
	select {
	case err := <-paused:
		t.Fatalf("Pause returned (%v) while a call carrying the entry's earlier hold was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-paused:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pause did not return after the call landed")
	}
	mr.HSet("x", field, "1") // the new hold
	x.Resume()
	from := h.sent()
	waitFor(t, 10*time.Second, "two rounds renewing x", func() bool {
		n := 0
		for _, p := range h.sentSince(from) {
			if carries([]pipe{p}, "x") {
				n++
			}
		}
		return n >= 2
	})
	for _, k := range []string{"x", "x/2"} {
		if got, _ := s.of(k); len(got) != 0 {
			t.Errorf("%s ended: %v", k, got)
		}
	}
	if w.Len() != 1 {
		t.Errorf("Len = %d, want 1", w.Len())
	}
}

// The methods of an entry never added do nothing.
func TestEntry_neverAdded(t *testing.T) {
	var e Entry
	if err := e.Pause(t.Context()); err != nil {
		t.Errorf("Pause: %v", err)
	}
	e.Resume()
	e.Stop()
	if e.Remove() {
		t.Error("Remove = true")
	}
}

// Stop ends renewals of the entry for good, but it still ends with Expired
// when its lease runs out.
func TestEntry_Stop_thenExpired(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	mr, _, h, w := start(t, Config{Lease: lease})
	held(t, mr, "stopped", "other")
	s := newEnds()
	set := time.Now()
	e := s.add(t, w, lockSpec, "stopped", set)
	s.add(t, w, lockSpec, "other", set)
	e.Stop()
	if err := e.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.Resume() // does not lift a Stop
	end, at := s.wait(t, "stopped", lease+10*time.Second)
	if end != Expired {
		t.Errorf("ended with %v, want Expired", end)
	}
	if due := set.Add(lease - LossMargin(lease)); at.Before(due) {
		t.Errorf("Expired %v before its due time", due.Sub(at))
	}
	if carries(h.sentSince(0), "stopped") {
		t.Error("a round renewed a stopped entry")
	}
	if !carries(h.sentSince(0), "other") {
		t.Error("no round renewed the other entry")
	}
	if got, _ := s.of("other"); len(got) != 0 {
		t.Errorf("other ended: %v", got)
	}
}

// After Remove returns true, onEnd is never called; Remove of an ended
// entry returns false.
func TestEntry_Remove_noCallback(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	mr, _, h, w := start(t, Config{Lease: lease, Slot: deadSlot})
	twoNodes(w)
	held(t, mr, "removed", "gone", "dead")
	h.setGate(func(ctx context.Context, keys []string) error {
		if slices.Contains(keys, "dead") {
			return errors.New("test: down")
		}
		return nil
	})
	s := newEnds()
	set := time.Now()
	removed := s.add(t, w, lockSpec, "removed", set)
	gone := s.add(t, w, lockSpec, "gone", set)
	expired := s.add(t, w, lockSpec, "dead", set)
	mr.HDel("removed", field)
	mr.HDel("gone", field)
	if !removed.Remove() {
		t.Fatal("Remove of a live entry = false")
	}
	if removed.Remove() {
		t.Error("second Remove = true")
	}
	// The other two end, one Gone and one Expired (its node fails): the
	// removed entry would have ended too, Gone.
	if end, _ := s.wait(t, "gone", 10*time.Second); end != Gone {
		t.Errorf("gone ended with %v", end)
	}
	if end, _ := s.wait(t, "dead", lease+10*time.Second); end != Expired {
		t.Errorf("dead ended with %v", end)
	}
	if gone.Remove() || expired.Remove() {
		t.Error("Remove of an ended entry = true")
	}
	w.Close()
	if got, _ := s.of("removed"); len(got) != 0 {
		t.Errorf("removed entry ended with %v", got)
	}
}

// Close ends every entry with Closed, once, and refuses Add afterwards.
func TestWatchdog_Close(t *testing.T) {
	t.Parallel()
	mr, _, _, w := start(t, Config{Lease: 3 * time.Second})
	s := newEnds()
	keys := []string{"a", "b", "c"}
	held(t, mr, keys...)
	entries := map[string]*Entry{}
	for _, k := range keys {
		entries[k] = s.add(t, w, lockSpec, k, time.Now())
	}
	entries["c"].Stop()
	w.Close()
	for _, k := range keys {
		if got, _ := s.of(k); !slices.Equal(got, []End{Closed}) {
			t.Errorf("%s: ends %v, want [closed]", k, got)
		}
	}
	if w.Add(&Entry{}, Target{Spec: lockSpec, Key: "d", Field: field}, 1, time.Now(), func(uint64, End) { t.Error("onEnd of a refused Add") }) {
		t.Error("Add after Close accepted")
	}
	if w.Len() != 0 {
		t.Errorf("Len after Close = %d", w.Len())
	}
	if entries["a"].Remove() {
		t.Error("Remove after Close = true")
	}
	w.Close() // again: nothing
}

// A node that lost the script (restart, failover, SCRIPT FLUSH) gets it
// again, from the node's own client, and the renewal goes on without an
// error.
func TestWatchdog_noscriptReload(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var errs []error
	calls := 0
	mr, rdb, h, w := start(t, Config{Lease: 3 * time.Second, OnRenew: func(c Call) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if c.Err != nil {
			errs = append(errs, c.Err)
		}
	}})
	node := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() { _ = node.Close() }()
	nh := &hook{}
	node.AddHook(nh)
	w.node = func(context.Context, string) (string, redis.Scripter) { return "n", node }
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
	held(t, mr, "k")
	s := newEnds()
	e := s.add(t, w, lockSpec, "k", time.Now())
	waitFor(t, 10*time.Second, "a renewal", func() bool { return count() >= 1 })
	if err := rdb.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	flushed := time.Now()
	n := count()
	waitFor(t, 10*time.Second, "a renewal after SCRIPT FLUSH", func() bool { return count() > n && renewedAt(w, e).After(flushed) })
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("renewal errors: %v", errs)
	}
	nh.mu.Lock()
	defer nh.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if nh.loads < 2 || h.loads != 0 {
		t.Errorf("SCRIPT LOAD: %d on the node, %d on the client; want 2 or more (first use, flush) on the node only", nh.loads, h.loads)
	}
	if got, _ := s.of("k"); len(got) != 0 {
		t.Errorf("k ended: %v", got)
	}
}

// deadSlot puts the keys "dead*" in slot 1, the others in slot 0, as the
// Config.Slot of a watchdog that twoNodes splits.
func deadSlot(key string) int {
	if strings.HasPrefix(key, "dead") {
		return 1
	}
	return 0
}

// twoNodes makes the watchdog treat keys "dead*" (slot 1 by deadSlot) as
// served by one node and the others by another.
func twoNodes(w *Watchdog) {
	w.node = func(_ context.Context, key string) (string, redis.Scripter) {
		if strings.HasPrefix(key, "dead") {
			return "dead", w.rdb
		}
		return "live", w.rdb
	}
}

// A node that stops answering fails only the entries it serves: they end
// with Expired when their lease runs out, not before; the entries of
// another node go on being renewed and never end.
func TestWatchdog_nodeIsolation(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	mr, _, h, w := start(t, Config{Lease: lease, Slot: deadSlot})
	twoNodes(w)
	dead, live := []string{"dead1", "dead2"}, []string{"live1", "live2"}
	held(t, mr, append(dead, live...)...)
	var blocked atomic.Int32
	h.setGate(func(ctx context.Context, keys []string) error {
		if len(keys) > 0 && strings.HasPrefix(keys[0], "dead") {
			// A node that never answers: the call lasts its deadline.
			blocked.Add(1)
			defer blocked.Add(-1)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	s := newEnds()
	set := time.Now()
	entries := map[string]*Entry{}
	for _, k := range append(dead, live...) {
		entries[k] = s.add(t, w, lockSpec, k, set)
	}
	waitFor(t, 10*time.Second, "a round held by the dead node", func() bool { return blocked.Load() > 0 })
	for _, k := range dead {
		end, at := s.wait(t, k, lease+10*time.Second)
		if end != Expired {
			t.Errorf("%s ended with %v, want Expired", k, end)
		}
		if due := set.Add(lease - LossMargin(lease)); at.Before(due) {
			t.Errorf("%s Expired %v before its due time", k, due.Sub(at))
		}
	}
	// Live entries: renewed after the dead ones expired, never ended.
	after := time.Now()
	for _, k := range live {
		waitFor(t, 10*time.Second, k+" renewed after the dead node's entries expired", func() bool { return renewedAt(w, entries[k]).After(after) })
		if got, _ := s.of(k); len(got) != 0 {
			t.Errorf("%s on the live node ended: %v", k, got)
		}
	}
}

// A node whose call hangs past its deadline (a client without
// ContextTimeoutEnabled) delays nobody else: pausing an entry of another
// node does not wait for it, that node's entries go on being renewed by
// the next rounds, and the hung node's entries still end with Expired on
// time.
func TestWatchdog_hungRound(t *testing.T) {
	t.Parallel()
	const lease = 900 * time.Millisecond
	mr, _, h, w := start(t, Config{Lease: lease, Slot: deadSlot})
	twoNodes(w)
	held(t, mr, "dead", "live")
	release := make(chan struct{})
	var hung atomic.Bool
	h.setGate(func(ctx context.Context, keys []string) error {
		if slices.Contains(keys, "dead") {
			hung.Store(true)
			<-release // ignores its deadline
			return errors.New("test: no reply")
		}
		return nil
	})
	defer close(release)
	s := newEnds()
	set := time.Now()
	s.add(t, w, lockSpec, "dead", set)
	live := s.add(t, w, lockSpec, "live", set)
	waitFor(t, 10*time.Second, "the dead node's call", hung.Load)
	hangAt := time.Now()
	pctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := live.Pause(pctx); err != nil {
		t.Fatal(err)
	}
	live.Resume()
	end, at := s.wait(t, "dead", lease+10*time.Second)
	if end != Expired {
		t.Errorf("dead ended with %v, want Expired", end)
	}
	if due := set.Add(lease - LossMargin(lease)); at.Before(due) {
		t.Errorf("Expired %v before its due time", due.Sub(at))
	}
	t.Logf("Expired %v after due, while the dead node's call hung", at.Sub(set.Add(lease-LossMargin(lease))))
	waitFor(t, 10*time.Second, "live renewed a lease after the dead node's call began to hang", func() bool {
		return renewedAt(w, live).After(hangAt.Add(lease))
	})
	if got, _ := s.of("live"); len(got) != 0 {
		t.Errorf("live ended: %v", got)
	}
}
