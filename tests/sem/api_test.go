package sem

// The Go objects (lualock.Semaphore, PermitExpirableSemaphore, Permit,
// CountDownLatch) on every backend.

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// wakeBound bounds a wake-up after a release or count down: a waiter that
// missed the message would wait for its fallback timer (MaxWaitTimer, or a
// claimer's 1 s refresh), so it would be late.
const wakeBound = 500 * time.Millisecond

// newClient returns a lualock client on b's Redis, closed at the end.
func newClient(t *testing.T, b backend, o lualock.Options) *lualock.Client {
	t.Helper()
	c, err := lualock.New(b.rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// counter counts the commands a client sends.
type counter struct{ n atomic.Int64 }

func (h *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
func (h *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

// TestSemaphoreAPI_basics walks the verbs and their replies.
func TestSemaphoreAPI_basics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := newClient(t, b, lualock.Options{}).NewSemaphore(uniqueName(t, false))
		if err := s.TryAcquire(c, 1, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("TryAcquire on a missing semaphore: %v, want ErrNotObtained", err)
		}
		if ok, err := s.TrySetPermits(c, 3); err != nil || !ok {
			t.Fatalf("TrySetPermits: %v %v", ok, err)
		}
		if ok, err := s.TrySetPermits(c, 9); err != nil || ok {
			t.Fatalf("TrySetPermits again: %v %v, want false", ok, err)
		}
		if err := s.Acquire(c, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.TryAcquire(c, 2, 50*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("TryAcquire 2 of 1: %v, want ErrNotObtained", err)
		}
		if n, err := s.AvailablePermits(c); err != nil || n != 1 {
			t.Fatalf("AvailablePermits = %d, %v; want 1", n, err)
		}
		if err := s.Release(c, 2); err != nil {
			t.Fatal(err)
		}
		if n, err := s.AddPermits(c, -1); err != nil || n != 2 {
			t.Fatalf("AddPermits(-1) = %d, %v; want 2", n, err)
		}
		if n, err := s.DrainPermits(c); err != nil || n != 2 {
			t.Fatalf("DrainPermits = %d, %v; want 2", n, err)
		}
		// A failed TryAcquire that waited leaves no claim behind.
		waitUntilGone(t, b, newSemKeys(s.Name()).claim)
	})
}

// waitUntilGone waits (up to 3 s) until key is gone.
func waitUntilGone(t *testing.T, b backend, key string) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); b.rdb.Exists(context.Background(), key).Val() != 0; {
		if time.Now().After(end) {
			t.Fatalf("%s still exists", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSemaphoreAPI_badInput: bad arguments are ErrInvalid and send nothing.
func TestSemaphoreAPI_badInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		h := &counter{}
		b.rdb.AddHook(h)
		cl := newClient(t, b, lualock.Options{})
		s := cl.NewSemaphore(uniqueName(t, false))
		e := cl.NewPermitExpirableSemaphore(uniqueName(t, false))
		l := cl.NewCountDownLatch(uniqueName(t, false))
		var nilCtx context.Context
		// Over 15 digits: the scripts take counts Redis parses whole
		// (the most on 32 bits is under that bound, and sent).
		tooMany := int(min(uint64(^uint(0)>>1), 1_000_000_000_000_000))
		if strconv.IntSize < 64 {
			tooMany = 0
		}
		before := h.n.Load()
		for i, err := range []error{
			s.Acquire(c, tooMany),
			s.Release(c, tooMany),
			s.Acquire(c, 0),
			s.TryAcquire(c, -1, time.Second),
			s.TryAcquire(c, 1, -time.Second),
			s.Release(c, 0),
			s.Acquire(nilCtx, 1),
			func() error { _, err := s.TrySetPermits(c, -1); return err }(),
			func() error { _, err := s.TrySetPermitsTTL(c, 1, 0); return err }(),
			cl.NewSemaphore("").Acquire(c, 1),
			cl.NewSemaphore("a{b").Release(c, 1),
			func() error { _, err := e.AcquireLease(c, 0); return err }(),
			func() error { _, err := e.TryAcquire(c, -1); return err }(),
			e.ReleaseID(c, "xyz"),
			func() error { _, err := l.TrySetCount(c, 0); return err }(),
			l.Await(nilCtx),
		} {
			if !errors.Is(err, lualock.ErrInvalid) {
				t.Errorf("case %d: %v, want ErrInvalid", i, err)
			}
		}
		if n := h.n.Load() - before; n != 0 {
			t.Fatalf("%d commands sent for bad input", n)
		}
	})
}

// TestSemaphoreAPI_wake: waiters in another client are woken by releases
// within wakeBound; one release of 3 permits serves 3 waiters of one
// client (the wake-up passes from one to the next).
func TestSemaphoreAPI_wake(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		name := uniqueName(t, false)
		holder := newClient(t, b, lualock.Options{}).NewSemaphore(name)
		waiters := newClient(t, b, lualock.Options{})
		if _, err := holder.TrySetPermits(c, 3); err != nil {
			t.Fatal(err)
		}
		if err := holder.Acquire(c, 3); err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 3)
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				err := waiters.NewSemaphore(name).Acquire(c, 1)
				got <- time.Now()
				errs <- err
			}()
		}
		time.Sleep(100 * time.Millisecond) // the waiters subscribe and are refused
		released := time.Now()
		if err := holder.Release(c, 3); err != nil {
			t.Fatal(err)
		}
		var worst time.Duration
		for range 3 {
			at := <-got
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			worst = max(worst, at.Sub(released))
		}
		t.Logf("3 waiters served by one release of 3 within %v", worst)
		if worst > wakeBound {
			t.Fatalf("last waiter woke %v after the release, want < %v", worst, wakeBound)
		}
	})
}

