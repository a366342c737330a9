package interop

// Redisson's read-write, fenced and spin locks beside the real Redisson client: the
// read-write lock, the fenced lock (Redisson 3.19 and later) and the spin
// lock. The Go side drives lualock's scripts (lua/rwlock_*.lua,
// lua/fenced_acquire.lua, the reentrant scripts for the spin lock) through
// their generated wrappers, with a small waiting loop of this file's own:
// the runtime's API for these objects is not built yet. Each scenario
// checks that Java and Go holders of one name exclude each other, read each
// other's holds, and wake each other in milliseconds.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// famLease is the lease of the Go holds, and of the Java holds that take
// one: long, so that a waiter that missed a message would be seconds late.
const famLease int64 = 30_000

// famSuite is one Redisson version on one backend.
type famSuite struct {
	j       redissonJar
	b       backend
	ag      *agent
	publish string // the Go releases' publish argument
	client  string // the Go side's client id (C of C:H)
	holders atomic.Int64
	reqs    atomic.Int64
}

// TestRedissonFamily runs the family's scenarios for each jar of
// LUALOCK_REDISSON_JARS on standalone Redis and the cluster.
func TestRedissonFamily(t *testing.T) {
	for _, j := range redissonJars(t) {
		for i, newBackend := range backends(t) {
			t.Run(j.String()+"/"+backendNames[i], func(t *testing.T) {
				s := &famSuite{j: j, b: newBackend(t), publish: "publish", client: fmt.Sprintf("go%016x", rand.Uint64())}
				if s.b.cluster {
					s.publish = "both" // 3.16 listens with SUBSCRIBE, 4.x with SSUBSCRIBE
				}
				s.ag = startAgent(t, j, s.b.cluster, javaWatchdog, s.b.addrs)
				t.Run("rwlock/exclusion", s.rwExclusion)
				t.Run("rwlock/holds", s.rwHolds)
				t.Run("rwlock/wakeup", s.rwWakeup)
				t.Run("rwlock/timeouts", s.rwTimeouts)
				t.Run("spin/exclusion", s.spinExclusion)
				t.Run("spin/handover", s.spinHandover)
				t.Run("api/rwlock", s.apiRWLock)
				t.Run("api/readersOfOneClient", s.apiReadersOfOneClient)
				t.Run("api/javaDowngrade", s.apiJavaDowngrade)
				t.Run("api/spin", s.apiSpin)
				if j.atLeast(3, 19) {
					t.Run("api/fenced", s.apiFenced)
					t.Run("fenced/tokens", s.fencedTokens)
					t.Run("fenced/wakeup", s.fencedWakeup)
				} else {
					t.Run("fenced/absent", s.fencedAbsent)
				}
			})
		}
	}
}

// ---- the Go side: one holder per owner field, over the scripts -------------

// famNames are the keys and channels of a lock name.
type famNames struct{ name, prefix, rwlock, channel, token string }

func newFamNames(name string) famNames {
	return famNames{
		name:    name,
		prefix:  "{" + name + "}",
		rwlock:  "redisson_rwlock:{" + name + "}",
		channel: "redisson_lock__channel:{" + name + "}",
		token:   "redisson_lock_token:{" + name + "}",
	}
}

// holder is one Go owner (field C:H).
type holder struct {
	s     *famSuite
	n     famNames
	field string
}

func (s *famSuite) holder(n famNames) *holder {
	return &holder{s: s, n: n, field: s.client + ":" + strconv.FormatInt(s.holders.Add(1), 10)}
}

func (h *holder) latch() string {
	return fmt.Sprintf("redisson_unlock_latch:{%s}:%032x", h.n.name, h.s.reqs.Add(1)+time.Now().UnixNano())
}

func (h *holder) read(ctx context.Context, holds int64) (int64, error) {
	return generated.RwlockReadAcquire(ctx, h.s.b.rdb, generated.RwlockReadAcquireKeys{Lock: h.n.name, Prefix: h.n.prefix},
		generated.RwlockReadAcquireArgs{LeaseMS: famLease, Field: h.field, Holds: holds})
}

func (h *holder) readRelease(ctx context.Context, before int64) (*int64, error) {
	return generated.RwlockReadRelease(ctx, h.s.b.rdb,
		generated.RwlockReadReleaseKeys{Lock: h.n.name, Prefix: h.n.prefix, Channel: h.n.rwlock, Latch: h.latch()},
		generated.RwlockReadReleaseArgs{Field: h.field, LatchMS: 10_000, Publish: h.s.publish, Holds: before})
}

func (h *holder) write(ctx context.Context, holds int64) (int64, error) {
	return generated.RwlockWriteAcquire(ctx, h.s.b.rdb, generated.RwlockWriteAcquireKeys{Lock: h.n.name},
		generated.RwlockWriteAcquireArgs{LeaseMS: famLease, Field: h.field, Holds: holds})
}

func (h *holder) writeRelease(ctx context.Context, before int64) (*int64, error) {
	return generated.RwlockWriteRelease(ctx, h.s.b.rdb,
		generated.RwlockWriteReleaseKeys{Lock: h.n.name, Channel: h.n.rwlock, Latch: h.latch()},
		generated.RwlockWriteReleaseArgs{LeaseMS: famLease, Field: h.field, LatchMS: 10_000, Publish: h.s.publish, Holds: before})
}

// fenced takes the fenced lock; it returns the wait (0: acquired) and the token.
func (h *holder) fenced(ctx context.Context, holds int64) (int64, int64, error) {
	r, err := generated.FencedAcquire(ctx, h.s.b.rdb, generated.FencedAcquireKeys{Lock: h.n.name, Token: h.n.token},
		generated.FencedAcquireArgs{LeaseMS: famLease, Field: h.field, Holds: holds})
	if err != nil {
		return 0, 0, err
	}
	if len(r) != 2 {
		return 0, 0, fmt.Errorf("fenced_acquire replied %v", r)
	}
	return r[0], r[1], nil
}

// spin takes the spin lock (lock_acquire).
func (h *holder) spin(ctx context.Context, holds int64) (int64, error) {
	return generated.LockAcquire(ctx, h.s.b.rdb, generated.LockAcquireKeys{Lock: h.n.name},
		generated.LockAcquireArgs{LeaseMS: famLease, Field: h.field, Holds: holds})
}

