package interop

// Redisson and lualock on one Sentinel deployment (a primary, a replica,
// three Sentinels: harness.StartSentinel). Redisson is configured through
// the Sentinels, so it knows the replica and sends a WAIT of its own after
// each lock script (Config.checkLockSyncedSlaves, its default); lualock
// runs on a go-redis failover client with its default replica
// acknowledgement (one replica). Both wait on the same names: the tests
// count the primary's WAIT commands (INFO commandstats) around each
// side's acquisitions, check that the two kinds of holder still exclude
// each other, and, last, that both sides' holds survive a failover with a
// lagging replication link and are handed over on the new primary.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// TestRedissonSentinel runs, for each jar of LUALOCK_REDISSON_JARS, the
// acknowledgement count, every scenario of TestRedisson (the lualock
// command's through the Sentinels) and the read-write lock's exclusion on
// one Sentinel deployment, then the failover scenario with Redisson 4.x.
func TestRedissonSentinel(t *testing.T) {
	jars := redissonJars(t)
	d := harness.StartSentinel(t, harness.SentinelOptions{})
	ctx := context.Background()
	rdb := d.Client(func(o *redis.FailoverOptions) { o.ContextTimeoutEnabled = true })
	t.Cleanup(func() { _ = rdb.Close() })
	primary, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The primary's own address, not its proxy's: the statistics reader
	// is no client of the deployment.
	stats := redis.NewClient(&redis.Options{Addr: primary.Server.Addr(), MaintNotificationsConfig: harness.NoMaintNotifications()})
	t.Cleanup(func() { _ = stats.Close() })
	w := &waitStats{t: t, rdb: stats}
	cli := []string{"-sentinel", strings.Join(d.SentinelAddrs(), ","), "-master", d.Master()}
	for _, j := range jars {
		t.Run(j.String(), func(t *testing.T) {
			s := &suite{j: j, b: backend{name: "sentinel", rdb: rdb, cli: cli}, waits: w}
			start := time.Now()
			s.ag = startSentinelAgent(t, j, javaWatchdog, d.Master(), d.SentinelAddrs())
			t.Logf("agent ready in %v", time.Since(start))
			kinds := []string{"r", "f", "rr", "rw", "s"}
			if j.atLeast(3, 19) {
				kinds = append(kinds, "fe")
			}
			for _, k := range kinds {
				t.Run("acks/"+k, func(t *testing.T) { s.acks(t, k) })
			}
			t.Run("acks/semaphore", s.semaphoreAcks)
			s.scenarios(t)
			t.Run("exclusion/rwlock", s.rwExclusionAPI)
		})
	}
	// Last: the primary changes. Only with a Redisson that waits for the
	// replica: 3.16's holds may be lost by design.
	for _, j := range jars {
		if javaWaits(j) {
			t.Run(j.String()+"/failover", func(t *testing.T) {
				s := &suite{j: j, b: backend{name: "sentinel", rdb: rdb, cli: cli}}
				s.ag = startSentinelAgent(t, j, failoverLease, d.Master(), d.SentinelAddrs())
				s.failover(t, d)
			})
		}
	}
}

// failoverLease is both sides' watchdog lease in suite.failover: a hold
// outlives a failover only if what is left of its lease at the crash
// outlasts the promotion (a few seconds here, more under load).
const failoverLease = 10 * time.Second

