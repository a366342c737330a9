package sem

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
)

// semOps runs the plain semaphore's scripts on one name.
type semOps struct {
	b backend
	k semKeys
}

func (s semOps) trySet(ctx context.Context, permits, ttlMS int64, req string) (int64, error) {
	return generated.SemaphoreTrySetPermits(ctx, s.b.rdb,
		generated.SemaphoreTrySetPermitsKeys{Sem: s.k.name, Channel: s.k.channel, Request: req},
		generated.SemaphoreTrySetPermitsArgs{Permits: permits, TTLMS: ttlMS, LatchMS: latchMS, Publish: s.b.publish})
}

// acquire is a single try that never claims.
func (s semOps) acquire(ctx context.Context, n int64, req string) (int64, error) {
	return s.acquireAs(ctx, n, req, "", 0)
}

// acquireAs is a waiter's try: refused, it takes or refreshes the claim
// for claimMS (0: no claim).
func (s semOps) acquireAs(ctx context.Context, n int64, req, waiter string, claimMS int64) (int64, error) {
	return generated.SemaphoreAcquire(ctx, s.b.rdb,
		generated.SemaphoreAcquireKeys{Sem: s.k.name, Request: req, Claim: s.k.claim},
		generated.SemaphoreAcquireArgs{Permits: n, LatchMS: latchMS, Waiter: waiter, ClaimMS: claimMS})
}

func (s semOps) unclaim(ctx context.Context, waiter string) (int64, error) {
	return generated.SemaphoreUnclaim(ctx, s.b.rdb, generated.SemaphoreUnclaimKeys{Claim: s.k.claim}, generated.SemaphoreUnclaimArgs{Waiter: waiter})
}

func (s semOps) release(ctx context.Context, n int64, req string) (int64, error) {
	return generated.SemaphoreRelease(ctx, s.b.rdb,
		generated.SemaphoreReleaseKeys{Sem: s.k.name, Channel: s.k.channel, Request: req},
		generated.SemaphoreReleaseArgs{Permits: n, LatchMS: latchMS, Publish: s.b.publish})
}

func (s semOps) add(ctx context.Context, delta int64, req string) (int64, error) {
	return generated.SemaphoreAddPermits(ctx, s.b.rdb,
		generated.SemaphoreAddPermitsKeys{Sem: s.k.name, Channel: s.k.channel, Request: req},
		generated.SemaphoreAddPermitsArgs{Delta: delta, LatchMS: latchMS, Publish: s.b.publish})
}

func (s semOps) available(ctx context.Context) (int64, error) {
	return generated.SemaphoreAvailable(ctx, s.b.rdb, generated.SemaphoreAvailableKeys{Sem: s.k.name})
}

func (s semOps) drain(ctx context.Context, req string) (int64, error) {
	return generated.SemaphoreDrain(ctx, s.b.rdb,
		generated.SemaphoreDrainKeys{Sem: s.k.name, Request: req},
		generated.SemaphoreDrainArgs{LatchMS: latchMS})
}

