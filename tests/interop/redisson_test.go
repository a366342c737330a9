package interop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lualock/lualock"
)

const (
	// javaWatchdog is Redisson's lockWatchdogTimeout in the agent, and
	// goWatchdog the Go clients' WatchdogLease in the watchdog and
	// forceUnlock scenarios: short, so that three leases pass in a test.
	javaWatchdog = 1500 * time.Millisecond
	goWatchdog   = 1500 * time.Millisecond
	// wakeBound bounds a wake-up after a release. The fallback timers are
	// far longer: a Go waiter's is min(remaining lease, MaxWaitTimer 10s),
	// a Redisson waiter's the remaining lease, and the holders here take
	// 30s leases, so a waiter that missed the message would be seconds late.
	wakeBound = time.Second
	// lostBound bounds how long after Redisson's forceUnlock a Go holder
	// (watchdog lease goWatchdog, renewed every third) reports the loss:
	// the next renewal finds the lock gone.
	lostBound = goWatchdog + time.Second
)

// suite is one Redisson version on one backend.
type suite struct {
	j  redissonJar
	b  backend
	ag *agent
	// goOpts are the Go clients' options: the default pub/sub kind, or with
	// Redisson before 3.22 on a cluster (which publishes with PUBLISH)
	// PubSubBoth; cliPubSub is the lualock command's -pubsub (there plain).
	goOpts    lualock.Options
	cliPubSub string
	// waits, on a replicated deployment, counts the primary's WAIT
	// commands: exclusion checks that its acquisitions sent theirs.
	waits *waitStats
}

// TestRedisson runs every scenario for each jar of LUALOCK_REDISSON_JARS on
// standalone Redis and the cluster.
func TestRedisson(t *testing.T) {
	for _, j := range redissonJars(t) {
		for i, newBackend := range backends(t) {
			t.Run(j.String()+"/"+backendNames[i], func(t *testing.T) {
				s := &suite{j: j, b: newBackend(t)}
				if s.b.cluster && !j.atLeast(3, 22) {
					s.goOpts.PubSub, s.cliPubSub = lualock.PubSubBoth, "plain"
				}
				start := time.Now()
				s.ag = startAgent(t, j, s.b.cluster, javaWatchdog, s.b.addrs)
				t.Logf("agent ready in %v; Go pub/sub %v, CLI -pubsub %q", time.Since(start), s.goOpts.PubSub, s.cliPubSub)
				s.scenarios(t)
			})
		}
	}
}

// scenarios runs every scenario of the suite.
func (s *suite) scenarios(t *testing.T) {
	for _, fair := range []bool{false, true} {
		k := "reentrant"
		if fair {
			k = "fair"
		}
		t.Run("exclusion/"+k, func(t *testing.T) { s.exclusion(t, fair) })
		t.Run("wakeup/"+k, func(t *testing.T) { s.wakeup(t, fair) })
		t.Run("reentry/"+k, func(t *testing.T) { s.reentry(t, fair) })
		t.Run("forceUnlock/"+k, func(t *testing.T) { s.forceUnlock(t, fair) })
	}
	t.Run("fairOrder", s.fairOrder)
	t.Run("watchdog", s.watchdog)
}

// exclusion: two Redisson threads and two Go handles each take the lock
// many times; inside, each increments an "inside" counter (which must read
// 1: nobody else is inside) and does a non-atomic read-modify-write of a
// shared counter, which ends at the number of holds only if no two holds
// overlapped.
func (s *suite) exclusion(t *testing.T, fair bool) {
	const perOwner = exclusionHolds
	ctx := context.Background()
	rdb := s.b.rdb
	name := uniqueName(t)
	inside, counter := name+":inside", name+":counter"
	if s.waits != nil {
		before := s.waits.read()
		defer func() {
			s.waits.atLeast(t, before, s.acquisitionWaits(2*perOwner, 2*perOwner), "the exclusion loops' acquisitions")
		}()
	}
	c := newClient(t, rdb, s.goOpts)
	var java []<-chan reply
	for _, owner := range []string{"x1", "x2"} {
		java = append(java, s.ag.send(owner, "loop", name, kindArg(fair), perOwner, inside, counter, 200))
	}
	var wg sync.WaitGroup
	goOverlaps := make([]int, 2)
	goErrs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := newLock(c, name, fair)
			for range perOwner {
				if err := l.Lock(ctx); err != nil {
					goErrs[i] = err
					return
				}
				if n, _ := rdb.Incr(ctx, inside).Result(); n != 1 {
					goOverlaps[i]++
				}
				v, _ := rdb.Get(ctx, counter).Int()
				time.Sleep(200 * time.Microsecond)
				rdb.Set(ctx, counter, v+1, 0)
				rdb.Decr(ctx, inside)
				if err := l.Unlock(ctx); err != nil {
					goErrs[i] = err
					return
				}
			}
		}()
	}
	javaOverlaps := 0
	for i, ch := range java {
		r := s.ag.await(t, ch, fmt.Sprintf("loop %d", i), 3*time.Minute)
		n, _ := strconv.Atoi(r.val)
		javaOverlaps += n
	}
	wg.Wait()
	for _, err := range goErrs {
		if err != nil {
			t.Fatalf("Go loop: %v", err)
		}
	}
	total, _ := rdb.Get(ctx, counter).Int()
	if javaOverlaps != 0 || goOverlaps[0]+goOverlaps[1] != 0 || total != 4*perOwner {
		t.Errorf("overlaps: Java %d, Go %d; counter %d, want %d holds and no overlap", javaOverlaps, goOverlaps[0]+goOverlaps[1], total, 4*perOwner)
	}
	t.Logf("%d holds (2 Redisson threads, 2 Go handles), no overlap, counter %d", 4*perOwner, total)
	rdb.Del(ctx, inside, counter)
}