// failover: with the replication link 30ms behind, Redisson holds one
// name and lualock another, each with the other side waiting on it, and
// the primary crashes (what the link still carried is lost) right after
// both acquisitions returned. Both waited for the replica, so the
// promoted primary has both holds; nobody takes the other's lock, the
// lualock holder is not told of a loss, both watchdogs renew on the new
// primary, and each release hands the lock to the other side's waiter.
func (s *suite) failover(t *testing.T, d *harness.Sentinel) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t, s.b.rdb, lualock.Options{WatchdogLease: failoverLease})
	javaName, goName := uniqueName(t)+"-java", uniqueName(t)+"-go"
	d.SetLinkDelay(30 * time.Millisecond)
	defer d.SetLinkDelay(0)
	r := s.ag.do(t, "fj", "lock", javaName, "r", -1)
	held := c.NewLock(goName)
	start := time.Now()
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("acquisitions with the link 30ms behind: Redisson %v, lualock %v", r.t1.Sub(r.t0), time.Since(start).Round(time.Microsecond))
	waiter := c.NewLock(javaName)
	goGot := make(chan error, 1)
	var gotAt time.Time // written before the send on goGot
	go func() {
		err := waiter.Lock(ctx)
		gotAt = time.Now()
		goGot <- err
	}()
	javaGot := s.ag.send("fw", "lock", goName, "r", -1)
	subscribed(t, s.b.rdb, channel(javaName))
	subscribed(t, s.b.rdb, channel(goName))

	before := time.Now()
	old, promoted, err := d.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover %s -> %s, stable again after %v", old.Addr(), promoted.Addr(), time.Since(before).Round(time.Millisecond))
	direct := redis.NewClient(&redis.Options{Addr: promoted.Server.Addr(), MaintNotificationsConfig: harness.NoMaintNotifications()})
	defer direct.Close()
	check := func(when string) {
		t.Helper()
		for _, name := range []string{javaName, goName} {
			if n := direct.Exists(ctx, name).Val(); n != 1 {
				t.Fatalf("%s: %s is not on the promoted primary", when, name)
			}
		}
		select {
		case <-held.Done():
			t.Fatalf("%s: the lualock holder was told of a loss: %v", when, context.Cause(held.Context()))
		case err := <-goGot:
			t.Fatalf("%s: lualock's waiter got Redisson's lock (%v)", when, err)
		case r := <-javaGot:
			if r.ok || !strings.Contains(r.err, "READONLY") {
				t.Fatalf("%s: Redisson's waiter got lualock's lock (%+v)", when, r)
			}
			// Redisson's waiter asked the old primary, now a replica,
			// before its client followed the failover: the call failed
			// and took nothing. It waits again.
			t.Logf("%s: Redisson's waiter failed on the old primary (%s); it waits again", when, r.err)
			javaGot = s.ag.send("fw", "lock", goName, "r", -1)
		default:
		}
	}
	check("after the failover")
	// Both watchdogs renew on the new primary: each lease grows back.
	for _, name := range []string{javaName, goName} {
		left := direct.PTTL(ctx, name).Val()
		waitUntil(t, failoverLease, "a renewal of "+name+" on the new primary", func() bool { return direct.PTTL(ctx, name).Val() > left })
	}
	check("after a renewal of each")

	r = s.ag.do(t, "fj", "unlock", javaName, "r")
	select {
	case err := <-goGot:
		if err != nil {
			t.Fatalf("lualock's waiter after Redisson's release: %v", err)
		}
		t.Logf("lualock's waiter got the lock %v after Redisson's release call began", gotAt.Sub(r.t0).Round(time.Millisecond))
	case <-time.After(failoverLease + 5*time.Second): // a waiter that missed the release wakes at its timer
		t.Fatalf("lualock's waiter did not get the lock within %v of Redisson's release", failoverLease+5*time.Second)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	r = s.ag.await(t, javaGot, "lock after lualock's release", failoverLease+5*time.Second)
	t.Logf("Redisson's waiter got the lock %v after lualock's release", r.t1.Sub(released).Round(time.Millisecond))
	s.ag.do(t, "fw", "unlock", goName, "r")
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitStats reads the primary's count of WAIT commands.
type waitStats struct {
	t   *testing.T
	rdb *redis.Client
}

// waitCount is cmdstat_wait of INFO commandstats.
type waitCount struct{ calls, failed, rejected int64 }

func (w *waitStats) read() waitCount {
	w.t.Helper()
	info, err := w.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		w.t.Fatal(err)
	}
	var c waitCount
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_wait:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				c.calls = n
			case "failed_calls":
				c.failed = n
			case "rejected_calls":
				c.rejected = n
			}
		}
	}
	return c
}