// must returns a function that fails the test on an error and returns
// the value: must(t)(s.acquire(...)).
func must(t *testing.T) func(int64, error) int64 {
	return func(v int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// expect returns a function that fails the test unless the call returned
// want without error: expect(t, "acquire", 1)(s.acquire(...)).
func expect(t *testing.T, what string, want int64) func(int64, error) {
	return func(v int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v != want {
			t.Fatalf("%s = %d, want %d", what, v, want)
		}
	}
}

// TestSemaphore_layout walks one semaphore through every script and checks
// Redisson's layout after each: N a string integer, the new count published
// on tag("redisson_sc", N) on every increase, nothing published on a
// decrease, no TTL unless trySetPermits gave one.
func TestSemaphore_layout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, braced := range []bool{false, true} {
			t.Run(map[bool]string{false: "plain", true: "braced"}[braced], func(t *testing.T) {
				c := ctx(t)
				s := semOps{b, newSemKeys(uniqueName(t, braced))}
				msgs := listen(t, b, s.k.channel)

				// A missing semaphore grants nothing (#4401) and reads as 0.
				expect(t, "acquire on missing", 0)(s.acquire(c, 1, requestKey(s.k.name)))
				expect(t, "available on missing", 0)(s.available(c))
				if get(t, b.rdb, s.k.name) != "" {
					t.Fatal("a refused acquire created N")
				}

				expect(t, "trySetPermits", 1)(s.trySet(c, 3, 0, requestKey(s.k.name)))
				if v := get(t, b.rdb, s.k.name); v != "3" {
					t.Fatalf("N = %q, want 3", v)
				}
				if d := pttl(t, b.rdb, s.k.name); d != -1 {
					t.Fatalf("PTTL N = %v, want none", d)
				}
				if m := msgs.next(t, timeout); m != "3" {
					t.Fatalf("trySetPermits published %q, want 3", m)
				}
				expect(t, "trySetPermits again", 0)(s.trySet(c, 5, 0, requestKey(s.k.name)))
				if v := get(t, b.rdb, s.k.name); v != "3" {
					t.Fatalf("N = %q after a second trySetPermits, want 3", v)
				}

				expect(t, "acquire 2", 1)(s.acquire(c, 2, requestKey(s.k.name)))
				expect(t, "acquire 2 of 1", 0)(s.acquire(c, 2, requestKey(s.k.name)))
				expect(t, "available", 1)(s.available(c))

				expect(t, "release 2", 3)(s.release(c, 2, requestKey(s.k.name)))
				if m := msgs.next(t, timeout); m != "3" {
					t.Fatalf("release published %q, want the new count 3", m)
				}
				expect(t, "add 4", 7)(s.add(c, 4, requestKey(s.k.name)))
				if m := msgs.next(t, timeout); m != "7" {
					t.Fatalf("addPermits published %q, want 7", m)
				}
				expect(t, "add -10", -3)(s.add(c, -10, requestKey(s.k.name)))
				if m := msgs.next(t, timeout); m != "-3" {
					t.Fatalf("addPermits published %q, want -3", m)
				}
				expect(t, "drain negative", -3)(s.drain(c, requestKey(s.k.name)))
				if v := get(t, b.rdb, s.k.name); v != "0" {
					t.Fatalf("N = %q after drain, want 0", v)
				}
				expect(t, "release 5", 5)(s.release(c, 5, requestKey(s.k.name)))
				<-msgs.ch
				expect(t, "drain", 5)(s.drain(c, requestKey(s.k.name)))
				expect(t, "available after drain", 0)(s.available(c))
				msgs.none(t, 100*time.Millisecond)

				// Release creates a missing key, as Redisson's INCRBY does.
				if err := b.rdb.Del(c, s.k.name).Err(); err != nil {
					t.Fatal(err)
				}
				expect(t, "release on missing", 2)(s.release(c, 2, requestKey(s.k.name)))
				if err := b.rdb.Del(c, s.k.name).Err(); err != nil {
					t.Fatal(err)
				}
				expect(t, "drain missing", 0)(s.drain(c, requestKey(s.k.name)))
				if n := b.rdb.Exists(c, s.k.name).Val(); n != 0 {
					t.Fatal("drain created N")
				}
			})
		}
	})
}

// TestSemaphore_TrySetPermits_ttl: a TTL set with the permits (Redisson
// 4.x's trySetPermits(p, ttl)); addPermits and drain SET the key and drop
// it, as Redisson's do.
func TestSemaphore_TrySetPermits_ttl(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := semOps{b, newSemKeys(uniqueName(t, false))}
		expect(t, "trySetPermits", 1)(s.trySet(c, 2, 60_000, requestKey(s.k.name)))
		if d := pttl(t, b.rdb, s.k.name); d <= 50*time.Second || d > 60*time.Second {
			t.Fatalf("PTTL N = %v, want about 60s", d)
		}
		expect(t, "add", 3)(s.add(c, 1, requestKey(s.k.name)))
		if d := pttl(t, b.rdb, s.k.name); d != -1 {
			t.Fatalf("PTTL N = %v after addPermits, want none (SET drops it)", d)
		}
	})
}