// wakeup measures the time from a release to the waiter's acquisition,
// both ways: Go releases, a Redisson thread waits; Redisson releases, a Go
// waiter (library) and the lualock command wait. The release happens
// somewhere inside the releasing call, so each wake-up is measured from the
// call's start (an upper bound) and from its return (a lower bound, 0 when
// the waiter woke first). Every lower bound must be within wakeBound, far
// below the waiters' fallback timers; on a loaded machine a releasing call
// itself can take long, which only the upper bound shows.
func (s *suite) wakeup(t *testing.T, fair bool) {
	const trials = 4
	ctx := context.Background()
	rdb := s.b.rdb
	c := newClient(t, rdb, s.goOpts)
	var toJava, toGo, toCLI wakes
	for i := range trials {
		// Go -> Redisson.
		name := fmt.Sprintf("%s-gj%d", uniqueName(t), i)
		h := newLock(c, name, fair)
		if err := h.LockLease(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		got := s.ag.send("w", "lock", name, kindArg(fair), 30000)
		subscribed(t, rdb, waiterChannel(t, rdb, name, fair, 1))
		time.Sleep(30 * time.Millisecond) // let Redisson's retry after subscribing pass
		released := time.Now()
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		r := s.ag.await(t, got, "lock", 40*time.Second)
		toJava.add(released, returned, r.t1)
		s.ag.do(t, "w", "unlock", name, kindArg(fair))

		// Redisson -> Go.
		name = fmt.Sprintf("%s-jg%d", uniqueName(t), i)
		s.ag.do(t, "h", "lock", name, kindArg(fair), 30000)
		l := newLock(c, name, fair)
		acquired := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			err := l.Lock(ctx)
			acquired <- time.Now()
			errc <- err
		}()
		subscribed(t, rdb, waiterChannel(t, rdb, name, fair, 1))
		time.Sleep(30 * time.Millisecond)
		r = s.ag.do(t, "h", "unlock", name, kindArg(fair))
		at := <-acquired
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		toGo.add(r.t0, r.t1, at)
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		// Redisson -> lualock command.
		name = fmt.Sprintf("%s-jc%d", uniqueName(t), i)
		s.ag.do(t, "h", "lock", name, kindArg(fair), 30000)
		args := append([]string{"lock"}, s.b.connFlags()...)
		if fair {
			args = append(args, "-fair")
		}
		if s.cliPubSub != "" {
			args = append(args, "-pubsub", s.cliPubSub)
		}
		p := startCLI(t, nil, append(args, name, "--", "date", "+%s%N")...)
		subscribed(t, rdb, waiterChannel(t, rdb, name, fair, 1))
		time.Sleep(30 * time.Millisecond)
		r = s.ag.do(t, "h", "unlock", name, kindArg(fair))
		if code := p.wait(40 * time.Second); code != 0 {
			t.Fatalf("lualock lock exited %d: %s", code, p.stderr.String())
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(p.stdout.String()), 10, 64)
		if err != nil {
			t.Fatalf("date output %q: %v", p.stdout.String(), err)
		}
		toCLI.add(r.t0, r.t1, time.Unix(0, ns))
	}
	for _, x := range []struct {
		what string
		w    wakes
	}{{"Go release -> Redisson waiter", toJava}, {"Redisson release -> Go waiter", toGo}, {"Redisson release -> lualock command", toCLI}} {
		t.Logf("%s: from the release call's start p50 %v, max %v; from its return p50 %v, max %v (%d trials)", x.what,
			pct(x.w.fromStart, 0.5).Round(10*time.Microsecond), pct(x.w.fromStart, 1).Round(10*time.Microsecond),
			pct(x.w.fromReturn, 0.5).Round(10*time.Microsecond), pct(x.w.fromReturn, 1).Round(10*time.Microsecond), len(x.w.fromStart))
		if m := pct(x.w.fromReturn, 1); m > wakeBound {
			t.Errorf("%s: a waiter woke %v after the release call returned (all: %v), want each within %v: the release message was not heard", x.what, m, x.w.fromReturn, wakeBound)
		}
	}
}