// TestSemaphoreAPI_overSubscription: 2 clients x 5 goroutines take 1 or 2
// of 3 permits, 300 acquisitions in all: never more than 3 in use, 3
// available at the end. Bounded: 60 s.
func TestSemaphoreAPI_overSubscription(t *testing.T) {
	const permits, workers, total = 3, 5, 300
	forEachBackend(t, func(t *testing.T, b backend) {
		c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		name := uniqueName(t, false)
		clients := []*lualock.Client{newClient(t, b, lualock.Options{}), newClient(t, b, lualock.Options{})}
		if _, err := clients[0].NewSemaphore(name).TrySetPermits(c, permits); err != nil {
			t.Fatal(err)
		}
		var inUse, over, done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 2*workers)
		for _, cl := range clients {
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := cl.NewSemaphore(name)
					for i := 0; done.Add(1) <= total; i++ {
						n := 1 + (i+w)%2
						if err := s.Acquire(c, n); err != nil {
							errs <- err
							return
						}
						if inUse.Add(int64(n)) > permits {
							over.Add(1)
						}
						time.Sleep(200 * time.Microsecond)
						inUse.Add(-int64(n))
						if err := s.Release(c, n); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			k := newSemKeys(name)
			t.Fatalf("%v (N=%q, claim=%q, %d done)", err, get(t, b.rdb, k.name), get(t, b.rdb, k.claim), done.Load())
		}
		if over.Load() != 0 {
			t.Fatalf("%d times more than %d permits in use", over.Load(), permits)
		}
		if n, err := clients[0].NewSemaphore(name).AvailablePermits(c); err != nil || n != permits {
			t.Fatalf("AvailablePermits = %d, %v at the end; want %d", n, err, permits)
		}
	})
}

// TestSemaphoreAPI_cancel: an Acquire whose ctx ends returns ctx's error,
// takes nothing, and its claim goes away; Close wakes a waiter with
// ErrClosed.
func TestSemaphoreAPI_cancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		cl := newClient(t, b, lualock.Options{})
		s := cl.NewSemaphore(uniqueName(t, false))
		if _, err := s.TrySetPermits(c, 1); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(c, 100*time.Millisecond)
		defer cancel()
		if err := s.Acquire(short, 2); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with a short ctx: %v, want DeadlineExceeded", err)
		}
		waitUntilGone(t, b, newSemKeys(s.Name()).claim)
		if n, _ := s.AvailablePermits(c); n != 1 {
			t.Fatalf("available %d after a cancelled Acquire, want 1", n)
		}
		other := newClient(t, b, lualock.Options{})
		errc := make(chan error, 1)
		go func() { errc <- other.NewSemaphore(s.Name()).Acquire(c, 5) }()
		time.Sleep(100 * time.Millisecond)
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, lualock.ErrClosed) {
			t.Fatalf("Acquire during Close: %v, want ErrClosed", err)
		}
	})
}