// acquisitionWaits is the fewest WAIT commands that goHolds acquisitions
// by lualock and javaHolds by Redisson send.
func (s *suite) acquisitionWaits(goHolds, javaHolds int64) int64 {
	if javaWaits(s.j) {
		return goHolds + javaHolds
	}
	return goHolds
}

// atLeast checks that at least want WAIT commands ran since before, none
// of them failed or rejected, and returns how many ran.
func (w *waitStats) atLeast(t *testing.T, before waitCount, want int64, what string) int64 {
	t.Helper()
	now := w.read()
	n := now.calls - before.calls
	if n < want || now.failed != before.failed || now.rejected != before.rejected {
		t.Errorf("%s: %d WAIT commands on the primary (%d failed, %d rejected), want at least %d and none failed", what,
			n, now.failed-before.failed, now.rejected-before.rejected, want)
	}
	t.Logf("%s: %d WAIT commands on the primary for at least %d acquisitions", what, n, want)
	return n
}

// count returns how many WAIT commands the primary ran during op, and
// fails the test when one of them failed.
func (w *waitStats) count(op func()) int64 {
	w.t.Helper()
	before := w.read()
	op()
	now := w.read()
	if now.failed != before.failed || now.rejected != before.rejected {
		w.t.Errorf("%d WAIT commands failed, %d rejected", now.failed-before.failed, now.rejected-before.rejected)
	}
	return now.calls - before.calls
}

// javaWaits reports whether Redisson j sends a WAIT of its own after each
// lock script on a deployment with replicas: 4.7.0 does
// (Config.checkLockSyncedSlaves, on by default), 3.16.8 has no such
// setting and sends none (both measured by this suite).
func javaWaits(j redissonJar) bool { return j.atLeast(4, 0) }

