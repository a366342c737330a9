package family

// The read-write lock through the Go API (lualock.Client's
// NewReadWriteLock) on every backend.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// wakeBound bounds a wake-up after a release: a waiter that missed the
// message would sleep until its fallback timer (the holder's 30 s lease,
// capped by MaxWaitTimer, 10 s).
const wakeBound = time.Second

// TestReadWriteLock: the reentrant lock suite's scenarios that apply to
// the read-write lock, and its own.
func TestReadWriteLock(t *testing.T) {
	backends.Table(t, []backends.Scenario{
		{Name: "shareAndExclude", Run: rwShareAndExclude},
		{Name: "wakeup", Run: rwWakeup},
		{Name: "readersOfOneClient", Run: rwReadersOfOneClient},
		{Name: "silentDowngrade", Run: rwSilentDowngrade},
		{Name: "trackedDowngrade", Run: rwTrackedDowngrade},
		{Name: "watchdog", Run: rwWatchdog},
		{Name: "leaseHandover", Run: rwLeaseHandover},
		{Name: "overlap", Run: rwAPIOverlap},
	})
}

// rwShareAndExclude: readers share, a writer is alone, both re-enter, the
// owner downgrades, an upgrade is refused.
func rwShareAndExclude(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	c := backends.NewClient(t, rdb, lualock.Options{})
	ctx := context.Background()
	name := backends.UniqueName(t)
	a, bb, w := c.NewReadWriteLock(name), c.NewReadWriteLock(name), c.NewReadWriteLock(name)

	ok(t, "a read", a.ReadLock().Lock(ctx))
	ok(t, "a read again", a.ReadLock().TryLock(ctx, 0))
	ok(t, "b read", bb.ReadLock().TryLock(ctx, 0))
	is(t, "w write beside readers", w.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	is(t, "a write (upgrade)", a.WriteLock().TryLock(ctx, 0), lualock.ErrUpgrade)
	if n, err := a.ReadLock().HoldCount(ctx); err != nil || n != 2 {
		t.Fatalf("a read HoldCount = %d, %v; want 2", n, err)
	}
	if l, err := w.ReadLock().IsLocked(ctx); err != nil || !l {
		t.Fatalf("read IsLocked = %v, %v; want true", l, err)
	}
	if l, err := w.WriteLock().IsLocked(ctx); err != nil || l {
		t.Fatalf("write IsLocked = %v, %v; want false", l, err)
	}
	for range 2 {
		ok(t, "a read unlock", a.ReadLock().Unlock(ctx))
	}
	is(t, "a read unlock, none left", a.ReadLock().Unlock(ctx), lualock.ErrNotHeld)
	ok(t, "b read unlock", bb.ReadLock().Unlock(ctx))

	ok(t, "w write", w.WriteLock().TryLock(ctx, 0))
	ok(t, "w write again", w.WriteLock().TryLock(ctx, 0))
	is(t, "a read beside a writer", a.ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	is(t, "a write beside a writer", a.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	// Downgrade: the writer reads, then leaves the write lock.
	ok(t, "w read under its write", w.ReadLock().TryLock(ctx, 0))
	ok(t, "w write unlock 1", w.WriteLock().Unlock(ctx))
	is(t, "a read while w still writes", a.ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	ok(t, "w write unlock 2", w.WriteLock().Unlock(ctx))
	if m := rdb.HGet(ctx, name, "mode").Val(); m != "read" {
		t.Fatalf("mode after the downgrade = %q, want read", m)
	}
	ok(t, "a read after the downgrade", a.ReadLock().TryLock(ctx, 0))
	is(t, "b write beside readers", bb.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	ok(t, "w read unlock", w.ReadLock().Unlock(ctx))
	ok(t, "a read unlock", a.ReadLock().Unlock(ctx))
	ok(t, "b write now", bb.WriteLock().TryLock(ctx, 0))
	ok(t, "b write unlock", bb.WriteLock().Unlock(ctx))
	backends.WantGone(t, rdb, name)
}

// rwWakeup: a writer waiting behind a reader, and readers waiting behind a
// writer, are woken by the release message within wakeBound (the fallback
// timer would be 10 s).
func rwWakeup(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	c := backends.NewClient(t, rdb, lualock.Options{NoHoldTracking: true}) // the message wakes, not the tracker
	ctx := context.Background()
	for _, holderWrites := range []bool{false, true} {
		name := backends.UniqueName(t)
		h, wt := c.NewReadWriteLock(name), c.NewReadWriteLock(name)
		hold, wait := h.ReadLock(), wt.WriteLock()
		if holderWrites {
			hold, wait = h.WriteLock(), wt.ReadLock()
		}
		ok(t, "hold", hold.Lock(ctx))
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			err := wait.Lock(ctx)
			got <- time.Now()
			errc <- err
		}()
		ch := "redisson_rwlock:{" + name + "}"
		backends.WaitFor(t, "a subscriber on "+ch, 10*time.Second, func() bool {
			return backends.NumSub(t, rdb, []string{ch})[ch] > 0
		})
		time.Sleep(20 * time.Millisecond) // let the waiter's attempt after subscribing pass
		ok(t, "release", hold.Unlock(ctx))
		released := time.Now()
		at := <-got
		ok(t, "waiter", <-errc)
		if d := at.Sub(released); d > wakeBound {
			t.Fatalf("holder writes %v: the waiter woke %v after the release, want within %v", holderWrites, d, wakeBound)
		} else {
			t.Logf("holder writes %v: woken %v after the release returned", holderWrites, max(d, 0))
		}
		ok(t, "waiter unlock", wait.Unlock(ctx))
	}
}

// rwWatchdog: read and write holds under a 1.5 s watchdog outlive three
// leases (the read holds' timeout keys renewed with the lock), and a hold
// whose key is deleted is reported lost.
func rwWatchdog(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	const lease = 1500 * time.Millisecond
	c := backends.NewClient(t, rdb, lualock.Options{WatchdogLease: lease})
	if testing.Short() {
		t.Skip("-short: waits three leases")
	}
	ctx := context.Background()
	rname, wname := backends.UniqueName(t)+"-r", backends.UniqueName(t)+"-w"
	r, w := c.NewReadWriteLock(rname), c.NewReadWriteLock(wname)
	ok(t, "read", r.ReadLock().Lock(ctx))
	ok(t, "read again", r.ReadLock().Lock(ctx))
	ok(t, "write", w.WriteLock().Lock(ctx))
	ok(t, "write's read", w.ReadLock().Lock(ctx))
	wo := c.NewReadWriteLock(wname + "-only") // a write hold without read holds
	ok(t, "write alone", wo.WriteLock().Lock(ctx))
	time.Sleep(3*lease + lease/3)
	other := c.NewReadWriteLock(rname)
	is(t, "write beside the renewed reader", other.WriteLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	is(t, "read beside the renewed writer", c.NewReadWriteLock(wname).ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	for _, l := range []*lualock.Lock{r.ReadLock(), w.WriteLock(), w.ReadLock(), wo.WriteLock()} {
		select {
		case <-l.Done():
			t.Fatalf("a hold of %s ended: %v", l.Name(), context.Cause(l.Context()))
		default:
		}
	}
	is(t, "read beside the renewed lone writer", c.NewReadWriteLock(wname+"-only").ReadLock().TryLock(ctx, 0), lualock.ErrNotObtained)
	ok(t, "lone writer's unlock", wo.WriteLock().Unlock(ctx))
	f := r.ReadLock().Field()
	for i := 1; i <= 2; i++ {
		k := "{" + rname + "}:" + f + ":rwlock_timeout:" + fmt.Sprint(i)
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 {
			t.Fatalf("PTTL %s = %v after three leases, want a renewed key", k, d)
		}
	}
	// Lost: the lock deleted under the reader and the writer.
	del(t, rdb, rname, wname)
	for _, l := range []*lualock.Lock{r.ReadLock(), w.WriteLock(), w.ReadLock()} {
		select {
		case <-l.Done():
			is(t, "cause", context.Cause(l.Context()), lualock.ErrLockLost)
		case <-time.After(2 * lease):
			t.Fatalf("no lost signal on %s within %v", l.Name(), 2*lease)
		}
	}
	is(t, "unlock of a lost read hold", r.ReadLock().Unlock(ctx), lualock.ErrLockLost)
	is(t, "unlock of a lost write hold", w.WriteLock().Unlock(ctx), lualock.ErrLockLost)
}

// rwLeaseHandover: a reader's fixed lease runs out and a waiting writer gets
// the lock (by its fallback timer: no release was published); a cancelled
// wait returns the context's error and holds nothing; a bad name is
// ErrInvalid.
func rwLeaseHandover(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	c := backends.NewClient(t, rdb, lualock.Options{})
	ctx := context.Background()
	name := backends.UniqueName(t)
	r, w := c.NewReadWriteLock(name), c.NewReadWriteLock(name)
	ok(t, "read with a lease", r.ReadLock().LockLease(ctx, 300*time.Millisecond))
	start := time.Now()
	ok(t, "writer", w.WriteLock().TryLock(ctx, 5*time.Second))
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("writer got the lock %v after the reader's 300ms lease began", d)
	}
	is(t, "reader's unlock after its lease ran out", r.ReadLock().Unlock(ctx), lualock.ErrNotHeld)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	is(t, "cancelled read wait", r.ReadLock().Lock(cctx), context.DeadlineExceeded)
	if n, err := r.ReadLock().HoldCount(ctx); err != nil || n != 0 {
		t.Fatalf("reader holds %d, %v after a cancelled wait", n, err)
	}
	ok(t, "writer unlock", w.WriteLock().Unlock(ctx))
	is(t, "bad name", c.NewReadWriteLock("").ReadLock().Lock(ctx), lualock.ErrInvalid)
	is(t, "bad name", c.NewReadWriteLock("a{b").WriteLock().Lock(ctx), lualock.ErrInvalid)
	if ok, err := w.ReadLock().ForceUnlock(ctx); err != nil || ok {
		t.Fatalf("force unlock of a free lock = %v, %v", ok, err)
	}
}

// rwAPIOverlap: readers together and writers alone under load, through the
// API: 12 goroutines with a ReadWriteLock each, 1200 acquisitions (240 on
// miniredis), an in-process detector. Bounded: 2 min.
func rwAPIOverlap(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	const readers, writers = 8, 4
	c := backends.NewClient(t, rdb, lualock.Options{})
	per := 100
	if b.Mini() {
		per = 20
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := backends.UniqueName(t)
	var d detector
	errs := make(chan error, readers+writers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range readers + writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw := c.NewReadWriteLock(name)
			writer := i >= readers
			l := rw.ReadLock()
			if writer {
				l = rw.WriteLock()
			}
			for range per {
				if err := l.Lock(ctx); err != nil {
					errs <- err
					return
				}
				d.enter(writer)
				time.Sleep(100 * time.Microsecond)
				d.leave(writer)
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
				if !writer {
					time.Sleep(500 * time.Microsecond) // let writers in
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if o := d.overlaps.Load(); o != 0 {
		t.Fatalf("%d overlaps", o)
	}
	if d.maxR.Load() < 2 {
		t.Errorf("readers never shared the lock")
	}
	backends.WantGone(t, rdb, name)
	t.Logf("%d acquisitions in %v, up to %d readers at once, no overlap", (readers+writers)*per, time.Since(start).Round(time.Millisecond), d.maxR.Load())
}

// readAttempts counts, per owner field, the read and the write acquire
// scripts that Redis refused or ran: a waiter's attempts.
type readAttempts struct {
	mu sync.Mutex
	n  map[string]int // by "r "/"w " + field
}

func (h *readAttempts) note(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) <= 6 || fmt.Sprint(a[0]) != "evalsha" {
		return
	}
	side := ""
	switch a[1] {
	case generated.RwlockReadAcquireSHA1:
		side = "r "
	case generated.RwlockWriteAcquireSHA1:
		side = "w "
	}
	if side != "" {
		h.mu.Lock()
		h.n[side+fmt.Sprint(a[len(a)-2])]++ // ARGV: lease, field, holds
		h.mu.Unlock()
	}
}

func (h *readAttempts) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[key]
}

// rwReadersOfOneClient: readers of one client waiting behind a writer all
// get in on the writer's one release message, and waiting writers are
// still woken one per message. MaxWaitTimer is an hour and the holders'
// leases are the watchdog's 30 s, beyond the waits: only a message can
// wake a waiter (the hold tracker, which would wake the readers at the
// key's change, is off), so a reader that got in was woken by the release (before
// the read lock woke every reader, one reader got in per message and the
// others slept until their fallback timer).
func rwReadersOfOneClient(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	const readers = 4
	attempts := &readAttempts{n: map[string]int{}}
	hooked := backends.Hooked(t, rdb, backends.Observe{Note: attempts.note})
	c := backends.NewClient(t, hooked, lualock.Options{MaxWaitTimer: time.Hour, NoHoldTracking: true})
	ctx := context.Background()
	name := backends.UniqueName(t)
	writer := c.NewReadWriteLock(name).WriteLock()
	ok(t, "writer", writer.Lock(ctx))

	rs := make([]*lualock.Lock, readers)
	errc := make(chan error, readers)
	for i := range rs {
		rs[i] = c.NewReadWriteLock(name).ReadLock()
		go func() { errc <- rs[i].TryLock(ctx, 20*time.Second) }()
	}
	ch := "redisson_rwlock:{" + name + "}"
	backends.WaitFor(t, "every reader refused, and a subscriber on "+ch, 10*time.Second, func() bool {
		for _, r := range rs {
			if attempts.count("r "+r.Field()) == 0 {
				return false
			}
		}
		return backends.NumSub(t, rdb, []string{ch})[ch] > 0
	})
	time.Sleep(50 * time.Millisecond) // let each reader reach its sleep after its refusal
	ok(t, "writer unlock", writer.Unlock(ctx))
	for range readers {
		ok(t, "reader", <-errc)
	}
	var counts []int
	for _, r := range rs {
		counts = append(counts, attempts.count("r "+r.Field()))
	}
	t.Logf("%d readers in on one write release; attempts per reader %v", readers, counts)

	// Writers behind the readers: each reader's release that empties the
	// lock publishes once, and each message lets one writer try.
	ws := make([]*lualock.Lock, 2)
	werrc := make(chan error, len(ws))
	for i := range ws {
		ws[i] = c.NewReadWriteLock(name).WriteLock()
		go func() { werrc <- ws[i].TryLock(ctx, 20*time.Second) }()
	}
	backends.WaitFor(t, "every writer refused", 10*time.Second, func() bool {
		return attempts.count("w "+ws[0].Field()) > 0 && attempts.count("w "+ws[1].Field()) > 0
	})
	time.Sleep(50 * time.Millisecond)
	before := [2]int{attempts.count("w " + ws[0].Field()), attempts.count("w " + ws[1].Field())}
	for _, r := range rs {
		ok(t, "reader unlock", r.Unlock(ctx)) // the last one publishes
	}
	ok(t, "a writer", <-werrc)
	time.Sleep(50 * time.Millisecond)
	woken := 0
	for i, w := range ws {
		if attempts.count("w "+w.Field()) > before[i] {
			woken++
		}
	}
	if woken != 1 {
		t.Errorf("%d writers attempted after one release message, want 1 (one per message)", woken)
	}
	for _, w := range ws {
		if held, _ := w.IsHeld(ctx); held {
			ok(t, "writer unlock", w.Unlock(ctx))
		}
	}
	ok(t, "the other writer", <-werrc)
	for _, w := range ws {
		if held, _ := w.IsHeld(ctx); held {
			ok(t, "writer unlock", w.Unlock(ctx))
		}
	}
	backends.WantGone(t, rdb, name)
}

// foreignWriter and foreignDowngrade write Redisson's layout as its write
// lock and its downgrade do (owner "java:1"): the downgrade (read lock
// taken under the write lock, then the write lock released) publishes
// nothing.
var (
	foreignWriter = redis.NewScript(`redis.call('hset', KEYS[1], 'mode', 'write', ARGV[1] .. ':write', 1)
return redis.call('pexpire', KEYS[1], 30000)`)
	foreignDowngrade = redis.NewScript(`redis.call('hset', KEYS[1], ARGV[1], 1)
redis.call('set', KEYS[2], 1, 'px', 30000)
redis.call('hdel', KEYS[1], ARGV[1] .. ':write')
return redis.call('hset', KEYS[1], 'mode', 'read')`)
)

// rwSilentDowngrade: readers of one client wait behind a foreign writer
// that downgrades without a message (Redisson's way), with no hold
// tracker to tell them (rwTrackedDowngrade has it). One reader finds it
// at its fallback timer (MaxWaitTimer, 1 s) and the others follow it at
// once, as what let one reader in lets them all in: all are in within one
// timer period of the first (the channel's timer, re-armed after it
// fired, cannot wake the next reader sooner than a period later).
func rwSilentDowngrade(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	const readers, period = 4, time.Second
	c := backends.NewClient(t, rdb, lualock.Options{MaxWaitTimer: period, NoHoldTracking: true})
	ctx := context.Background()
	name := backends.UniqueName(t)
	if err := foreignWriter.Run(ctx, rdb, []string{name}, "java:1").Err(); err != nil {
		t.Fatal(err)
	}
	rs := make([]*lualock.Lock, readers)
	at := make(chan time.Time, readers)
	errc := make(chan error, readers)
	for i := range rs {
		rs[i] = c.NewReadWriteLock(name).ReadLock()
		go func() {
			err := rs[i].TryLock(ctx, 20*time.Second)
			at <- time.Now()
			errc <- err
		}()
	}
	backends.WaitFor(t, "every reader waiting", 10*time.Second, func() bool { return c.Stats().Waiters == readers })
	if err := foreignDowngrade.Run(ctx, rdb, []string{name, "{" + name + "}:java:1:rwlock_timeout:1"}, "java:1").Err(); err != nil {
		t.Fatal(err)
	}
	var first, last time.Time
	for range readers {
		ok(t, "reader", <-errc)
		a := <-at
		if first.IsZero() || a.Before(first) {
			first = a
		}
		if a.After(last) {
			last = a
		}
	}
	t.Logf("%d readers in after a silent downgrade, the last %v after the first", readers, last.Sub(first))
	if d := last.Sub(first); d >= period {
		t.Errorf("the last reader got in %v after the first, want within one timer period (%v): one reader's entry must let the others in", d, period)
	}
	for _, r := range rs {
		ok(t, "reader unlock", r.Unlock(ctx))
	}
	rdb.Del(ctx, name, "{"+name+"}:java:1:rwlock_timeout:1")
}

// rwTrackedDowngrade: readers of one client wait behind a foreign writer
// whose fallback timers cannot fire within their wait (MaxWaitTimer 1 h;
// the writer's lease, 30 s, outlasts the readers' 20 s TryLock). The
// writer downgrades without a message; the hold tracker hears the hash
// change and wakes them: every one gets in. Causality, not timing: before
// the downgrade every reader is asleep, having made an attempt after a
// change of the hash that the tracker announced (a probe field written
// once all were registered), so any later attempt of theirs is a wake-up's;
// and a reader of a client without the tracker, asleep beside them, is
// still waiting when they are all in: no message nor timer woke anyone.
func rwTrackedDowngrade(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
	if b.Mini() {
		t.Skip("miniredis has no client-side caching (CLIENT TRACKING): the fallback timer is the bound there")
	}
	const readers = 3
	attempts := &sleepProbe{}
	hooked := backends.Hooked(t, rdb, attempts)
	c := backends.NewClient(t, hooked, lualock.Options{MaxWaitTimer: time.Hour, ClientID: "tracked"})
	blind := backends.NewClient(t, hooked, lualock.Options{MaxWaitTimer: time.Hour, NoHoldTracking: true, ClientID: "blind"})
	ctx := context.Background()
	name := backends.UniqueName(t)
	timeout := "{" + name + "}:java:1:rwlock_timeout:1"
	t.Cleanup(func() { rdb.Del(context.Background(), name, timeout) })
	if err := foreignWriter.Run(ctx, rdb, []string{name}, "java:1").Err(); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		at  time.Time
		err error
	}
	in := make(chan entry, readers)
	for range readers {
		r := c.NewReadWriteLock(name).ReadLock()
		backends.UnlockLater(t, r)
		go func() {
			err := r.TryLock(ctx, 20*time.Second)
			in <- entry{time.Now(), err}
		}()
	}
	bctx, stopBlind := context.WithCancel(ctx)
	blindDone := make(chan error, 1)
	go func() { blindDone <- blind.NewReadWriteLock(name).ReadLock().TryLock(bctx, 20*time.Second) }()
	defer func() {
		stopBlind()
		if err := <-blindDone; err == nil {
			t.Error("the reader without a tracker got in: want it cancelled while waiting")
		}
	}()
	backends.WaitFor(t, "every reader waiting", 10*time.Second, func() bool {
		return c.Stats().Waiters == readers && blind.Stats().Waiters == 1
	})
	// Each registered reader makes at most one attempt of its own (the
	// retry of a fresh subscription) before it sleeps; the probe's wake-up
	// makes it attempt after the probe, and from then on it attempts only
	// when woken. The blind reader's subscription is fresh: its second
	// attempt is its last before it sleeps.
	attempts.probed.Store(true)
	if err := rdb.HSet(ctx, name, "probe", 1).Err(); err != nil {
		t.Fatal(err)
	}
	backends.WaitFor(t, "every reader asleep", 10*time.Second, func() bool {
		return attempts.asleep("tracked:", readers, true) && attempts.asleep("blind:", 1, false)
	})
	down := time.Now()
	if err := foreignDowngrade.Run(ctx, rdb, []string{name, timeout}, "java:1").Err(); err != nil {
		t.Fatal(err)
	}
	var first, last time.Duration
	for i := range readers {
		e := <-in
		ok(t, "reader", e.err)
		d := e.at.Sub(down)
		if i == 0 {
			first = d
		}
		last = d
	}
	if blind.Stats().Waiters != 1 || attempts.after("blind:") != 2 {
		t.Errorf("the reader without a tracker is no longer asleep: something other than the tracker let the readers in")
	}
	t.Logf("%d readers in after a silent downgrade: the first %v after it, the last %v", readers, first, last)
}

// sleepProbe counts the read lock's acquire calls by owner field: all of
// them, those begun after probed was set, and those in flight.
type sleepProbe struct {
	backends.PassHook
	probed   atomic.Bool
	mu       sync.Mutex
	total    map[string]int
	since    map[string]int
	inflight int
}

// ProcessHook counts the read lock's acquire calls.
func (h *sleepProbe) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		field, probed, ok := h.begin(cmd)
		if !ok {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		h.end(field, probed, err)
		return err
	}
}

// ProcessPipelineHook counts the read lock's acquire calls of a pipeline
// (the client's default scripter sends concurrent calls together).
func (h *sleepProbe) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		type call struct {
			cmd    redis.Cmder
			field  string
			probed bool
		}
		var calls []call
		for _, cmd := range cmds {
			if field, probed, ok := h.begin(cmd); ok {
				calls = append(calls, call{cmd, field, probed})
			}
		}
		err := next(ctx, cmds)
		for _, c := range calls {
			h.end(c.field, c.probed, c.cmd.Err())
		}
		return err
	}
}

// begin reports whether cmd is a read lock's acquire call, its owner field
// and whether it began after the probe, and counts it in flight.
func (h *sleepProbe) begin(cmd redis.Cmder) (field string, probed, ok bool) {
	args := cmd.Args()
	if len(args) < 7 || fmt.Sprint(args[0]) != "evalsha" || args[1] != generated.RwlockReadAcquireSHA1 {
		return "", false, false
	}
	field, probed = fmt.Sprint(args[6]), h.probed.Load() // KEYS: 2, ARGV[2]
	h.mu.Lock()
	h.inflight++
	h.mu.Unlock()
	return field, probed, true
}

// end counts a call begun by begin as done with err.
func (h *sleepProbe) end(field string, probed bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight--
	if h.total == nil {
		h.total, h.since = map[string]int{}, map[string]int{}
	}
	if err == nil {
		h.total[field]++
		if probed {
			h.since[field]++
		}
	}
}

// asleep reports whether no call is in flight and the n owners whose
// field starts with prefix have each made a call after the probe (when
// probe) or two calls (the first attempt and a fresh subscription's).
func (h *sleepProbe) asleep(prefix string, n int, probe bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight > 0 {
		return false
	}
	got := 0
	for f, k := range h.total {
		if strings.HasPrefix(f, prefix) && ((probe && h.since[f] > 0) || (!probe && k >= 2)) {
			got++
		}
	}
	return got == n
}

// after returns how many calls the owners whose field starts with prefix
// made in all.
func (h *sleepProbe) after(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for f, k := range h.total {
		if strings.HasPrefix(f, prefix) {
			n += k
		}
	}
	return n
}