// TestPermitAPI_watchdog: a permit without a lease outlives several
// leases, renewed; Release gives it back; a permit removed behind its back
// ends its Context with ErrLockLost.
func TestPermitAPI_watchdog(t *testing.T) {
	const lease = 300 * time.Millisecond
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		cl := newClient(t, b, lualock.Options{WatchdogLease: lease})
		e := cl.NewPermitExpirableSemaphore(uniqueName(t, false))
		k := newSemKeys(e.Name())
		if _, err := e.TrySetPermits(c, 2); err != nil {
			t.Fatal(err)
		}
		p, err := e.Acquire(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.ID()) != 32 {
			t.Fatalf("ID %q, want 32 hex characters", p.ID())
		}
		time.Sleep(3 * lease)
		if p.Context().Err() != nil {
			t.Fatalf("permit ended: %v", context.Cause(p.Context()))
		}
		if av, held, err := e.AvailablePermits(c); err != nil || av != 1 || held != 1 {
			t.Fatalf("available, held = %d, %d, %v after 3 leases; want 1, 1", av, held, err)
		}
		if err := p.Release(c); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(context.Cause(p.Context()), lualock.ErrNotHeld) {
			t.Fatalf("cause after Release: %v", context.Cause(p.Context()))
		}
		if err := p.Release(c); !errors.Is(err, lualock.ErrNotHeld) {
			t.Fatalf("second Release: %v, want ErrNotHeld", err)
		}

		lost, err := e.Acquire(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.rdb.Del(c, k.timeouts).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lost.Done():
		case <-time.After(2 * lease):
			t.Fatal("the lost permit's Context did not end within 2 leases")
		}
		if !errors.Is(context.Cause(lost.Context()), lualock.ErrLockLost) {
			t.Fatalf("cause: %v, want ErrLockLost", context.Cause(lost.Context()))
		}
		if err := lost.Release(c); !errors.Is(err, lualock.ErrLockLost) {
			t.Fatalf("Release of a lost permit: %v, want ErrLockLost", err)
		}
	})
}

// TestPermitAPI_deadHolder: a permit with a fixed lease that is never
// released comes back at its deadline to a waiter of another client, whose
// wait is timed by the deadline; the dead holder's Release is ErrNotHeld.
func TestPermitAPI_deadHolder(t *testing.T) {
	const lease = 300 * time.Millisecond
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		name := uniqueName(t, false)
		dead := newClient(t, b, lualock.Options{}).NewPermitExpirableSemaphore(name)
		if _, err := dead.TrySetPermits(c, 1); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p, err := dead.AcquireLease(c, lease)
		if err != nil {
			t.Fatal(err)
		}
		q, err := newClient(t, b, lualock.Options{}).NewPermitExpirableSemaphore(name).TryAcquireLease(c, 5*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		t.Logf("the dead holder's permit came back after %v (lease %v)", d, lease)
		if d < lease || d > lease+wakeBound {
			t.Fatalf("waiter got the permit after %v, want within [%v, %v]", d, lease, lease+wakeBound)
		}
		if !errors.Is(context.Cause(p.Context()), lualock.ErrNotHeld) {
			t.Fatalf("dead holder's cause %v, want ErrNotHeld (lease ran out)", context.Cause(p.Context()))
		}
		if err := p.Release(c); !errors.Is(err, lualock.ErrNotHeld) {
			t.Fatalf("dead holder's Release: %v, want ErrNotHeld", err)
		}
		if err := dead.ReleaseID(c, q.ID()); err != nil {
			t.Fatalf("ReleaseID of the other client's permit: %v", err)
		}
	})
}

// TestLatchAPI_await: three awaiters of two clients return within
// wakeBound of the count down that opens the latch.
func TestLatchAPI_await(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		name := uniqueName(t, false)
		a, w := newClient(t, b, lualock.Options{}), newClient(t, b, lualock.Options{})
		l := a.NewCountDownLatch(name)
		if ok, err := l.TrySetCount(c, 2); err != nil || !ok {
			t.Fatalf("TrySetCount: %v %v", ok, err)
		}
		got := make(chan time.Time, 3)
		errs := make(chan error, 3)
		for i := range 3 {
			cl := a
			if i > 0 {
				cl = w
			}
			go func() {
				err := cl.NewCountDownLatch(name).Await(c)
				got <- time.Now()
				errs <- err
			}()
		}
		if err := l.CountDown(c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		select {
		case <-got:
			t.Fatal("an awaiter returned before the latch opened")
		default:
		}
		opened := time.Now()
		if err := l.CountDown(c); err != nil {
			t.Fatal(err)
		}
		var worst time.Duration
		for range 3 {
			at := <-got
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			worst = max(worst, at.Sub(opened))
		}
		t.Logf("3 awaiters returned within %v", worst)
		if worst > wakeBound {
			t.Fatalf("awaiter returned %v after the latch opened, want < %v", worst, wakeBound)
		}
		if n, err := l.Count(c); err != nil || n != 0 {
			t.Fatalf("Count = %d, %v; want 0", n, err)
		}
		if b.cluster {
			if err := a.NewCountDownLatch("{app}:" + name).CountDown(c); !errors.Is(err, lualock.ErrInvalid) {
				t.Fatalf("braced latch name on a cluster: %v, want ErrInvalid", err)
			}
		}
	})
}

// eofReply lets an EVALSHA of one script run, then loses its reply with
// io.EOF (a transient error: the client resends) while armed.
type eofReply struct {
	sha   string
	armed atomic.Int32
}