// wakes collects the wake-up times of one direction.
type wakes struct{ fromStart, fromReturn []time.Duration }

// add records a wake-up at woke after a release call that ran from start
// to end.
func (w *wakes) add(start, end, woke time.Time) {
	w.fromStart = append(w.fromStart, woke.Sub(start))
	w.fromReturn = append(w.fromReturn, max(woke.Sub(end), 0))
}

// reentry: a lock held twice by one side stays held against the other
// until both holds are released, both ways.
func (s *suite) reentry(t *testing.T, fair bool) {
	ctx := context.Background()
	c := newClient(t, s.b.rdb, s.goOpts)
	k := kindArg(fair)
	name := uniqueName(t)
	l := newLock(c, name, fair)
	goBlocked := func(what string) {
		t.Helper()
		if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("%s: Go TryLock = %v, want ErrNotObtained", what, err)
		}
	}
	s.ag.do(t, "re", "lock", name, k, -1)
	s.ag.do(t, "re", "lock", name, k, -1)
	if r := s.ag.do(t, "re", "count", name, k); r.val != "2" {
		t.Fatalf("Redisson getHoldCount = %s, want 2", r.val)
	}
	goBlocked("Redisson holds twice")
	s.ag.do(t, "re", "unlock", name, k)
	goBlocked("Redisson holds once")
	s.ag.do(t, "re", "unlock", name, k)
	if err := l.TryLock(ctx, 0); err != nil {
		t.Fatalf("Go TryLock after Redisson's last unlock: %v", err)
	}
	if err := l.TryLock(ctx, 0); err != nil {
		t.Fatalf("Go re-entry: %v", err)
	}
	if st, err := l.Status(ctx); err != nil || st.Holds != 2 {
		t.Fatalf("Go Status = %+v, %v; want 2 holds", st, err)
	}
	javaBlocked := func(what string) {
		t.Helper()
		if r := s.ag.do(t, "re2", "trylock", name, k, 0, -1); r.val != "false" {
			t.Fatalf("%s: Redisson tryLock = %s, want false", what, r.val)
		}
	}
	javaBlocked("Go holds twice")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	javaBlocked("Go holds once")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := s.ag.do(t, "re2", "trylock", name, k, 0, -1); r.val != "true" {
		t.Fatalf("Redisson tryLock after Go's last unlock = %s, want true", r.val)
	}
	s.ag.do(t, "re2", "unlock", name, k)
}

// watchdog: Redisson holds under its watchdog and Go holds under the
// library's, reentrant and fair, all with 1.5s leases, outlive three leases
// while the other side is refused.
func (s *suite) watchdog(t *testing.T) {
	ctx := context.Background()
	o := s.goOpts
	o.WatchdogLease = goWatchdog
	c := newClient(t, s.b.rdb, o)
	type hold struct {
		name string
		fair bool
		g    *lualock.Lock // the Go hold; nil: Redisson's
	}
	var holds []hold
	for _, fair := range []bool{false, true} {
		jname, gname := fmt.Sprintf("%s-java-%v", uniqueName(t), fair), fmt.Sprintf("%s-go-%v", uniqueName(t), fair)
		s.ag.do(t, "wd", "lock", jname, kindArg(fair), -1)
		g := newLock(c, gname, fair)
		if err := g.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, hold{jname, fair, nil}, hold{gname, fair, g})
	}
	time.Sleep(3*goWatchdog + goWatchdog/3)
	for _, h := range holds {
		if h.g == nil {
			if err := newLock(c, h.name, h.fair).TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
				t.Errorf("fair=%v: after 3 leases, Go TryLock on Redisson's hold = %v, want ErrNotObtained", h.fair, err)
			}
		} else {
			if r := s.ag.do(t, "wd2", "trylock", h.name, kindArg(h.fair), 0, -1); r.val != "false" {
				t.Errorf("fair=%v: after 3 leases, Redisson tryLock on Go's hold = %s, want false", h.fair, r.val)
			}
			select {
			case <-h.g.Done():
				t.Errorf("fair=%v: Go hold reported lost: %v", h.fair, context.Cause(h.g.Context()))
			default:
			}
		}
		if d := s.b.rdb.PTTL(ctx, h.name).Val(); d <= 0 {
			t.Errorf("PTTL %s = %v after 3 leases, want a renewed lease", h.name, d)
		}
	}
	for _, h := range holds {
		if h.g == nil {
			s.ag.do(t, "wd", "unlock", h.name, kindArg(h.fair))
		} else if err := h.g.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := s.b.rdb.Exists(ctx, h.name).Val(); n != 0 {
			t.Errorf("%s left after its unlock", h.name)
		}
	}
}