// acks: each lualock acquisition of lock kind k (Redisson's agent kinds:
// r, f, rr, rw, s, fe), re-entries included, is followed by exactly one WAIT on
// the primary and each release by none; each Redisson acquisition by at
// least one (Redisson 4.x; none from 3.16). The two sides take turns on
// one name, so that each one's WAIT follows writes of its own on a
// primary the other writes to as well.
func (s *suite) acks(t *testing.T, k string) {
	w := s.waits
	ctx := context.Background()
	c := newClient(t, s.b.rdb, lualock.Options{})
	name := uniqueName(t)
	var l *lualock.Lock
	switch k {
	case "r":
		l = c.NewLock(name)
	case "f":
		l = c.NewFairLock(name)
	case "rr":
		l = c.NewReadWriteLock(name).ReadLock()
	case "rw":
		l = c.NewReadWriteLock(name).WriteLock()
	case "s":
		l = c.NewSpinLock(name)
	case "fe":
		l = c.NewFencedLock(name).Handle()
	}
	var javaLock, javaUnlock []int64
	for round := range 3 {
		for range 2 { // the lock, then a re-entry
			n := w.count(func() { s.ag.do(t, "ack", "lock", name, k, 30000) })
			if javaWaits(s.j) && n < 1 || !javaWaits(s.j) && n != 0 {
				t.Errorf("round %d: Redisson's acquisition: %d WAIT commands on the primary, want %s", round, n, map[bool]string{true: "at least 1", false: "none"}[javaWaits(s.j)])
			}
			javaLock = append(javaLock, n)
		}
		if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) && k != "rr" {
			t.Fatalf("round %d: lualock's TryLock while Redisson holds = %v, want ErrNotObtained", round, err)
		} else if k == "rr" {
			if err != nil {
				t.Fatalf("round %d: lualock's read TryLock beside Redisson's read hold: %v", round, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			javaUnlock = append(javaUnlock, w.count(func() { s.ag.do(t, "ack", "unlock", name, k) }))
		}
		for i := range 2 {
			if n := w.count(func() {
				if err := l.LockLease(ctx, 30*time.Second); err != nil {
					t.Fatal(err)
				}
			}); n != 1 {
				t.Errorf("round %d: lualock's acquisition %d: %d WAIT commands on the primary, want 1", round, i, n)
			}
		}
		if r := s.ag.do(t, "ack2", "trylock", name, k, 0, 30000); r.val != "false" && k != "rr" {
			t.Fatalf("round %d: Redisson's tryLock while lualock holds = %s, want false", round, r.val)
		} else if k == "rr" {
			s.ag.do(t, "ack2", "unlock", name, k)
		}
		for i := range 2 {
			if n := w.count(func() {
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("round %d: lualock's release %d: %d WAIT commands on the primary, want none", round, i, n)
			}
		}
	}
	if n := s.b.rdb.Exists(ctx, name).Val(); n != 0 {
		t.Errorf("%s left after every unlock", name)
	}
	t.Logf("WAIT commands after each of Redisson's acquisitions %v, releases %v; after each of lualock's: 1, releases: none", javaLock, javaUnlock)
}

// semaphoreAcks: each permit lualock takes from a semaphore Redisson set
// up is followed by exactly one WAIT on the primary and each release by
// none; a Redisson acquisition of the last permit then waits until
// lualock gives one back. Redisson's own WAIT commands around its
// semaphore calls are logged, not judged.
func (s *suite) semaphoreAcks(t *testing.T) {
	ctx := context.Background()
	w := s.waits
	c := newClient(t, s.b.rdb, lualock.Options{})
	name := uniqueName(t)
	if r := s.ag.do(t, "sa", "sem.tryset", name, 2); r.val != "true" {
		t.Fatalf("Redisson trySetPermits = %s", r.val)
	}
	sem := c.NewSemaphore(name)
	javaAcq := w.count(func() { s.ag.do(t, "sa", "sem.acquire", name, 1) })
	for i := range 2 {
		if i == 1 {
			if err := sem.TryAcquire(ctx, 1, 0); !errors.Is(err, lualock.ErrNotObtained) {
				t.Fatalf("lualock's TryAcquire with no permit left = %v, want ErrNotObtained", err)
			}
			s.ag.do(t, "sa", "sem.release", name, 1)
		}
		if n := w.count(func() {
			if err := sem.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}); n != 1 {
			t.Errorf("lualock's acquisition %d: %d WAIT commands on the primary, want 1", i, n)
		}
	}
	if r := s.ag.do(t, "sa", "sem.tryacquire", name, 1, 0); r.val != "false" {
		t.Fatalf("Redisson tryAcquire with lualock holding both permits = %s, want false", r.val)
	}
	if n := w.count(func() {
		if err := sem.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("lualock's release: %d WAIT commands on the primary, want none", n)
	}
	javaAcq2 := w.count(func() { s.ag.do(t, "sa", "sem.acquire", name, 2) })
	s.ag.do(t, "sa", "sem.release", name, 2)
	t.Logf("WAIT commands after Redisson's semaphore acquisitions: %d, %d", javaAcq, javaAcq2)
}

// exclusionHolds is the holds of each owner in suite.exclusion.
const exclusionHolds = 40

// rwExclusionAPI: Redisson's reader and writer threads and lualock's read
// and write locks (the library's API, which waits for the replica) take
// one read-write lock many times at once (rwLoops); every acquisition is
// followed by a WAIT.
func (s *suite) rwExclusionAPI(t *testing.T) {
	w := s.waits
	const perOwner = 25
	// A short watchdog lease: Redisson 3.16's reader and writer threads
	// of one process share a wake-up per release, and the one left
	// waiting sleeps until the Go hold's lease (PTTL) runs out.
	c := newClient(t, s.b.rdb, lualock.Options{WatchdogLease: goWatchdog})
	before := w.read()
	name := uniqueName(t)
	rwLoops(t, s.ag, s.b.rdb, name, perOwner, func(ctx context.Context, writer bool) (lock, unlock func() error) {
		l := c.NewReadWriteLock(name).ReadLock()
		if writer {
			l = c.NewReadWriteLock(name).WriteLock()
		}
		return func() error { return l.Lock(ctx) }, func() error { return l.Unlock(ctx) }
	})
	w.atLeast(t, before, s.acquisitionWaits(3*perOwner, 3*perOwner), "the read-write loops' acquisitions")
}
