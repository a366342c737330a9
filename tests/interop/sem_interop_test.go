package interop

// Interop of Redisson's semaphore, permit-expirable semaphore and
// count-down latch with lualock's scripts (lua/semaphore_*.lua,
// lua/expirable_semaphore_*.lua, lua/latch_*.lua) through their generated
// wrappers: Java and Go holders share one object, exclude each other (never
// more permits in use than set), wake each other on the messages each
// publishes, and read each other's state. The Go side drives the scripts
// directly (the Go objects come on the new engine), with a waiter that
// retries on every message of the object's channel. Top-level identifiers
// of this file start with "sem" or "TestRedissonSem".

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// semLatchMS is the request latches' lifetime in these tests.
const semLatchMS = 10_000

// semSuite is one Redisson version on one backend.
type semSuite struct {
	j  redissonJar
	b  backend
	ag *agent
	// publish is the Go scripts' publish argument: plain PUBLISH on a
	// single server; both kinds on a cluster, where Redisson 4.x listens
	// with SSUBSCRIBE and 3.16 with SUBSCRIBE.
	publish string
}

// TestRedissonSemaphores runs the semaphore, permit-expirable semaphore
// and count-down latch scenarios for each jar of LUALOCK_REDISSON_JARS on
// standalone Redis and the cluster.
func TestRedissonSemaphores(t *testing.T) {
	for _, j := range redissonJars(t) {
		for i, newBackend := range backends(t) {
			t.Run(j.String()+"/"+backendNames[i], func(t *testing.T) {
				s := &semSuite{j: j, b: newBackend(t), publish: "publish"}
				if s.b.cluster {
					s.publish = "both"
				}
				s.ag = startAgent(t, j, s.b.cluster, javaWatchdog, s.b.addrs)
				t.Run("semaphore/share", s.semShare)
				t.Run("semaphore/wakeJava", s.semWakeJava)
				t.Run("semaphore/wakeGo", s.semWakeGo)
				t.Run("semaphore/overSubscription", s.semOverSubscription)
				t.Run("expirable/share", s.expShare)
				t.Run("expirable/deadHolder", s.expDeadHolder)
				t.Run("latch/goOpensJava", s.latchGoOpensJava)
				t.Run("latch/javaOpensGo", s.latchJavaOpensGo)
				t.Run("objects/semaphore", s.objSemaphore)
				t.Run("objects/expirable", s.objExpirable)
				t.Run("objects/latch", s.objLatch)
				t.Run("objects/multiLock", s.objMultiLock)
			})
		}
	}
}

// semTag is the contract's tag(p, N) for names without braces.
func semTag(p, n string) string { return p + ":{" + n + "}" }

// semRequest returns a fresh request latch key of name n.
func semRequest(n string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return semTag("lualock_request", n) + ":" + hex.EncodeToString(b)
}

// semListen subscribes ch with both kinds of pub/sub on a cluster (Redisson
// 4.x publishes with SPUBLISH there, 3.16 with PUBLISH) and plain
// elsewhere, and returns the payloads.
func (s *semSuite) semListen(t *testing.T, ch string) <-chan string {
	t.Helper()
	ctx := context.Background()
	out := make(chan string, 64)
	var subs []*redis.PubSub
	subs = append(subs, s.b.rdb.Subscribe(ctx, ch))
	if cc, ok := s.b.rdb.(*redis.ClusterClient); ok {
		subs = append(subs, cc.SSubscribe(ctx, ch))
	}
	var wg sync.WaitGroup
	for _, ps := range subs {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("subscribe %s: %v", ch, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range ps.Channel() {
				select {
				case out <- m.Payload:
				default:
				}
			}
		}()
	}
	t.Cleanup(func() {
		for _, ps := range subs {
			_ = ps.Close()
		}
		wg.Wait()
	})
	return out
}

// semGo runs the plain semaphore's scripts on one name.
type semGo struct {
	s       *semSuite
	name    string
	channel string
}

func (s *semSuite) newSem(name string) semGo {
	return semGo{s: s, name: name, channel: semTag("redisson_sc", name)}
}