// TestSemaphore_badInput: every refused argument is an error reply and
// leaves the semaphore, its latches and its channel as they were.
func TestSemaphore_badInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := semOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.trySet(c, 4, 0, requestKey(s.k.name)))
		msgs := listen(t, b, s.k.channel)
		req := requestKey(s.k.name)
		before := dump(t, b.rdb, s.k.name, req, s.k.claim)

		bad := s
		bad.b.publish = "broadcast"
		cases := []struct {
			name string
			call func() (int64, error)
			want string
		}{
			{"trySet negative", func() (int64, error) { return s.trySet(c, -1, 0, req) }, "permits must be"},
			{"trySet ttl", func() (int64, error) { return s.trySet(c, 1, -5, req) }, "ttl_ms must be"},
			{"trySet publish", func() (int64, error) { return bad.trySet(c, 1, 0, req) }, "publish must be"},
			{"acquire 0", func() (int64, error) { return s.acquire(c, 0, req) }, "permits must be a positive"},
			{"acquire -2", func() (int64, error) { return s.acquire(c, -2, req) }, "permits must be a positive"},
			{"release 0", func() (int64, error) { return s.release(c, 0, req) }, "permits must be a positive"},
			{"release publish", func() (int64, error) { return bad.release(c, 1, req) }, "publish must be"},
			{"add publish", func() (int64, error) { return bad.add(c, 1, req) }, "publish must be"},
		}
		for _, tc := range cases {
			_, err := tc.call()
			wantErr(t, err, tc.want)
		}
		// Args that go-redis cannot produce from int64: send raw.
		for _, args := range [][]any{{"1.5", latchMS, "", 0}, {"x", latchMS, "", 0}, {1, 0, "", 0}, {1, "2.5", "", 0}, {1, latchMS, "", -1}, {1, latchMS, "a:b", 10}} {
			_, err := generated.SemaphoreAcquireScript.Run(c, b.rdb, []string{s.k.name, req, s.k.claim}, args...)
			wantErr(t, err, "must")
		}
		_, err := generated.SemaphoreDrainScript.Run(c, b.rdb, []string{s.k.name, req}, "-1")
		wantErr(t, err, "latch_ms must be")
		if after := dump(t, b.rdb, s.k.name, req, s.k.claim); after != before {
			t.Fatalf("state changed by refused calls:\nbefore %s\nafter  %s", before, after)
		}
		msgs.none(t, 100*time.Millisecond)
	})
}

// TestSemaphore_resent: a call sent again with its request id (its first
// reply lost) replays the first outcome: permits are taken, given back,
// added and drained once.
func TestSemaphore_resent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := semOps{b, newSemKeys(uniqueName(t, false))}
		req := requestKey(s.k.name)
		expect(t, "trySet", 1)(s.trySet(c, 5, 0, req))
		expect(t, "trySet resent", 1)(s.trySet(c, 5, 0, req))

		req = requestKey(s.k.name)
		expect(t, "acquire 3", 1)(s.acquire(c, 3, req))
		expect(t, "acquire 3 resent", 1)(s.acquire(c, 3, req))
		expect(t, "available", 2)(s.available(c))
		if d := pttl(t, b.rdb, req); d <= 0 || d > latchMS*time.Millisecond {
			t.Fatalf("request latch PTTL %v, want (0, %dms]", d, latchMS)
		}

		req = requestKey(s.k.name)
		expect(t, "release 3", 5)(s.release(c, 3, req))
		expect(t, "release 3 resent", 5)(s.release(c, 3, req))
		expect(t, "available", 5)(s.available(c))

		req = requestKey(s.k.name)
		expect(t, "add 2", 7)(s.add(c, 2, req))
		expect(t, "add 2 resent", 7)(s.add(c, 2, req))

		req = requestKey(s.k.name)
		expect(t, "drain", 7)(s.drain(c, req))
		expect(t, "drain resent", 7)(s.drain(c, req))
		expect(t, "available", 0)(s.available(c))

		// A refused acquire leaves no latch: resent, it may succeed.
		req = requestKey(s.k.name)
		expect(t, "acquire on 0", 0)(s.acquire(c, 1, req))
		if n := b.rdb.Exists(c, req).Val(); n != 0 {
			t.Fatal("a refused acquire left a latch")
		}
	})
}