// release releases a hold of the fenced lock (the reentrant release, which
// publishes "0" on the lock's channel) or, with publish "none", of the spin
// lock.
func (h *holder) release(ctx context.Context, before int64, publish string) (*int64, error) {
	return generated.LockRelease(ctx, h.s.b.rdb, generated.LockReleaseKeys{Lock: h.n.name, Channel: h.n.channel, Latch: h.latch()},
		generated.LockReleaseArgs{LeaseMS: famLease, Field: h.field, LatchMS: 10_000, Publish: publish, Holds: before})
}

// famSub listens to one channel, with SSUBSCRIBE too on the cluster.
type famSub struct {
	subs []*redis.PubSub
	c    chan struct{} // one pending wake-up at most
	wg   sync.WaitGroup
}

func (s *famSuite) subscribe(t *testing.T, ch string) *famSub {
	t.Helper()
	ctx := context.Background()
	fs := &famSub{c: make(chan struct{}, 1)}
	kinds := []bool{false}
	if s.b.cluster {
		kinds = append(kinds, true)
	}
	for _, sharded := range kinds {
		var ps *redis.PubSub
		if sharded {
			ps = s.b.rdb.SSubscribe(ctx, ch)
		} else {
			ps = s.b.rdb.Subscribe(ctx, ch)
		}
		if _, err := ps.ReceiveTimeout(ctx, 10*time.Second); err != nil {
			t.Fatalf("subscribe %s: %v", ch, err)
		}
		fs.subs = append(fs.subs, ps)
		fs.wg.Add(1)
		go func() {
			defer fs.wg.Done()
			for {
				m, err := ps.Receive(ctx)
				if err != nil {
					return // closed
				}
				if _, ok := m.(*redis.Message); ok {
					select {
					case fs.c <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return fs
}

func (fs *famSub) close() {
	for _, ps := range fs.subs {
		_ = ps.Close()
	}
	fs.wg.Wait()
}

// waitFor calls attempt until it reports 0 (acquired), subscribed to ch
// before the first call; between attempts it waits for a message on ch or
// for the wait attempt gave (at most 10 s). It returns when it acquired.
func (s *famSuite) waitFor(ctx context.Context, t *testing.T, ch string, attempt func() (int64, error)) (time.Time, error) {
	fs := s.subscribe(t, ch)
	defer fs.close()
	for {
		wait, err := attempt()
		if err != nil {
			return time.Time{}, err
		}
		if wait == 0 {
			return time.Now(), nil
		}
		d := 10 * time.Second
		if wait > 0 && time.Duration(wait)*time.Millisecond < d {
			d = time.Duration(wait) * time.Millisecond
		}
		select {
		case <-fs.c:
		case <-time.After(d):
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// spinFor calls attempt until it reports 0, sleeping between attempts with
// Redisson's default spin back-off (1 ms, doubling, capped at 128 ms).
func spinFor(ctx context.Context, attempt func() (int64, error)) (time.Time, error) {
	sleep := time.Millisecond
	for {
		wait, err := attempt()
		if err != nil {
			return time.Time{}, err
		}
		if wait == 0 {
			return time.Now(), nil
		}
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
		sleep = min(2*sleep, 128*time.Millisecond)
	}
}

func must[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func wantAcquired(t *testing.T, what string) func(int64, error) {
	return func(v int64, err error) {
		t.Helper()
		if err != nil || v != 0 {
			t.Fatalf("%s = %d, %v; want 0 (acquired)", what, v, err)
		}
	}
}

func wantRefused(t *testing.T, what string) func(int64, error) {
	return func(v int64, err error) {
		t.Helper()
		if err != nil || v <= 0 {
			t.Fatalf("%s = %d, %v; want a wait (refused)", what, v, err)
		}
	}
}

func wantReleased(t *testing.T, what string, want int64) func(*int64, error) {
	return func(v *int64, err error) {
		t.Helper()
		if err != nil || v == nil || *v != want {
			t.Fatalf("%s = %v, %v; want %d", what, v, err, want)
		}
	}
}

// javaSays fails unless the agent's reply value is want.
func javaSays(t *testing.T, r reply, what, want string) {
	t.Helper()
	if r.val != want {
		t.Fatalf("Redisson %s = %s, want %s", what, r.val, want)
	}
}

// ---- read-write lock ---------------------------------------------------------

// rwExclusion: Redisson's reader and writer threads and Go's reader and
// writer holders take the lock many times at once; inside, each checks
// the counts of readers and writers in Redis: a writer must be alone, a
// reader must see no writer.
func (s *famSuite) rwExclusion(t *testing.T) {
	n := newFamNames(uniqueName(t))
	rwLoops(t, s.ag, s.b.rdb, n.name, 25, func(ctx context.Context, writer bool) (lock, unlock func() error) {
		h := s.holder(n)
		if writer {
			return func() error {
					_, err := s.waitFor(ctx, t, n.rwlock, func() (int64, error) { return h.write(ctx, 1) })
					return err
				}, func() error {
					_, err := h.writeRelease(ctx, 1)
					return err
				}
		}
		return func() error {
				_, err := s.waitFor(ctx, t, n.rwlock, func() (int64, error) { return h.read(ctx, 1) })
				return err
			}, func() error {
				_, err := h.readRelease(ctx, 1)
				return err
			}
	})
}

// rwLoops runs Redisson's two reader threads and one writer and Go's one
// reader and two writers (goHold makes each one's lock and unlock) on the
// read-write lock name, perOwner holds each, all at once; inside, each
// checks the counts of readers and writers in Redis: a writer must be
// alone, a reader must see no writer.
func rwLoops(t *testing.T, ag *agent, rdb redis.UniversalClient, name string, perOwner int, goHold func(ctx context.Context, writer bool) (lock, unlock func() error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	readers, writers := name+":readers", name+":writers"
	var java []<-chan reply
	for _, k := range []string{"rr", "rw", "rr"} {
		java = append(java, ag.send("x"+k+strconv.Itoa(len(java)), "rwloop", name, k, perOwner, readers, writers, 300))
	}
	var wg sync.WaitGroup
	var goOverlaps atomic.Int64
	errs := make(chan error, 3)
	for i, writer := range []bool{false, true, true} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock, unlock := goHold(ctx, writer)
			for range perOwner {
				if err := lock(); err != nil {
					errs <- fmt.Errorf("Go holder %d: %w", i, err)
					return
				}
				if writer {
					if r, _ := rdb.Get(ctx, readers).Int(); rdb.Incr(ctx, writers).Val() != 1 || r != 0 {
						goOverlaps.Add(1)
					}
				} else {
					rdb.Incr(ctx, readers)
					if w, _ := rdb.Get(ctx, writers).Int(); w != 0 {
						goOverlaps.Add(1)
					}
				}
				time.Sleep(300 * time.Microsecond)
				if writer {
					rdb.Decr(ctx, writers)
				} else {
					rdb.Decr(ctx, readers)
				}
				if err := unlock(); err != nil {
					errs <- fmt.Errorf("Go holder %d: %w", i, err)
					return
				}
			}
		}()
	}
	javaOverlaps := 0
	for i, ch := range java {
		r := ag.await(t, ch, fmt.Sprintf("rwloop %d", i), 3*time.Minute)
		v, _ := strconv.Atoi(r.val)
		javaOverlaps += v
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if javaOverlaps != 0 || goOverlaps.Load() != 0 {
		t.Errorf("overlaps: Java %d, Go %d; want none", javaOverlaps, goOverlaps.Load())
	}
	if left := rdb.Exists(ctx, name).Val(); left != 0 {
		t.Errorf("lock %s left after every holder left", name)
	}
	t.Logf("%d holds (Redisson: 2 reader threads, 1 writer; Go: 1 reader, 2 writers), no overlap", 6*perOwner)
	rdb.Del(ctx, readers, writers)
}

// javaField returns the only field of the lock hash other than mode and
// the given ones, with its value: a Redisson owner's field.
func javaFields(t *testing.T, rdb redis.UniversalClient, name string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), name).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rwHolds: each side reads the other's holds: the layout Redisson writes is
// the one the scripts read and the other way round, with isLocked,
// tryLock and the Go acquisitions as the witnesses.
func (s *famSuite) rwHolds(t *testing.T) {
	ctx := context.Background()
	rdb := s.b.rdb

	// Redisson reads twice: the hash and its two timeout keys; Go readers
	// share it, Go writers wait.
	n := newFamNames(uniqueName(t) + "-java-reads")
	s.ag.do(t, "jr", "lock", n.name, "rr", famLease)
	s.ag.do(t, "jr", "lock", n.name, "rr", famLease)
	javaSays(t, s.ag.do(t, "jr", "count", n.name, "rr"), "getHoldCount", "2")
	m := javaFields(t, rdb, n.name)
	var jf string
	for f, v := range m {
		if f != "mode" {
			jf = f
			if v != "2" {
				t.Fatalf("Redisson's read field %s = %s, want 2", f, v)
			}
		}
	}
	if len(m) != 2 || m["mode"] != "read" {
		t.Fatalf("HGETALL after Redisson's two read holds = %v, want mode read and one field", m)
	}
	for i := 1; i <= 2; i++ {
		k := n.prefix + ":" + jf + ":rwlock_timeout:" + strconv.Itoa(i)
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 {
			t.Fatalf("Redisson's timeout key %s: PTTL %v, want a live key", k, d)
		}
	}
	g := s.holder(n)
	wantRefused(t, "Go write beside Redisson's reads")(g.write(ctx, 1))
	wantAcquired(t, "Go read beside Redisson's reads")(g.read(ctx, 1))
	javaSays(t, s.ag.do(t, "jr2", "trylock", n.name, "rw", 0, -1), "write tryLock beside reads", "false")
	javaSays(t, s.ag.do(t, "jr2", "locked", n.name, "rr"), "read isLocked", "true")
	javaSays(t, s.ag.do(t, "jr2", "locked", n.name, "rw"), "write isLocked", "false")
	s.ag.do(t, "jr", "unlock", n.name, "rr")
	s.ag.do(t, "jr", "unlock", n.name, "rr")
	// Redisson's last read unlock kept the lock for the Go reader's hold.
	if st := must[[]int64](t, "status")(generated.RwlockStatus(ctx, rdb, generated.RwlockStatusKeys{Lock: n.name}, generated.RwlockStatusArgs{Field: g.field})); st[0] != 1 || st[1] != 1 || st[3] <= 0 {
		t.Fatalf("after Redisson's last read unlock, Go's status = %v, want read mode, 1 hold, a lease", st)
	}
	wantReleased(t, "Go read release", 1)(g.readRelease(ctx, 1))
	if rdb.Exists(ctx, n.name).Val() != 0 {
		t.Fatalf("lock left after the last reader")
	}

	// Go writes, then downgrades; Redisson sees it and enters as a reader
	// once the write lock is gone.
	n = newFamNames(uniqueName(t) + "-go-writes")
	g = s.holder(n)
	wantAcquired(t, "Go write")(g.write(ctx, 1))
	javaSays(t, s.ag.do(t, "jw", "trylock", n.name, "rr", 0, -1), "read tryLock beside Go's write", "false")
	javaSays(t, s.ag.do(t, "jw", "trylock", n.name, "rw", 0, -1), "write tryLock beside Go's write", "false")
	javaSays(t, s.ag.do(t, "jw", "locked", n.name, "rw"), "write isLocked", "true")
	wantAcquired(t, "Go's read under its write (downgrade)")(g.read(ctx, 1))
	wantReleased(t, "Go's write release", 1)(g.writeRelease(ctx, 1))
	javaSays(t, s.ag.do(t, "jw", "locked", n.name, "rw"), "write isLocked after the downgrade", "false")
	javaSays(t, s.ag.do(t, "jw", "trylock", n.name, "rr", 0, -1), "read tryLock after Go's downgrade", "true")
	javaSays(t, s.ag.do(t, "jw2", "trylock", n.name, "rw", 0, -1), "write tryLock beside two readers", "false")
	s.ag.do(t, "jw", "unlock", n.name, "rr")
	wantReleased(t, "Go's read release", 1)(g.readRelease(ctx, 1))
	if rdb.Exists(ctx, n.name).Val() != 0 {
		t.Fatalf("lock left after the last reader")
	}

	// Redisson writes and downgrades: Go reads its layout, waits as a
	// reader until the write lock goes, and cannot write.
	n = newFamNames(uniqueName(t) + "-java-downgrades")
	g = s.holder(n)
	s.ag.do(t, "jd", "lock", n.name, "rw", famLease)
	wantRefused(t, "Go read beside Redisson's write")(g.read(ctx, 1))
	s.ag.do(t, "jd", "lock", n.name, "rr", famLease)
	m = javaFields(t, rdb, n.name)
	if len(m) != 3 || m["mode"] != "write" {
		t.Fatalf("HGETALL after Redisson's write and read = %v, want mode write, C:H:write and C:H", m)
	}
	for f, v := range m {
		if f != "mode" && v != "1" {
			t.Fatalf("HGETALL after Redisson's write and read = %v, want holds of 1", m)
		}
	}
	s.ag.do(t, "jd", "unlock", n.name, "rw")
	wantAcquired(t, "Go read after Redisson's downgrade")(g.read(ctx, 1))
	_, err := g.write(ctx, 1)
	if !redis.HasErrorPrefix(err, "UPGRADE") {
		t.Fatalf("Go write while it reads = %v, want an UPGRADE error", err)
	}
	s.ag.do(t, "jd", "unlock", n.name, "rr")
	wantReleased(t, "Go read release", 1)(g.readRelease(ctx, 1))
	if rdb.Exists(ctx, n.name).Val() != 0 {
		t.Fatalf("lock left after the last reader")
	}
}

// rwTimeouts: each side reads the other's per-hold timeout keys. A reader
// whose hold timed out (its timeout key expired, the lock kept alive by
// the other's longer hold) is dead to the other side's release, which
// deletes the lock; and a Go reader renewed by rwlock_read_renew stays
// alive to Redisson past its first lease.
func (s *famSuite) rwTimeouts(t *testing.T) {
	const short = 400 // ms
	ctx := context.Background()
	rdb := s.b.rdb
	expired := func(key string) {
		t.Helper()
		waitUntil(t, 10*time.Second, key+" expired", func() bool { return rdb.Exists(ctx, key).Val() == 0 })
	}

	// A Go reader times out; Redisson's last read unlock deletes the lock.
	n := newFamNames(uniqueName(t) + "-go-dies")
	g := s.holder(n)
	if v, err := generated.RwlockReadAcquire(ctx, rdb, generated.RwlockReadAcquireKeys{Lock: n.name, Prefix: n.prefix},
		generated.RwlockReadAcquireArgs{LeaseMS: short, Field: g.field, Holds: 1}); err != nil || v != 0 {
		t.Fatalf("Go read (lease %d ms) = %d, %v", short, v, err)
	}
	s.ag.do(t, "jt", "lock", n.name, "rr", famLease)
	expired(n.prefix + ":" + g.field + ":rwlock_timeout:1")
	if rdb.HExists(ctx, n.name, g.field).Val() != true {
		t.Fatalf("the Go reader's field went with its timeout key; want it left for the cleanup")
	}
	s.ag.do(t, "jt", "unlock", n.name, "rr")
	if rdb.Exists(ctx, n.name).Val() != 0 {
		t.Fatalf("Redisson's last live reader left, but the lock stays: it counted the Go reader's expired hold (%v)", rdb.HGetAll(ctx, n.name).Val())
	}

	// A Redisson reader times out; the Go reader's release deletes the lock.
	n = newFamNames(uniqueName(t) + "-java-dies")
	g = s.holder(n)
	s.ag.do(t, "jt", "lock", n.name, "rr", short)
	var jf string
	for f := range rdb.HGetAll(ctx, n.name).Val() {
		if f != "mode" {
			jf = f
		}
	}
	wantAcquired(t, "Go read")(g.read(ctx, 1))
	expired(n.prefix + ":" + jf + ":rwlock_timeout:1")
	wantReleased(t, "Go read release", 1)(g.readRelease(ctx, 1))
	if rdb.Exists(ctx, n.name).Val() != 0 {
		t.Fatalf("the Go reader left, but the lock stays: it counted Redisson's expired hold (%v)", rdb.HGetAll(ctx, n.name).Val())
	}

	// A Go reader renewed past three of its leases keeps Redisson's writer out.
	n = newFamNames(uniqueName(t) + "-go-renewed")
	g = s.holder(n)
	if v, err := generated.RwlockReadAcquire(ctx, rdb, generated.RwlockReadAcquireKeys{Lock: n.name, Prefix: n.prefix},
		generated.RwlockReadAcquireArgs{LeaseMS: short, Field: g.field, Holds: 1}); err != nil || v != 0 {
		t.Fatalf("Go read (lease %d ms) = %d, %v", short, v, err)
	}
	// Renewed every quarter lease until its release, the Java call in
	// between included (which may take longer than a lease on a loaded
	// machine).
	renew := func() error {
		got, err := generated.RwlockReadRenew(ctx, rdb, generated.RwlockReadRenewKeys{Keys: []string{n.name, n.prefix}},
			generated.RwlockReadRenewArgs{LeaseMS: short, Fields: []string{g.field}})
		if err != nil || len(got) != 1 || got[0] != 1 {
			return fmt.Errorf("renew = %v, %v; want [1]", got, err)
		}
		return nil
	}
	stop, renewed := make(chan struct{}), make(chan error, 1)
	go func() {
		var err error
		tick := time.NewTicker(short / 4 * time.Millisecond)
		defer tick.Stop()
		for err == nil {
			select {
			case <-stop:
				renewed <- renew() // the release follows at once
				return
			case <-tick.C:
				err = renew()
			}
		}
		renewed <- err
	}()
	time.Sleep(3 * short * time.Millisecond) // three leases, renewed
	javaSays(t, s.ag.do(t, "jt", "trylock", n.name, "rw", 0, -1), "write tryLock beside a renewed Go reader", "false")
	close(stop)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	wantReleased(t, "Go read release", 1)(g.readRelease(ctx, 1))
	javaSays(t, s.ag.do(t, "jt", "trylock", n.name, "rw", 0, -1), "write tryLock after the Go reader left", "true")
	s.ag.do(t, "jt", "unlock", n.name, "rw")
}

// rwWakeup measures the wake-ups both ways, for each message: a writer's
// release ("1") wakes a waiting reader, a last reader's release ("0")
// wakes a waiting writer. Each is measured from the releasing call's
// return (0 when the waiter woke first), and must be within wakeBound, far
// below the 30 s leases a missed message would leave the waiter to.
func (s *famSuite) rwWakeup(t *testing.T) {
	const trials = 3
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type dir struct {
		what           string
		holdKind       string // Java's kind of the hold (Go holds the other way)
		waitKind       string
		w              wakes
		goHoldsJavaWts bool
	}
	dirs := []*dir{
		{what: "Go write release -> Redisson reader", holdKind: "rw", waitKind: "rr", goHoldsJavaWts: true},
		{what: "Go read release -> Redisson writer", holdKind: "rr", waitKind: "rw", goHoldsJavaWts: true},
		{what: "Redisson write unlock -> Go reader", holdKind: "rw", waitKind: "rr"},
		{what: "Redisson read unlock -> Go writer", holdKind: "rr", waitKind: "rw"},
	}
	for i := range trials {
		for _, d := range dirs {
			n := newFamNames(fmt.Sprintf("%s-%s-%s-%d", uniqueName(t), d.holdKind, d.waitKind, i))
			if d.goHoldsJavaWts {
				h := s.holder(n)
				if d.holdKind == "rw" {
					wantAcquired(t, "Go write")(h.write(ctx, 1))
				} else {
					wantAcquired(t, "Go read")(h.read(ctx, 1))
				}
				got := s.ag.send("ww", "lock", n.name, d.waitKind, famLease)
				subscribed(t, s.b.rdb, n.rwlock)
				time.Sleep(30 * time.Millisecond) // let Redisson's retry after subscribing pass
				start := time.Now()
				if d.holdKind == "rw" {
					wantReleased(t, "Go write release", 1)(h.writeRelease(ctx, 1))
				} else {
					wantReleased(t, "Go read release", 1)(h.readRelease(ctx, 1))
				}
				end := time.Now()
				r := s.ag.await(t, got, "lock "+d.waitKind, 40*time.Second)
				d.w.add(start, end, r.t1)
				s.ag.do(t, "ww", "unlock", n.name, d.waitKind)
				continue
			}
			s.ag.do(t, "wh", "lock", n.name, d.holdKind, famLease)
			h := s.holder(n)
			type res struct {
				at  time.Time
				err error
			}
			done := make(chan res, 1)
			go func() {
				at, err := s.waitFor(ctx, t, n.rwlock, func() (int64, error) {
					if d.waitKind == "rw" {
						return h.write(ctx, 1)
					}
					return h.read(ctx, 1)
				})
				done <- res{at, err}
			}()
			subscribed(t, s.b.rdb, n.rwlock)
			time.Sleep(30 * time.Millisecond) // let the Go waiter's first attempt pass
			r := s.ag.do(t, "wh", "unlock", n.name, d.holdKind)
			got := <-done
			if got.err != nil {
				t.Fatal(got.err)
			}
			d.w.add(r.t0, r.t1, got.at)
			if d.waitKind == "rw" {
				wantReleased(t, "Go write release", 1)(h.writeRelease(ctx, 1))
			} else {
				wantReleased(t, "Go read release", 1)(h.readRelease(ctx, 1))
			}
		}
	}
	for _, d := range dirs {
		t.Logf("%s: from the release call's start p50 %v, max %v; from its return max %v (%d trials)", d.what,
			pct(d.w.fromStart, 0.5).Round(10*time.Microsecond), pct(d.w.fromStart, 1).Round(10*time.Microsecond),
			pct(d.w.fromReturn, 1).Round(10*time.Microsecond), len(d.w.fromStart))
		if m := pct(d.w.fromReturn, 1); m > wakeBound {
			t.Errorf("%s: a waiter woke %v after the release call returned (all: %v), want each within %v", d.what, m, d.w.fromReturn, wakeBound)
		}
	}
}

// ---- spin lock -----------------------------------------------------------------

// spinExclusion: Redisson's spin lock threads and Go spin holders take the
// lock in turn, with no overlap, waking by polling alone.
func (s *famSuite) spinExclusion(t *testing.T) {
	const perOwner = 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rdb := s.b.rdb
	name := uniqueName(t)
	n := newFamNames(name)
	inside, counter := name+":inside", name+":counter"
	var java []<-chan reply
	for _, owner := range []string{"s1", "s2"} {
		java = append(java, s.ag.send(owner, "loop", name, "s", perOwner, inside, counter, 200))
	}
	var wg sync.WaitGroup
	var goOverlaps atomic.Int64
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := s.holder(n)
			for range perOwner {
				if _, err := spinFor(ctx, func() (int64, error) { return h.spin(ctx, 1) }); err != nil {
					errs <- err
					return
				}
				if rdb.Incr(ctx, inside).Val() != 1 {
					goOverlaps.Add(1)
				}
				v, _ := rdb.Get(ctx, counter).Int()
				time.Sleep(200 * time.Microsecond)
				rdb.Set(ctx, counter, v+1, 0)
				rdb.Decr(ctx, inside)
				if _, err := h.release(ctx, 1, "none"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	javaOverlaps := 0
	for i, ch := range java {
		r := s.ag.await(t, ch, fmt.Sprintf("spin loop %d", i), 3*time.Minute)
		v, _ := strconv.Atoi(r.val)
		javaOverlaps += v
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total, _ := rdb.Get(ctx, counter).Int()
	if javaOverlaps != 0 || goOverlaps.Load() != 0 || total != 4*perOwner {
		t.Errorf("overlaps: Java %d, Go %d; counter %d, want %d holds and no overlap", javaOverlaps, goOverlaps.Load(), total, 4*perOwner)
	}
	rdb.Del(ctx, inside, counter)
}

// spinHandover: a release on either side is seen by the other's polling
// within its back-off (at most 128 ms between tries in both), and the Go
// release publishes nothing.
func (s *famSuite) spinHandover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := s.b.rdb
	n := newFamNames(uniqueName(t))
	h := s.holder(n)

	s.ag.do(t, "sh", "lock", n.name, "s", famLease)
	wantRefused(t, "Go spin beside Redisson's")(h.spin(ctx, 1))
	if d := time.Duration(must[int64](t, "spin")(h.spin(ctx, 1))) * time.Millisecond; d <= 0 || d > time.Duration(famLease)*time.Millisecond {
		t.Fatalf("Go spin's wait hint %v, want the lock's PTTL", d)
	}
	type res struct {
		at  time.Time
		err error
	}
	done := make(chan res, 1)
	go func() {
		at, err := spinFor(ctx, func() (int64, error) { return h.spin(ctx, 1) })
		done <- res{at, err}
	}()
	time.Sleep(50 * time.Millisecond)
	r := s.ag.do(t, "sh", "unlock", n.name, "s")
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	toGo := max(got.at.Sub(r.t1), 0)

	javaSays(t, s.ag.do(t, "sh", "trylock", n.name, "s", 0, -1), "spin tryLock beside Go's", "false")
	wait := s.ag.send("sh", "lock", n.name, "s", famLease)
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	wantReleased(t, "Go spin release", 1)(h.release(ctx, 1, "none"))
	end := time.Now()
	jr := s.ag.await(t, wait, "spin lock", 30*time.Second)
	toJava := max(jr.t1.Sub(end), 0)
	s.ag.do(t, "sh", "unlock", n.name, "s")
	t.Logf("spin hand-over: Redisson -> Go %v, Go -> Redisson %v after the release returned (from its start %v)", toGo.Round(10*time.Microsecond), toJava.Round(10*time.Microsecond), jr.t1.Sub(start).Round(10*time.Microsecond))
	if toGo > wakeBound || toJava > wakeBound {
		t.Errorf("spin hand-over took Redisson -> Go %v, Go -> Redisson %v; want each within %v", toGo, toJava, wakeBound)
	}
	if rdb.Exists(ctx, n.name).Val() != 0 {
		t.Errorf("spin lock left after the last unlock")
	}
}

// ---- fenced lock ---------------------------------------------------------------

// fencedAbsent: Redisson 3.16 has no fenced lock (the agent says so).
func (s *famSuite) fencedAbsent(t *testing.T) {
	r := <-s.ag.send("fa", "gettoken", uniqueName(t), "fe")
	if r.ok || !strings.Contains(r.err, "no RFencedLock") {
		t.Fatalf("gettoken on %s = %+v, want the agent's 'no RFencedLock' error", s.j, r)
	}
}

// fencedTokens: the token counter is one across languages: every
// acquisition, Java's or Go's, takes the next value; holds exclude each
// other; and with both sides taking the lock at once, the tokens recorded
// inside the holds, in the order of the holds, increase strictly.
func (s *famSuite) fencedTokens(t *testing.T) {
	const perSide = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rdb := s.b.rdb
	n := newFamNames(uniqueName(t))
	g := s.holder(n)
	tok := func(r reply) int64 {
		t.Helper()
		v, err := strconv.ParseInt(r.val, 10, 64)
		if err != nil {
			t.Fatalf("token %q: %v", r.val, err)
		}
		return v
	}
	t1 := tok(s.ag.do(t, "ft", "token", n.name, "fe", famLease))
	wantRefused(t, "Go fenced beside Redisson's")(func() (int64, error) { w, _, err := g.fenced(ctx, 1); return w, err }())
	s.ag.do(t, "ft", "unlock", n.name, "fe")
	w, t2, err := g.fenced(ctx, 1)
	if err != nil || w != 0 || t2 != t1+1 {
		t.Fatalf("Go fenced after Redisson's token %d = wait %d, token %d, %v; want token %d", t1, w, t2, err, t1+1)
	}
	javaSays(t, s.ag.do(t, "ft", "trytoken", n.name, "fe", 0), "tryLockAndGetToken beside Go's hold", "null")
	javaSays(t, s.ag.do(t, "ft", "gettoken", n.name, "fe"), "getToken", strconv.FormatInt(t2, 10))
	w, t3, err := g.fenced(ctx, 2)
	if err != nil || w != 0 || t3 != t2+1 {
		t.Fatalf("Go re-entry = wait %d, token %d, %v; want token %d", w, t3, err, t2+1)
	}
	wantReleased(t, "Go release", 0)(g.release(ctx, 2, s.publish))
	wantReleased(t, "Go release", 1)(g.release(ctx, 1, s.publish))
	if t4 := tok(s.ag.do(t, "ft", "token", n.name, "fe", famLease)); t4 != t3+1 {
		t.Fatalf("Redisson's token after Go's %d = %d, want %d", t3, t4, t3+1)
	}
	s.ag.do(t, "ft", "unlock", n.name, "fe")

	// Both sides at once; each hold pushes its token inside the hold.
	list := n.name + ":tokens"
	jdone := s.ag.send("fl", "tokenloop", n.name, "fe", perSide, list)
	for range perSide {
		var tk int64
		if _, err := s.waitFor(ctx, t, n.channel, func() (int64, error) {
			w, tt, err := g.fenced(ctx, 1)
			tk = tt
			return w, err
		}); err != nil {
			t.Fatal(err)
		}
		rdb.RPush(ctx, list, tk)
		wantReleased(t, "Go release", 1)(g.release(ctx, 1, s.publish))
	}
	s.ag.await(t, jdone, "tokenloop", 2*time.Minute)
	got := rdb.LRange(ctx, list, 0, -1).Val()
	if len(got) != 2*perSide {
		t.Fatalf("%d tokens recorded, want %d", len(got), 2*perSide)
	}
	prev := int64(0)
	for i, v := range got {
		x, _ := strconv.ParseInt(v, 10, 64)
		if x <= prev {
			t.Fatalf("hold %d recorded token %d after %d: not strictly increasing (all: %v)", i, x, prev, got)
		}
		prev = x
	}
	rdb.Del(ctx, list)
	if rdb.Exists(ctx, n.token).Val() != 1 {
		t.Fatalf("token counter %s gone", n.token)
	}
	rdb.Del(ctx, n.token)
}

// fencedWakeup: the fenced lock's release wakes a waiter on the other side
// in milliseconds (the reentrant lock's channel and message "0").
func (s *famSuite) fencedWakeup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := newFamNames(uniqueName(t))
	g := s.holder(n)
	var toJava, toGo wakes
	for range 3 {
		if w, _, err := g.fenced(ctx, 1); err != nil || w != 0 {
			t.Fatalf("Go fenced = %d, %v", w, err)
		}
		got := s.ag.send("fw", "token", n.name, "fe", famLease)
		subscribed(t, s.b.rdb, n.channel)
		time.Sleep(30 * time.Millisecond)
		start := time.Now()
		wantReleased(t, "Go release", 1)(g.release(ctx, 1, s.publish))
		end := time.Now()
		r := s.ag.await(t, got, "lockAndGetToken", 40*time.Second)
		toJava.add(start, end, r.t1)

		done := make(chan error, 1)
		var at time.Time
		go func() {
			var err error
			at, err = s.waitFor(ctx, t, n.channel, func() (int64, error) { w, _, err := g.fenced(ctx, 1); return w, err })
			done <- err
		}()
		subscribed(t, s.b.rdb, n.channel)
		time.Sleep(30 * time.Millisecond)
		r = s.ag.do(t, "fw", "unlock", n.name, "fe")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		toGo.add(r.t0, r.t1, at)
		wantReleased(t, "Go release", 1)(g.release(ctx, 1, s.publish))
	}
	for _, x := range []struct {
		what string
		w    wakes
	}{{"Go fenced release -> Redisson waiter", toJava}, {"Redisson fenced unlock -> Go waiter", toGo}} {
		t.Logf("%s: from the release call's start p50 %v; from its return max %v", x.what,
			pct(x.w.fromStart, 0.5).Round(10*time.Microsecond), pct(x.w.fromReturn, 1).Round(10*time.Microsecond))
		if m := pct(x.w.fromReturn, 1); m > wakeBound {
			t.Errorf("%s: woke %v after the release returned, want within %v", x.what, m, wakeBound)
		}
	}
	s.b.rdb.Del(ctx, n.token)
}

// ---- the Go API (lualock.Client) beside Redisson ----------------------------

// goClient is a lualock client for this suite: PubSubBoth on a cluster
// shared with Redisson before 3.22 (which publishes with PUBLISH), a short
// watchdog.
func (s *famSuite) goClient(t *testing.T) *lualock.Client {
	o := lualock.Options{WatchdogLease: goWatchdog}
	if s.b.cluster && !s.j.atLeast(3, 22) {
		o.PubSub = lualock.PubSubBoth
	}
	return newClient(t, s.b.rdb, o)
}

// apiRWLock: lualock's ReadWriteLock beside Redisson's: wake-ups both ways
// in milliseconds, a Go read hold renewed by the watchdog past three leases
// keeping Redisson's writer out, and Redisson's forceUnlock of the read
// lock reaching the Go holder's lost signal.
func (s *famSuite) apiRWLock(t *testing.T) {
	ctx := context.Background()
	c := s.goClient(t)

	// Go writer -> Redisson reader.
	name := uniqueName(t) + "-gw"
	g := c.NewReadWriteLock(name)
	if err := g.WriteLock().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := s.ag.send("ar", "lock", name, "rr", famLease)
	subscribed(t, s.b.rdb, "redisson_rwlock:{"+name+"}")
	time.Sleep(30 * time.Millisecond)
	if err := g.WriteLock().Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	r := s.ag.await(t, got, "read lock", 40*time.Second)
	toJava := max(r.t1.Sub(end), 0)
	s.ag.do(t, "ar", "unlock", name, "rr")

	// Redisson writer -> Go reader.
	name = uniqueName(t) + "-jw"
	s.ag.do(t, "aw", "lock", name, "rw", famLease)
	g = c.NewReadWriteLock(name)
	done := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := g.ReadLock().Lock(ctx)
		done <- time.Now()
		errc <- err
	}()
	subscribed(t, s.b.rdb, "redisson_rwlock:{"+name+"}")
	time.Sleep(30 * time.Millisecond)
	r = s.ag.do(t, "aw", "unlock", name, "rw")
	at := <-done
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	toGo := max(at.Sub(r.t1), 0)
	t.Logf("wake-ups after the release returned: Go write unlock -> Redisson reader %v, Redisson write unlock -> Go reader %v", toJava.Round(10*time.Microsecond), toGo.Round(10*time.Microsecond))
	if toJava > wakeBound || toGo > wakeBound {
		t.Errorf("wake-ups %v, %v; want each within %v", toJava, toGo, wakeBound)
	}

	// The Go reader (under the watchdog) outlives three leases.
	time.Sleep(3*goWatchdog + goWatchdog/3)
	javaSays(t, s.ag.do(t, "aw", "trylock", name, "rw", 0, -1), "write tryLock beside Go's renewed reader", "false")
	select {
	case <-g.ReadLock().Done():
		t.Fatalf("Go read hold ended: %v", context.Cause(g.ReadLock().Context()))
	default:
	}
	// Redisson's forceUnlock of the read lock: the Go hold is lost.
	javaSays(t, s.ag.do(t, "aw", "force", name, "rr"), "read forceUnlock", "true")
	select {
	case <-g.ReadLock().Done():
		if cause := context.Cause(g.ReadLock().Context()); !errors.Is(cause, lualock.ErrLockLost) {
			t.Errorf("lost cause %v, want ErrLockLost", cause)
		}
	case <-time.After(lostBound):
		t.Errorf("no lost signal within %v of Redisson's forceUnlock", lostBound)
	}
	_ = g.ReadLock().Unlock(ctx)
}

// apiReadersOfOneClient: several readers of one lualock client wait
// behind a writer, Go's and then Redisson's; one release message lets
// every one of them in. MaxWaitTimer is an hour and the writers' leases
// are long (famLease, the Go watchdog's) and the hold tracker (which
// would wake the readers at the key's change) is off: only a message can
// wake a reader within its wait, so a reader in was woken by the release.
func (s *famSuite) apiReadersOfOneClient(t *testing.T) {
	const readers = 4
	ctx := context.Background()
	o := lualock.Options{WatchdogLease: 30 * time.Second, MaxWaitTimer: time.Hour, NoHoldTracking: true}
	if s.b.cluster && !s.j.atLeast(3, 22) {
		o.PubSub = lualock.PubSubBoth
	}
	c := newClient(t, s.b.rdb, o)
	for _, javaWriter := range []bool{false, true} {
		name := uniqueName(t) + "-gw"
		var goWriter *lualock.Lock
		if javaWriter {
			name = uniqueName(t) + "-jw"
			s.ag.do(t, "rw1", "lock", name, "rw", famLease)
		} else {
			goWriter = c.NewReadWriteLock(name).WriteLock()
			if err := goWriter.Lock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		rs := make([]*lualock.Lock, readers)
		type in struct {
			at  time.Time
			err error
		}
		res := make(chan in, readers)
		for i := range rs {
			rs[i] = c.NewReadWriteLock(name).ReadLock()
			go func() {
				err := rs[i].TryLock(ctx, 20*time.Second)
				res <- in{time.Now(), err}
			}()
		}
		waitUntil(t, 10*time.Second, "every reader waiting", func() bool { return c.Stats().Waiters == readers })
		time.Sleep(50 * time.Millisecond) // let each reader reach its sleep
		var released time.Time
		if javaWriter {
			released = s.ag.do(t, "rw1", "unlock", name, "rw").t1
		} else {
			if err := goWriter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			released = time.Now()
		}
		var last time.Duration
		for range readers {
			r := <-res
			if r.err != nil {
				t.Fatalf("java writer %v: reader: %v", javaWriter, r.err)
			}
			last = max(last, r.at.Sub(released))
		}
		t.Logf("java writer %v: %d readers of one client in, the last %v after the release returned", javaWriter, readers, max(last, 0).Round(10*time.Microsecond))
		if last > wakeBound {
			t.Errorf("java writer %v: the last reader got in %v after the release, want within %v", javaWriter, last, wakeBound)
		}
		for _, r := range rs {
			if err := r.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// apiJavaDowngrade: readers of one lualock client wait behind Redisson's
// writer, which downgrades (read lock under its write lock, then the
// write lock's unlock): Redisson publishes nothing, and the hold tracker,
// which wakes them at every change of the hash, lets every one in.
// MaxWaitTimer is an hour and the writer's lease (famLease) outlasts the
// readers' wait: no fallback timer fires. A reader of a client without
// the tracker, waiting beside them, is still waiting when they are all in:
// no message woke anyone.
func (s *famSuite) apiJavaDowngrade(t *testing.T) {
	const readers = 3
	ctx := context.Background()
	o := lualock.Options{WatchdogLease: 30 * time.Second, MaxWaitTimer: time.Hour}
	if s.b.cluster && !s.j.atLeast(3, 22) {
		o.PubSub = lualock.PubSubBoth
	}
	c := newClient(t, s.b.rdb, o)
	o.NoHoldTracking = true
	blind := newClient(t, s.b.rdb, o)
	name := uniqueName(t) + "-jd"
	s.ag.do(t, "jd1", "lock", name, "rw", famLease)
	type in struct {
		at  time.Time
		err error
	}
	res := make(chan in, readers)
	rs := make([]*lualock.Lock, readers)
	for i := range rs {
		rs[i] = c.NewReadWriteLock(name).ReadLock()
		go func() {
			err := rs[i].TryLock(ctx, 20*time.Second)
			res <- in{time.Now(), err}
		}()
	}
	bctx, stopBlind := context.WithCancel(ctx)
	blindDone := make(chan error, 1)
	go func() { blindDone <- blind.NewReadWriteLock(name).ReadLock().TryLock(bctx, 20*time.Second) }()
	waitUntil(t, 10*time.Second, "every reader waiting", func() bool {
		return c.Stats().Waiters == readers && blind.Stats().Waiters == 1
	})
	time.Sleep(50 * time.Millisecond) // let each reader reach its sleep
	s.ag.do(t, "jd1", "lock", name, "rr", famLease)
	down := s.ag.do(t, "jd1", "unlock", name, "rw").t0 // the unlock's call began (its reply may come after the readers are in)
	var first, last time.Duration
	for i := range readers {
		r := <-res
		if r.err != nil {
			t.Fatalf("reader: %v", r.err)
		}
		d := r.at.Sub(down)
		if i == 0 {
			first = d
		}
		last = d
	}
	stillWaiting := blind.Stats().Waiters == 1
	stopBlind()
	if err := <-blindDone; err == nil || !stillWaiting {
		t.Errorf("the reader without a tracker got in (%v): something other than the tracker woke the readers", err)
	}
	t.Logf("%d readers of one client in after Redisson's downgrade: the first %v after the unlock began, the last %v", readers, first.Round(10*time.Microsecond), last.Round(10*time.Microsecond))
	if last > wakeBound {
		t.Errorf("the last reader got in %v after the downgrade, want within %v", last, wakeBound)
	}
	for _, r := range rs {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.ag.do(t, "jd1", "unlock", name, "rr")
}

// apiFenced: lualock's FencedLock and Redisson's share one token counter.
func (s *famSuite) apiFenced(t *testing.T) {
	ctx := context.Background()
	c := s.goClient(t)
	name := uniqueName(t)
	t1, err := strconv.ParseInt(s.ag.do(t, "af", "token", name, "fe", famLease).val, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	f := c.NewFencedLock(name)
	if _, err := f.TryLockToken(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("Go TryLockToken beside Redisson's hold = %v, want ErrNotObtained", err)
	}
	got := make(chan int64, 1)
	errc := make(chan error, 1)
	go func() {
		tk, err := f.LockToken(ctx)
		got <- tk
		errc <- err
	}()
	subscribed(t, s.b.rdb, "redisson_lock__channel:{"+name+"}")
	time.Sleep(30 * time.Millisecond)
	s.ag.do(t, "af", "unlock", name, "fe")
	t2 := <-got
	if err := <-errc; err != nil || t2 != t1+1 || f.Token() != t2 {
		t.Fatalf("Go LockToken after Redisson's token %d = %d (Token %d), %v; want %d", t1, t2, f.Token(), err, t1+1)
	}
	javaSays(t, s.ag.do(t, "af", "gettoken", name, "fe"), "getToken", strconv.FormatInt(t2, 10))
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if t3, _ := strconv.ParseInt(s.ag.do(t, "af", "token", name, "fe", famLease).val, 10, 64); t3 != t2+1 {
		t.Fatalf("Redisson's token after Go's %d = %d, want %d", t2, t3, t2+1)
	}
	s.ag.do(t, "af", "unlock", name, "fe")
	s.b.rdb.Del(ctx, "redisson_lock_token:{"+name+"}")
}

// apiSpin: lualock's spin lock and Redisson's exclude each other and hand
// over by polling, with no subscriber on the lock's channel.
func (s *famSuite) apiSpin(t *testing.T) {
	ctx := context.Background()
	c := s.goClient(t)
	name := uniqueName(t)
	s.ag.do(t, "as", "lock", name, "s", famLease)
	l := c.NewSpinLock(name)
	if err := l.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("Go spin TryLock beside Redisson's = %v", err)
	}
	done := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		err := l.Lock(ctx)
		done <- time.Now()
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if p, sh := numSub(t, s.b.rdb, "redisson_lock__channel:{"+name+"}"); p+sh != 0 {
		t.Fatalf("%d subscribers on the lock's channel, want none: a spin waiter polls", p+sh)
	}
	r := s.ag.do(t, "as", "unlock", name, "s")
	at := <-done
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	javaSays(t, s.ag.do(t, "as", "trylock", name, "s", 0, -1), "Redisson spin tryLock beside Go's", "false")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	javaSays(t, s.ag.do(t, "as", "trylock", name, "s", 0, -1), "Redisson spin tryLock after Go's unlock", "true")
	s.ag.do(t, "as", "unlock", name, "s")
	if d := max(at.Sub(r.t1), 0); d > wakeBound {
		t.Errorf("Go spin waiter got the lock %v after Redisson's unlock, want within %v", d, wakeBound)
	} else {
		t.Logf("Go spin waiter: %v after Redisson's unlock returned", d.Round(10*time.Microsecond))
	}
}