func (g semGo) trySet(t *testing.T, p int64) int64 {
	t.Helper()
	v, err := generated.SemaphoreTrySetPermits(context.Background(), g.s.b.rdb,
		generated.SemaphoreTrySetPermitsKeys{Sem: g.name, Channel: g.channel, Request: semRequest(g.name)},
		generated.SemaphoreTrySetPermitsArgs{Permits: p, LatchMS: semLatchMS, Publish: g.s.publish})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (g semGo) acquire(ctx context.Context, n int64) (bool, error) {
	v, err := generated.SemaphoreAcquire(ctx, g.s.b.rdb,
		generated.SemaphoreAcquireKeys{Sem: g.name, Request: semRequest(g.name), Claim: semTag("lualock_semaphore_claim", g.name)},
		generated.SemaphoreAcquireArgs{Permits: n, LatchMS: semLatchMS})
	return v == 1, err
}

// wait takes n permits, retrying on every message of the channel (msgs,
// subscribed before the first try) and, as a fallback far above the wake
// bound, every fallback.
func (g semGo) wait(ctx context.Context, n int64, msgs <-chan string, fallback time.Duration) error {
	for {
		ok, err := g.acquire(ctx, n)
		if err != nil || ok {
			return err
		}
		select {
		case <-msgs:
		case <-time.After(fallback):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g semGo) release(ctx context.Context, n int64) (int64, error) {
	return generated.SemaphoreRelease(ctx, g.s.b.rdb,
		generated.SemaphoreReleaseKeys{Sem: g.name, Channel: g.channel, Request: semRequest(g.name)},
		generated.SemaphoreReleaseArgs{Permits: n, LatchMS: semLatchMS, Publish: g.s.publish})
}

func (g semGo) available(t *testing.T) int64 {
	t.Helper()
	v, err := generated.SemaphoreAvailable(context.Background(), g.s.b.rdb,
		generated.SemaphoreAvailableKeys{Sem: g.name})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// javaInt runs an agent op and returns its integer value.
func (s *semSuite) javaInt(t *testing.T, owner, op string, args ...any) int64 {
	t.Helper()
	r := s.ag.do(t, owner, op, args...)
	v, err := strconv.ParseInt(r.val, 10, 64)
	if err != nil {
		t.Fatalf("redisson %s replied %q", op, r.val)
	}
	return v
}

// javaBool runs an agent op and returns its boolean value.
func (s *semSuite) javaBool(t *testing.T, owner, op string, args ...any) bool {
	t.Helper()
	return s.ag.do(t, owner, op, args...).val == "true"
}

// semShare: permits set by one side are taken and given back by both, and
// each reads the other's count.
func (s *semSuite) semShare(t *testing.T) {
	ctx := context.Background()
	g := s.newSem(uniqueName(t))
	if !s.javaBool(t, "j1", "sem.tryset", g.name, 3) {
		t.Fatal("Redisson trySetPermits(3) = false")
	}
	if g.trySet(t, 5) != 0 {
		t.Fatal("Go trySetPermits succeeded on Redisson's semaphore")
	}
	if ok, err := g.acquire(ctx, 2); err != nil || !ok {
		t.Fatalf("Go acquire 2 of 3: %v %v", ok, err)
	}
	if s.javaBool(t, "j1", "sem.tryacquire", g.name, 2, 0) {
		t.Fatal("Redisson took 2 permits with 1 left")
	}
	if !s.javaBool(t, "j1", "sem.tryacquire", g.name, 1, 0) {
		t.Fatal("Redisson could not take the last permit")
	}
	if v := s.javaInt(t, "j1", "sem.avail", g.name); v != 0 || g.available(t) != 0 {
		t.Fatalf("available: Redisson %d, Go %d; want 0", v, g.available(t))
	}
	if ok, _ := g.acquire(ctx, 1); ok {
		t.Fatal("Go took a permit of an empty semaphore")
	}
	s.ag.do(t, "j1", "sem.release", g.name, 1)
	if _, err := g.release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	s.ag.do(t, "j1", "sem.add", g.name, 2)
	if v := s.javaInt(t, "j1", "sem.avail", g.name); v != 5 || g.available(t) != 5 {
		t.Fatalf("available: Redisson %d, Go %d; want 5", v, g.available(t))
	}
	if v := s.javaInt(t, "j1", "sem.drain", g.name); v != 5 || g.available(t) != 0 {
		t.Fatalf("Redisson drained %d, Go sees %d left; want 5, 0", v, g.available(t))
	}
}

// semWakeJava: a Redisson thread blocked in acquire() is woken by a Go
// release, in less than wakeBound (Redisson's acquire() has no timer: a
// missed message would leave it blocked).
func (s *semSuite) semWakeJava(t *testing.T) {
	ctx := context.Background()
	g := s.newSem(uniqueName(t))
	g.trySet(t, 1)
	if ok, err := g.acquire(ctx, 1); err != nil || !ok {
		t.Fatalf("Go acquire: %v %v", ok, err)
	}
	var lat []time.Duration
	for i := range 3 {
		ch := s.ag.send("w", "sem.acquire", g.name, 1)
		subscribed(t, s.b.rdb, g.channel)
		time.Sleep(50 * time.Millisecond) // past Redisson's first try
		released := time.Now()
		if _, err := g.release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		r := s.ag.await(t, ch, fmt.Sprintf("acquire %d", i), 10*time.Second)
		d := r.t1.Sub(released)
		lat = append(lat, d)
		if d > wakeBound {
			t.Fatalf("Redisson woke %v after the Go release, want < %v", d, wakeBound)
		}
		// Hand the permit back to Go for the next round.
		s.ag.do(t, "w", "sem.release", g.name, 1)
		if ok, err := g.acquire(ctx, 1); err != nil || !ok {
			t.Fatalf("Go acquire: %v %v", ok, err)
		}
	}
	t.Logf("Go release -> Redisson acquire(): %v", lat)
}

// semWakeGo: a Go waiter for 2 permits is woken by Redisson's releases (one
// at a time), in less than wakeBound after the second.
func (s *semSuite) semWakeGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := s.newSem(uniqueName(t))
	s.javaBool(t, "j", "sem.tryset", g.name, 2)
	s.ag.do(t, "j", "sem.acquire", g.name, 2)
	msgs := s.semListen(t, g.channel)
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := g.wait(ctx, 2, msgs, 5*time.Second)
		got <- time.Now()
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.ag.do(t, "j", "sem.release", g.name, 1)
	time.Sleep(50 * time.Millisecond)
	r := s.ag.do(t, "j", "sem.release", g.name, 1)
	at := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	d := at.Sub(r.t0)
	if d > wakeBound {
		t.Fatalf("Go waiter woke %v after Redisson's release, want < %v", d, wakeBound)
	}
	t.Logf("Redisson release -> Go acquire of 2: %v", d)
	if g.available(t) != 0 {
		t.Fatalf("available %d after the Go waiter took 2, want 0", g.available(t))
	}
}

// semOverSubscription: two Redisson threads and two Go holders take 1 or
// 2 permits of 3, 60 times each, and count themselves in a shared Redis
// counter: it never goes above 3, and at the end 3 permits are available.
func (s *semSuite) semOverSubscription(t *testing.T) {
	const permits, perOwner = 3, 60
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := s.newSem(uniqueName(t))
	inside := semTag("inside", g.name)
	g.trySet(t, permits)
	var java []<-chan reply
	for _, owner := range []string{"o1", "o2"} {
		java = append(java, s.ag.send(owner, "sem.loop", g.name, perOwner, permits, inside, 200))
	}
	msgs := s.semListen(t, g.channel)
	var wg sync.WaitGroup
	overs := make([]int, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perOwner {
				n := int64(1 + (k+i)%2)
				// The waiters share one subscription: a message wakes one
				// of them, the other waits for the next or its 20 ms timer.
				if err := g.wait(ctx, n, msgs, 20*time.Millisecond); err != nil {
					errs[i] = err
					return
				}
				if v := s.b.rdb.IncrBy(ctx, inside, n).Val(); v > permits {
					overs[i]++
				}
				time.Sleep(200 * time.Microsecond)
				s.b.rdb.DecrBy(ctx, inside, n)
				if _, err := g.release(ctx, n); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	javaOver := 0
	for i, ch := range java {
		r := s.ag.await(t, ch, fmt.Sprintf("sem.loop %d", i), 3*time.Minute)
		n, _ := strconv.Atoi(r.val)
		javaOver += n
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if javaOver+overs[0]+overs[1] != 0 {
		t.Fatalf("over-subscribed: Redisson saw %d, Go %d", javaOver, overs[0]+overs[1])
	}
	if v := g.available(t); v != permits {
		t.Fatalf("available %d at the end, want %d", v, permits)
	}
	t.Logf("%d acquisitions (2 Redisson threads, 2 Go holders), never more than %d permits in use", 4*perOwner, permits)
	s.b.rdb.Del(ctx, inside)
}

// expGo runs the permit-expirable semaphore's scripts on one name.
type expGo struct {
	s                       *semSuite
	name, timeouts, channel string
}

func (s *semSuite) newExp(name string) expGo {
	return expGo{s: s, name: name, timeouts: "{" + name + "}:timeout", channel: semTag("redisson_sc", name)}
}

func (e expGo) acquire(t *testing.T, leaseMS int64, id []byte) int64 {
	t.Helper()
	v, err := generated.ExpirableSemaphoreAcquire(context.Background(), e.s.b.rdb,
		generated.ExpirableSemaphoreAcquireKeys{Sem: e.name, Timeouts: e.timeouts, Channel: e.channel, Claim: semTag("lualock_semaphore_claim", e.name)},
		generated.ExpirableSemaphoreAcquireArgs{LeaseMS: leaseMS, Publish: e.s.publish, IDs: [][]byte{id}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (e expGo) release(t *testing.T, id []byte) int64 {
	t.Helper()
	v, err := generated.ExpirableSemaphoreRelease(context.Background(), e.s.b.rdb,
		generated.ExpirableSemaphoreReleaseKeys{Sem: e.name, Timeouts: e.timeouts, Channel: e.channel, Request: semRequest(e.name)},
		generated.ExpirableSemaphoreReleaseArgs{LatchMS: semLatchMS, Publish: e.s.publish, IDs: [][]byte{id}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (e expGo) extend(t *testing.T, leaseMS int64, id []byte) int64 {
	t.Helper()
	v, err := generated.ExpirableSemaphoreExtend(context.Background(), e.s.b.rdb,
		generated.ExpirableSemaphoreExtendKeys{Sem: e.name, Timeouts: e.timeouts, Channel: e.channel},
		generated.ExpirableSemaphoreExtendArgs{LeaseMS: leaseMS, Publish: e.s.publish, IDs: [][]byte{id}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (e expGo) available(t *testing.T) (int64, int64) {
	t.Helper()
	v, err := generated.ExpirableSemaphoreAvailable(context.Background(), e.s.b.rdb,
		generated.ExpirableSemaphoreAvailableKeys{Sem: e.name, Timeouts: e.timeouts, Channel: e.channel},
		generated.ExpirableSemaphoreAvailableArgs{Publish: e.s.publish})
	if err != nil {
		t.Fatal(err)
	}
	return v[0], v[1]
}

// expShare: with Redisson 4.x, Go and Java permits of one semaphore are
// released and extended by the other side (ids: 16 raw bytes in Redis, 32
// hex characters in Redisson's API). With 3.16, whose zset holds the hex
// text, neither side finds the other's permit: the documented
// incompatibility; each still releases its own.
func (s *semSuite) expShare(t *testing.T) {
	ctx := context.Background()
	e := s.newExp(uniqueName(t))
	if !s.javaBool(t, "p", "psem.tryset", e.name, 3) {
		t.Fatal("Redisson trySetPermits(3) = false")
	}
	goID := make([]byte, 16)
	_, _ = rand.Read(goID)
	if v := e.acquire(t, 60_000, goID); v != 0 {
		t.Fatalf("Go acquire replied %d", v)
	}
	javaHex := s.ag.do(t, "p", "psem.acquire", e.name, 60_000).val
	if len(javaHex) != 32 {
		t.Fatalf("Redisson permit id %q, want 32 hex characters", javaHex)
	}
	javaID, err := hex.DecodeString(javaHex)
	if err != nil {
		t.Fatal(err)
	}
	if v := s.javaInt(t, "p", "psem.avail", e.name); v != 1 {
		t.Fatalf("Redisson sees %d available, want 1", v)
	}
	if s.j.atLeast(3, 17) {
		// 4.x: the member is the raw id.
		if _, err := s.b.rdb.ZScore(ctx, e.timeouts, string(javaID)).Result(); err != nil {
			t.Fatalf("Redisson's permit is not stored as its 16 raw bytes: %v", err)
		}
		old := s.b.rdb.ZScore(ctx, e.timeouts, string(goID)).Val()
		if !s.javaBool(t, "p", "psem.extend", e.name, hex.EncodeToString(goID), 120_000) {
			t.Fatal("Redisson could not extend the Go permit")
		}
		if now := s.b.rdb.ZScore(ctx, e.timeouts, string(goID)).Val(); now < old+50_000 {
			t.Fatalf("Go permit's deadline %v after Redisson's extend, want about %v + 60000", now, old)
		}
		if v := e.extend(t, 120_000, javaID); v != 1 {
			t.Fatal("Go could not extend Redisson's permit")
		}
		if v := e.release(t, javaID); v != 1 {
			t.Fatalf("Go released Redisson's permit: %d, want 1", v)
		}
		if !s.javaBool(t, "p", "psem.release", e.name, hex.EncodeToString(goID)) {
			t.Fatal("Redisson could not release the Go permit")
		}
		if av, held := e.available(t); av != 3 || held != 0 {
			t.Fatalf("available, held = %d, %d; want 3, 0", av, held)
		}
		return
	}
	// 3.16: the member is the hex text; the encodings do not meet.
	if _, err := s.b.rdb.ZScore(ctx, e.timeouts, javaHex).Result(); err != nil {
		t.Fatalf("Redisson 3.16's permit is not stored as hex text: %v", err)
	}
	if v := e.release(t, javaID); v != 0 {
		t.Fatalf("Go released a 3.16 permit (%d): the encodings were expected to differ", v)
	}
	if s.javaBool(t, "p", "psem.release", e.name, hex.EncodeToString(goID)) {
		t.Fatal("Redisson 3.16 released a Go permit: the encodings were expected to differ")
	}
	if av, held := e.available(t); av != 1 || held != 2 {
		t.Fatalf("available, held = %d, %d after the refused releases; want 1, 2", av, held)
	}
	if v := e.release(t, goID); v != 1 {
		t.Fatal("Go could not release its own permit")
	}
	if !s.javaBool(t, "p", "psem.release", e.name, javaHex) {
		t.Fatal("Redisson 3.16 could not release its own permit")
	}
	if v := s.javaInt(t, "p", "psem.avail", e.name); v != 3 {
		t.Fatalf("Redisson sees %d available at the end, want 3", v)
	}
	t.Log("3.16 stores permit ids as hex text, lualock as 4.x's raw bytes: neither releases the other's permit (documented)")
}

// expDeadHolder: a Go holder that dies (stops renewing) with the only
// permit: a Redisson thread waiting in tryAcquire gets it back at the
// deadline (Redisson's waiter times its retry to the nearest deadline),
// and the other way round a Go waiter gets a dead Redisson holder's permit.
func (s *semSuite) expDeadHolder(t *testing.T) {
	const lease = 500
	e := s.newExp(uniqueName(t))
	s.javaBool(t, "p", "psem.tryset", e.name, 1)
	dead := make([]byte, 16)
	_, _ = rand.Read(dead)
	start := time.Now()
	if v := e.acquire(t, lease, dead); v != 0 {
		t.Fatalf("Go acquire replied %d", v)
	}
	r := s.ag.do(t, "p", "psem.tryacquire", e.name, 10_000, 60_000)
	if r.val == "null" {
		t.Fatal("Redisson did not get the dead Go holder's permit within 10s")
	}
	d := r.t1.Sub(start)
	if d < lease*time.Millisecond || d > lease*time.Millisecond+wakeBound {
		t.Fatalf("Redisson got the permit %v after the Go acquire, want within [%dms, %dms + %v]", d, lease, lease, wakeBound)
	}
	t.Logf("dead Go holder (lease %dms) -> Redisson holds its permit after %v", lease, d)
	javaID, _ := hex.DecodeString(r.val)
	if s.j.atLeast(3, 17) && e.release(t, javaID) != 1 {
		t.Fatal("Go could not release Redisson's permit")
	}
	if !s.j.atLeast(3, 17) && !s.javaBool(t, "p", "psem.release", e.name, r.val) {
		t.Fatal("Redisson could not release its permit")
	}

	// The other way: a Redisson holder dies with a short lease.
	javaDead := s.ag.do(t, "p", "psem.acquire", e.name, lease)
	start = javaDead.t1
	goID := make([]byte, 16)
	_, _ = rand.Read(goID)
	msgs := s.semListen(t, e.channel)
	for {
		wait := e.acquire(t, 60_000, goID)
		if wait == 0 {
			break
		}
		if wait < 0 || time.Since(start) > 10*time.Second {
			t.Fatalf("Go waiter: acquire replied %d, %v after Redisson's acquire", wait, time.Since(start))
		}
		select {
		case <-msgs:
		case <-time.After(time.Duration(wait) * time.Millisecond):
		}
	}
	d = time.Since(start)
	if d < lease*time.Millisecond-50*time.Millisecond || d > lease*time.Millisecond+wakeBound {
		t.Fatalf("Go got the permit %v after Redisson's acquire, want about %dms", d, lease)
	}
	t.Logf("dead Redisson holder (lease %dms) -> Go holds its permit after %v", lease, d)
	e.release(t, goID)
}

// latchGo runs the count-down latch's scripts on one name.
type latchGo struct {
	s             *semSuite
	name, channel string
}

func (s *semSuite) newLatch(name string) latchGo {
	return latchGo{s: s, name: name, channel: "redisson_countdownlatch__channel__{" + name + "}"}
}

func (l latchGo) countDown(t *testing.T) int64 {
	t.Helper()
	v, err := generated.LatchCountDown(context.Background(), l.s.b.rdb,
		generated.LatchCountDownKeys{Latch: l.name, Channel: l.channel, Request: semRequest(l.name)},
		generated.LatchCountDownArgs{LatchMS: semLatchMS, Publish: l.s.publish})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (l latchGo) count(t *testing.T) int64 {
	t.Helper()
	v, err := generated.LatchCount(context.Background(), l.s.b.rdb, generated.LatchCountKeys{Latch: l.name})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// latchGoOpensJava: Redisson sets a count of 2, Go counts down twice; a
// Redisson thread in await() is released by the second, within wakeBound.
func (s *semSuite) latchGoOpensJava(t *testing.T) {
	l := s.newLatch(uniqueName(t))
	if !s.javaBool(t, "l", "latch.tryset", l.name, 2) {
		t.Fatal("Redisson trySetCount = false")
	}
	if v := l.countDown(t); v != 1 {
		t.Fatalf("Go countDown = %d, want 1", v)
	}
	if v := s.javaInt(t, "l", "latch.count", l.name); v != 1 {
		t.Fatalf("Redisson getCount = %d, want 1", v)
	}
	ch := s.ag.send("w", "latch.await", l.name, 20_000)
	subscribed(t, s.b.rdb, l.channel)
	time.Sleep(50 * time.Millisecond)
	opened := time.Now()
	if v := l.countDown(t); v != 0 {
		t.Fatalf("Go countDown = %d, want 0", v)
	}
	r := s.ag.await(t, ch, "await", 30*time.Second)
	if r.val != "true" {
		t.Fatal("Redisson await timed out")
	}
	if d := r.t1.Sub(opened); d > wakeBound {
		t.Fatalf("Redisson await returned %v after Go opened the latch, want < %v", d, wakeBound)
	} else {
		t.Logf("Go countDown -> Redisson await(): %v", d)
	}
}

// latchJavaOpensGo: a Go waiter on a latch set by Go is released by
// Redisson's countDown ("0" on the channel), within wakeBound.
func (s *semSuite) latchJavaOpensGo(t *testing.T) {
	l := s.newLatch(uniqueName(t))
	v, err := generated.LatchTrySetCount(context.Background(), s.b.rdb,
		generated.LatchTrySetCountKeys{Latch: l.name, Channel: l.channel, Request: semRequest(l.name)},
		generated.LatchTrySetCountArgs{Count: 1, LatchMS: semLatchMS, Publish: s.publish})
	if err != nil || v != 1 {
		t.Fatalf("Go trySetCount: %d %v", v, err)
	}
	if c := s.javaInt(t, "l", "latch.count", l.name); c != 1 {
		t.Fatalf("Redisson getCount = %d, want 1", c)
	}
	msgs := s.semListen(t, l.channel)
	r := s.ag.do(t, "l", "latch.countdown", l.name)
	select {
	case m := <-msgs:
		d := time.Since(r.t0)
		if strings.TrimSpace(m) != "0" {
			t.Fatalf("Redisson's countDown published %q, want 0", m)
		}
		if d > wakeBound {
			t.Fatalf("Go waiter woke %v after Redisson's countDown, want < %v", d, wakeBound)
		}
		t.Logf("Redisson countDown -> Go waiter: %v", d)
	case <-time.After(5 * time.Second):
		t.Fatal("no message from Redisson's countDown")
	}
	if c := l.count(t); c != 0 {
		t.Fatalf("Go count after Redisson's countDown = %d, want 0", c)
	}
}

// goClient returns a lualock client for the suite: the default pub/sub
// kind, or on a cluster shared with Redisson 3.16 (which publishes and
// listens with PUBLISH/SUBSCRIBE) both kinds.
func (s *semSuite) goClient(t *testing.T) *lualock.Client {
	t.Helper()
	return newClient(t, s.b.rdb, s.goOptions())
}

func (s *semSuite) goOptions() lualock.Options {
	var o lualock.Options
	if s.b.cluster && !s.j.atLeast(3, 22) {
		o.PubSub = lualock.PubSubBoth
	}
	return o
}

// objSemaphore: lualock's Semaphore and Redisson's RSemaphore on one name:
// a Go Acquire waiting for 2 permits is woken by Redisson's releases, and a
// Redisson acquire() blocked behind Go is woken by Go's Release, each
// within wakeBound.
func (s *semSuite) objSemaphore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sem := s.goClient(t).NewSemaphore(uniqueName(t))
	if !s.javaBool(t, "j", "sem.tryset", sem.Name(), 2) {
		t.Fatal("Redisson trySetPermits = false")
	}
	s.ag.do(t, "j", "sem.acquire", sem.Name(), 2)
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := sem.Acquire(ctx, 2)
		got <- time.Now()
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	s.ag.do(t, "j", "sem.release", sem.Name(), 1)
	r := s.ag.do(t, "j", "sem.release", sem.Name(), 1)
	at := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d := at.Sub(r.t0); d > wakeBound {
		t.Fatalf("Go Acquire woke %v after Redisson's release, want < %v", d, wakeBound)
	} else {
		t.Logf("Redisson release -> Go Semaphore.Acquire(2): %v", d)
	}
	ch := s.ag.send("w", "sem.acquire", sem.Name(), 1)
	subscribed(t, s.b.rdb, semTag("redisson_sc", sem.Name()))
	time.Sleep(50 * time.Millisecond)
	released := time.Now()
	if err := sem.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	jr := s.ag.await(t, ch, "acquire", 10*time.Second)
	if d := jr.t1.Sub(released); d > wakeBound {
		t.Fatalf("Redisson woke %v after Go's Release, want < %v", d, wakeBound)
	} else {
		t.Logf("Go Semaphore.Release -> Redisson acquire(): %v", d)
	}
	if n, err := sem.AvailablePermits(ctx); err != nil || n != 1 {
		t.Fatalf("AvailablePermits = %d, %v; want 1", n, err)
	}
}

// objExpirable: lualock's PermitExpirableSemaphore beside Redisson's: a Go
// permit under the watchdog (lease 1.5 s) outlives three leases while a
// Redisson tryAcquire waits; Go's Release wakes it; with 4.x, Go releases
// Redisson's permit by its id.
func (s *semSuite) objExpirable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := s.goOptions()
	o.WatchdogLease = goWatchdog
	sem := newClient(t, s.b.rdb, o).NewPermitExpirableSemaphore(uniqueName(t))
	if ok, err := sem.TrySetPermits(ctx, 1); err != nil || !ok {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	p, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := s.ag.send("p", "psem.tryacquire", sem.Name(), 10_000, 60_000)
	time.Sleep(3 * goWatchdog)
	if p.Context().Err() != nil {
		t.Fatalf("Go permit ended: %v", context.Cause(p.Context()))
	}
	select {
	case r := <-ch:
		t.Fatalf("Redisson got a permit while the Go permit was renewed: %+v", r)
	default:
	}
	released := time.Now()
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := s.ag.await(t, ch, "tryAcquire", 15*time.Second)
	if r.val == "null" {
		t.Fatal("Redisson's tryAcquire got nothing")
	}
	if d := r.t1.Sub(released); d > wakeBound {
		t.Fatalf("Redisson got the permit %v after Go's Release, want < %v", d, wakeBound)
	} else {
		t.Logf("Go Permit.Release -> Redisson tryAcquire: %v", d)
	}
	if s.j.atLeast(3, 17) {
		if err := sem.ReleaseID(ctx, r.val); err != nil {
			t.Fatalf("Go ReleaseID of Redisson's permit: %v", err)
		}
	} else if err := sem.ReleaseID(ctx, r.val); !errors.Is(err, lualock.ErrNotHeld) {
		t.Fatalf("Go ReleaseID of a 3.16 permit: %v, want ErrNotHeld (hex-text ids)", err)
	}
}

// objLatch: lualock's CountDownLatch beside Redisson's: Go's Await is
// released by Redisson's countDown within wakeBound.
func (s *semSuite) objLatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := s.goClient(t).NewCountDownLatch(uniqueName(t))
	if !s.javaBool(t, "l", "latch.tryset", l.Name(), 1) {
		t.Fatal("Redisson trySetCount = false")
	}
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := l.Await(ctx)
		got <- time.Now()
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	r := s.ag.do(t, "l", "latch.countdown", l.Name())
	at := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d := at.Sub(r.t0); d > wakeBound {
		t.Fatalf("Go Await returned %v after Redisson's countDown, want < %v", d, wakeBound)
	} else {
		t.Logf("Redisson countDown -> Go Await: %v", d)
	}
}

// objMultiLock: a Redisson multi-lock and a lualock MultiLock over the same
// two names (given in opposite orders) exclude each other: a Go TryLock
// waiting while Redisson holds takes both within wakeBound of Redisson's
// unlock, and Redisson's tryLock fails while Go holds and succeeds after
// Go's Unlock.
func (s *semSuite) objMultiLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.goClient(t)
	base := uniqueName(t)
	a, b := base+"a", base+"b"
	javaNames := b + "," + a
	// A wait of 1 s: 3.16's multi-lock treats only -1 as "one try" and
	// fails a wait of 0 outright.
	if !s.javaBool(t, "m", "mlock.trylock", javaNames, 1000) {
		t.Fatal("Redisson's multi-lock tryLock on free locks = false")
	}
	m := c.NewMultiLock(c.NewLock(a), c.NewLock(b))
	if err := m.TryLock(ctx, 100*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("Go TryLock while Redisson holds: %v, want ErrNotObtained", err)
	}
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := m.TryLock(ctx, 10*time.Second)
		got <- time.Now()
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	r := s.ag.do(t, "m", "mlock.unlock", javaNames)
	at := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d := at.Sub(r.t0); d > wakeBound {
		t.Fatalf("Go MultiLock took both %v after Redisson's unlock, want < %v", d, wakeBound)
	} else {
		t.Logf("Redisson multi-lock unlock -> Go MultiLock: %v", d)
	}
	if s.javaBool(t, "m2", "mlock.trylock", javaNames, 0) {
		t.Fatal("Redisson's multi-lock got the locks Go holds")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.javaBool(t, "m2", "mlock.trylock", javaNames, 1000) {
		t.Fatal("Redisson's multi-lock could not take the locks after Go's Unlock")
	}
	s.ag.do(t, "m2", "mlock.unlock", javaNames)
}