// lostReply is a hook that lets an EVALSHA of one script reach Redis, then
// drops its reply (io.EOF-like), while armed: the caller cannot know the
// outcome and resends.
type lostReply struct {
	sha   string
	armed atomic.Bool
}

func (h *lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err == nil && len(args) > 1 && args[0] == "evalsha" && args[1] == h.sha && h.armed.CompareAndSwap(true, false) {
			cmd.SetErr(errLost)
			return errLost
		}
		return err
	}
}

var errLost = errors.New("test: reply lost")

// TestSemaphore_overSubscription runs many holders against a semaphore of
// P permits, each taking 1 to 3 permits, holding them briefly and giving
// them back, with some replies lost and resent: at no time are more than P
// permits in use (counted by the holders, between a granted acquire and
// the release), and at the end exactly P are available, so no permit was
// counted twice. Bounded: 600 acquisitions or 20 s, whichever comes first.
func TestSemaphore_overSubscription(t *testing.T) {
	const (
		permits   = 4
		holders   = 12
		total     = 600
		timeLimit = 20 * time.Second
	)
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := semOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.trySet(c, permits, 0, requestKey(s.k.name)))
		lostAcq := &lostReply{sha: generated.SemaphoreAcquireSHA1}
		lostRel := &lostReply{sha: generated.SemaphoreReleaseSHA1}
		b.rdb.AddHook(lostAcq)
		b.rdb.AddHook(lostRel)

		var inUse, maxInUse, done, over, resent atomic.Int64
		deadline := time.Now().Add(timeLimit)
		var wg sync.WaitGroup
		errs := make(chan error, holders)
		for g := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 7))
				for done.Load() < total && time.Now().Before(deadline) {
					n := int64(1 + r.IntN(3))
					if r.IntN(10) == 0 {
						lostAcq.armed.Store(true)
					}
					req := requestKey(s.k.name)
					got, err := s.acquire(c, n, req)
					for errors.Is(err, errLost) {
						resent.Add(1)
						got, err = s.acquire(c, n, req)
					}
					if err != nil {
						errs <- err
						return
					}
					if got != 1 {
						time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
						continue
					}
					now := inUse.Add(n)
					if now > permits {
						over.Add(1)
					}
					for m := maxInUse.Load(); now > m && !maxInUse.CompareAndSwap(m, now); m = maxInUse.Load() {
					}
					time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
					inUse.Add(-n)
					if r.IntN(10) == 0 {
						lostRel.armed.Store(true)
					}
					req = requestKey(s.k.name)
					_, err = s.release(c, n, req)
					for errors.Is(err, errLost) {
						resent.Add(1)
						_, err = s.release(c, n, req)
					}
					if err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d acquisitions, %d resent calls, at most %d of %d permits in use", done.Load(), resent.Load(), maxInUse.Load(), permits)
		if over.Load() > 0 {
			t.Fatalf("%d times more than %d permits in use (max %d)", over.Load(), permits, maxInUse.Load())
		}
		if done.Load() < 100 {
			t.Fatalf("only %d acquisitions in %v", done.Load(), timeLimit)
		}
		if resent.Load() == 0 {
			t.Fatal("no reply was lost: the test did not test resends")
		}
		if v := get(t, b.rdb, s.k.name); v != "4" {
			t.Fatalf("N = %q at the end, want %d: a permit was counted twice or lost", v, permits)
		}
	})
}