// forceUnlock: Redisson's forceUnlock of a Go holder's lock reaches the
// holder's lost signal (ErrLockLost) within lostBound, and a lualock
// command holding it exits 3.
func (s *suite) forceUnlock(t *testing.T, fair bool) {
	ctx := context.Background()
	o := s.goOpts
	o.WatchdogLease = goWatchdog
	c := newClient(t, s.b.rdb, o)
	name := uniqueName(t)
	l := newLock(c, name, fair)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	r := s.ag.do(t, "f", "force", name, kindArg(fair))
	if r.val != "true" {
		t.Fatalf("Redisson forceUnlock = %s, want true", r.val)
	}
	select {
	case <-l.Done():
		if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrLockLost) {
			t.Errorf("lost cause = %v, want ErrLockLost", cause)
		}
		t.Logf("Go holder: lost signal %v after Redisson's forceUnlock", time.Since(r.t1).Round(time.Millisecond))
	case <-time.After(lostBound):
		t.Errorf("Go holder: no lost signal within %v of Redisson's forceUnlock", lostBound)
	}
	_ = l.Unlock(ctx)

	// The lualock command: exit 3.
	name = uniqueName(t) + "-cli"
	args := append(append([]string{"lock"}, s.b.connFlags()...), "-grace", "1s")
	if fair {
		args = append(args, "-fair")
	}
	if s.cliPubSub != "" {
		args = append(args, "-pubsub", s.cliPubSub)
	}
	p := startCLI(t, []string{"LUALOCK_WATCHDOG_LEASE=" + goWatchdog.String()}, append(args, name, "--", "sleep", "30")...)
	waitUntil(t, 10*time.Second, "the command holds "+name, func() bool { return s.b.rdb.Exists(ctx, name).Val() == 1 })
	r = s.ag.do(t, "f", "force", name, kindArg(fair))
	if r.val != "true" {
		t.Fatalf("Redisson forceUnlock = %s, want true", r.val)
	}
	code := p.wait(lostBound + time.Second) // + the command's exit after SIGTERM
	if code != 3 {
		t.Fatalf("lualock lock exited %d within %v of Redisson's forceUnlock, want 3 (stderr: %s)", code, lostBound+time.Second, p.stderr.String())
	}
	t.Logf("lualock command: exit 3 %v after Redisson's forceUnlock", time.Since(r.t1).Round(time.Millisecond))
}

// fairOrder: waiters that queue alternately from Redisson and Go on one
// fair lock get it in their order of arrival.
func (s *suite) fairOrder(t *testing.T) {
	const waiters = 6
	ctx := context.Background()
	rdb := s.b.rdb
	c := newClient(t, rdb, s.goOpts)
	name := uniqueName(t)
	list := name + ":order"
	h := c.NewFairLock(name)
	if err := h.LockLease(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var want []string
	var java []<-chan reply
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		label := fmt.Sprintf("go%d", i)
		if i%2 == 0 {
			label = fmt.Sprintf("java%d", i)
			java = append(java, s.ag.send(label, "push", name, "f", list, label, 10))
		} else {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := c.NewFairLock(name)
				if err := l.Lock(ctx); err != nil {
					errs <- err
					return
				}
				rdb.RPush(ctx, list, label)
				time.Sleep(10 * time.Millisecond)
				errs <- l.Unlock(ctx)
			}()
		}
		want = append(want, label)
		waitUntil(t, 10*time.Second, label+" queued", func() bool { return rdb.LLen(ctx, queueKey(name)).Val() == int64(i+1) })
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, ch := range java {
		s.ag.await(t, ch, fmt.Sprintf("push %d", i), time.Minute)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := rdb.LRange(ctx, list, 0, -1).Val()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order of acquisition %v, want the order of arrival %v", got, want)
	}
	rdb.Del(ctx, list)
}