func (h *eofReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *eofReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *eofReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err == nil && len(args) > 1 && args[0] == "evalsha" && args[1] == h.sha && h.armed.Add(-1) >= 0 {
			cmd.SetErr(io.EOF)
			return io.EOF
		}
		return err
	}
}

// TestSemaphoreAPI_lostReplies: replies of acquire, release, count down
// and permit release lost (the scripts ran): the objects resend under the
// same request id and nothing counts twice.
func TestSemaphoreAPI_lostReplies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		hooks := map[string]*eofReply{}
		for _, sha := range []string{generated.SemaphoreAcquireSHA1, generated.SemaphoreReleaseSHA1, generated.LatchCountDownSHA1, generated.ExpirableSemaphoreReleaseSHA1} {
			hooks[sha] = &eofReply{sha: sha}
			b.rdb.AddHook(hooks[sha])
		}
		cl := newClient(t, b, lualock.Options{})
		s := cl.NewSemaphore(uniqueName(t, false))
		if _, err := s.TrySetPermits(c, 5); err != nil {
			t.Fatal(err)
		}
		hooks[generated.SemaphoreAcquireSHA1].armed.Store(2)
		if err := s.Acquire(c, 2); err != nil {
			t.Fatal(err)
		}
		hooks[generated.SemaphoreReleaseSHA1].armed.Store(2)
		if err := s.Release(c, 1); err != nil {
			t.Fatal(err)
		}
		if n, err := s.AvailablePermits(c); err != nil || n != 4 {
			t.Fatalf("available %d (%v) after acquire 2 and release 1 with lost replies, want 4", n, err)
		}

		l := cl.NewCountDownLatch(uniqueName(t, false))
		if _, err := l.TrySetCount(c, 3); err != nil {
			t.Fatal(err)
		}
		hooks[generated.LatchCountDownSHA1].armed.Store(2)
		if err := l.CountDown(c); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Count(c); err != nil || n != 2 {
			t.Fatalf("count %d (%v) after one count down with lost replies, want 2", n, err)
		}

		e := cl.NewPermitExpirableSemaphore(uniqueName(t, false))
		if _, err := e.TrySetPermits(c, 2); err != nil {
			t.Fatal(err)
		}
		p, err := e.AcquireLease(c, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		hooks[generated.ExpirableSemaphoreReleaseSHA1].armed.Store(1)
		if err := p.Release(c); err != nil {
			t.Fatalf("Release with a lost reply: %v, want nil (the resend replays it)", err)
		}
		if av, held, err := e.AvailablePermits(c); err != nil || av != 2 || held != 0 {
			t.Fatalf("available, held = %d, %d (%v); want 2, 0", av, held, err)
		}
		for sha, h := range hooks {
			if h.armed.Load() > 0 {
				t.Errorf("hook %s not hit", sha[:8])
			}
		}
	})
}

// heldReply holds the reply of a permit release until the permit's
// Context ends or a while passes: the hold tracker hears the release's
// own write and checks the permit first.
type heldReply struct {
	permit atomic.Pointer[lualock.Permit]
}

func (h *heldReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *heldReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *heldReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if p := h.permit.Load(); p != nil && err == nil && len(args) > 1 && args[1] == generated.ExpirableSemaphoreReleaseSHA1 {
			select {
			case <-p.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		return err
	}
}

// TestPermitAPI_releaseNotLoss: a Release whose reply comes after the hold
// tracker has heard the release's own write (and checked the permit, now
// gone) still ends the permit with ErrNotHeld: Release stops watching
// before it sends. Before that, the tracker ended it with ErrLockLost.
func TestPermitAPI_releaseNotLoss(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.mini != nil {
			t.Skip("miniredis has no client-side caching: no hold tracker")
		}
		c := ctx(t)
		hook := &heldReply{}
		b.rdb.AddHook(hook)
		cl := newClient(t, b, lualock.Options{})
		e := cl.NewPermitExpirableSemaphore(uniqueName(t, false))
		if _, err := e.TrySetPermits(c, 1); err != nil {
			t.Fatal(err)
		}
		for _, lease := range []time.Duration{0, time.Minute} {
			var p *lualock.Permit
			var err error
			if lease == 0 {
				p, err = e.Acquire(c)
			} else {
				p, err = e.AcquireLease(c, lease)
			}
			if err != nil {
				t.Fatal(err)
			}
			hook.permit.Store(p)
			err = p.Release(c)
			hook.permit.Store(nil)
			if err != nil {
				t.Fatalf("lease %v: Release: %v", lease, err)
			}
			if cause := context.Cause(p.Context()); !errors.Is(cause, lualock.ErrNotHeld) {
				t.Fatalf("lease %v: cause after Release: %v, want ErrNotHeld", lease, cause)
			}
		}
	})
}
