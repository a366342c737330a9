package sem

import (
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lualock/lualock/generated"
)

// never is Redisson's score of a permit without a lease.
const never = 922337203685477

// expOps runs the permit-expirable semaphore's scripts on one name.
type expOps struct {
	b backend
	k semKeys
}

// acquire is a single try that never claims.
func (s expOps) acquire(ctx context.Context, leaseMS int64, ids ...[]byte) (int64, error) {
	return s.acquireAs(ctx, "", 0, leaseMS, ids...)
}

// acquireAs is a waiter's try: refused, it takes or refreshes the claim
// for claimMS (0: no claim).
func (s expOps) acquireAs(ctx context.Context, waiter string, claimMS, leaseMS int64, ids ...[]byte) (int64, error) {
	return generated.ExpirableSemaphoreAcquire(ctx, s.b.rdb,
		generated.ExpirableSemaphoreAcquireKeys{Sem: s.k.name, Timeouts: s.k.timeouts, Channel: s.k.channel, Claim: s.k.claim},
		generated.ExpirableSemaphoreAcquireArgs{LeaseMS: leaseMS, Publish: s.b.publish, Waiter: waiter, ClaimMS: claimMS, IDs: ids})
}

func (s expOps) release(ctx context.Context, req string, ids ...[]byte) (int64, error) {
	return generated.ExpirableSemaphoreRelease(ctx, s.b.rdb,
		generated.ExpirableSemaphoreReleaseKeys{Sem: s.k.name, Timeouts: s.k.timeouts, Channel: s.k.channel, Request: req},
		generated.ExpirableSemaphoreReleaseArgs{LatchMS: latchMS, Publish: s.b.publish, IDs: ids})
}

func (s expOps) extend(ctx context.Context, leaseMS int64, ids ...[]byte) (int64, error) {
	return generated.ExpirableSemaphoreExtend(ctx, s.b.rdb,
		generated.ExpirableSemaphoreExtendKeys{Sem: s.k.name, Timeouts: s.k.timeouts, Channel: s.k.channel},
		generated.ExpirableSemaphoreExtendArgs{LeaseMS: leaseMS, Publish: s.b.publish, IDs: ids})
}

// available returns {available, held}.
func (s expOps) available(t *testing.T, ctx context.Context) (int64, int64) {
	t.Helper()
	v, err := generated.ExpirableSemaphoreAvailable(ctx, s.b.rdb,
		generated.ExpirableSemaphoreAvailableKeys{Sem: s.k.name, Timeouts: s.k.timeouts, Channel: s.k.channel},
		generated.ExpirableSemaphoreAvailableArgs{Publish: s.b.publish})
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 2 {
		t.Fatalf("available replied %v, want 2 numbers", v)
	}
	return v[0], v[1]
}

func (s expOps) plain() semOps { return semOps(s) }

// score reads a permit's deadline; -1 when the id is not in the zset.
func (s expOps) score(t *testing.T, id []byte) int64 {
	t.Helper()
	v, err := s.b.rdb.ZScore(context.Background(), s.k.timeouts, string(id)).Result()
	if err != nil {
		return -1
	}
	return int64(v)
}

// TestExpirable_layout: permits in Redisson 4.x's layout: N counts the
// available permits, sfx(N, "timeout") maps each id (16 raw bytes, not hex
// text) to its deadline in epoch ms from Redis's clock, "never" is
// 922337203685477, the zset takes N's TTL, release publishes the new count.
func TestExpirable_layout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, braced := range []bool{false, true} {
			t.Run(map[bool]string{false: "plain", true: "braced"}[braced], func(t *testing.T) {
				c := ctx(t)
				s := expOps{b, newSemKeys(uniqueName(t, braced))}
				a, id1, id2, id3 := newID(), newID(), newID(), newID()

				// Nothing to take before trySetPermits.
				expect(t, "acquire on missing", -1)(s.acquire(c, 1000, a))
				expect(t, "trySetPermits", 1)(s.plain().trySet(c, 3, 0, requestKey(s.k.name)))
				msgs := listen(t, b, s.k.channel)

				before := redisNow(t, b, s.k.name)
				expect(t, "acquire 2", 0)(s.acquire(c, 60_000, id1, id2))
				after := redisNow(t, b, s.k.name)
				if v := get(t, b.rdb, s.k.name); v != "1" {
					t.Fatalf("N = %q, want 1", v)
				}
				members, err := b.rdb.ZRangeWithScores(c, s.k.timeouts, 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				if len(members) != 2 {
					t.Fatalf("lease zset %v, want 2 members", members)
				}
				for _, m := range members {
					id := m.Member.(string)
					if len(id) != 16 || (id != string(id1) && id != string(id2)) {
						t.Fatalf("member %q (%d bytes), want one of the raw ids %x, %x", id, len(id), id1, id2)
					}
					lo, hi := before.Add(60*time.Second).UnixMilli()-1, after.Add(60*time.Second).UnixMilli()+1
					if s := int64(m.Score); s < lo || s > hi {
						t.Fatalf("deadline %d, want within [%d, %d] (now + lease on Redis's clock)", s, lo, hi)
					}
				}
				if n := b.rdb.Exists(c, sfx(s.k.name, "timeout")).Val(); n != 1 {
					t.Fatal("the lease zset is not sfx(N, \"timeout\")")
				}
				if n := b.rdb.ZScore(c, s.k.timeouts, hex.EncodeToString(id1)).Err(); n == nil {
					t.Fatal("an id stored as hex text (3.16's encoding)")
				}

				// No lease: Redisson's "never" score.
				expect(t, "acquire without lease", 0)(s.acquire(c, 0, id3))
				if sc := s.score(t, id3); sc != never {
					t.Fatalf("score without lease = %d, want %d", sc, never)
				}
				// Nothing left: the reply is the time to the nearest deadline.
				wait := must(t)(s.acquire(c, 1000, newID()))
				if wait < 50_000 || wait > 60_000 {
					t.Fatalf("failed acquire replied %d, want the ms to the nearest deadline (about 60000)", wait)
				}
				msgs.none(t, 50*time.Millisecond)

				expect(t, "release id1", 1)(s.release(c, requestKey(s.k.name), id1))
				if m := msgs.next(t, timeout); m != "1" {
					t.Fatalf("release published %q, want the new count 1", m)
				}
				if s.score(t, id1) != -1 {
					t.Fatal("released id still in the zset")
				}
				av, held := s.available(t, c)
				if av != 1 || held != 2 {
					t.Fatalf("available, held = %d, %d; want 1, 2", av, held)
				}
				expect(t, "release id2+id3", 2)(s.release(c, requestKey(s.k.name), id2, id3))
				if m := msgs.next(t, timeout); m != "3" {
					t.Fatalf("release published %q, want 3", m)
				}
				if n := b.rdb.Exists(c, s.k.timeouts).Val(); n != 0 {
					t.Fatal("an empty lease zset is left")
				}
			})
		}
	})
}

// TestExpirable_ttl: a semaphore with a TTL gives it to the lease zset.
func TestExpirable_ttl(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := expOps{b, newSemKeys(uniqueName(t, false))}
		expect(t, "trySetPermits", 1)(s.plain().trySet(c, 2, 60_000, requestKey(s.k.name)))
		expect(t, "acquire", 0)(s.acquire(c, 1000, newID()))
		if d := pttl(t, b.rdb, s.k.timeouts); d <= 50*time.Second || d > 60*time.Second {
			t.Fatalf("PTTL of the lease zset = %v, want N's (about 60s)", d)
		}
	})
}

// TestExpirable_releaseAllOrNothing: a release naming any permit that is not
// held (never taken, released, expired) releases none of them.
func TestExpirable_releaseAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := expOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.plain().trySet(c, 2, 0, requestKey(s.k.name)))
		id1, id2 := newID(), newID()
		expect(t, "acquire", 0)(s.acquire(c, 60_000, id1, id2))
		before := dump(t, b.rdb, s.k.name, s.k.timeouts)
		expect(t, "release with a stranger", 0)(s.release(c, requestKey(s.k.name), id1, newID()))
		if after := dump(t, b.rdb, s.k.name, s.k.timeouts); after != before {
			t.Fatalf("a refused release changed state:\nbefore %s\nafter  %s", before, after)
		}
		expect(t, "release", 2)(s.release(c, requestKey(s.k.name), id1, id2))
		expect(t, "release again (new request)", 0)(s.release(c, requestKey(s.k.name), id1))
	})
}

// TestExpirable_badInput: bad ids and arguments are error replies and
// change nothing.
func TestExpirable_badInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := expOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.plain().trySet(c, 3, 0, requestKey(s.k.name)))
		held := newID()
		expect(t, "acquire", 0)(s.acquire(c, 60_000, held))
		msgs := listen(t, b, s.k.channel)
		req := requestKey(s.k.name)
		before := dump(t, b.rdb, s.k.name, s.k.timeouts, req)
		hexID := []byte(hex.EncodeToString(newID()))
		dup := newID()
		bad := s
		bad.b.publish = ""
		cases := []struct {
			name string
			call func() (int64, error)
			want string
		}{
			{"acquire no id", func() (int64, error) { return s.acquire(c, 1000) }, "at least one permit id"},
			{"acquire hex id", func() (int64, error) { return s.acquire(c, 1000, hexID) }, "16 bytes"},
			{"acquire short id", func() (int64, error) { return s.acquire(c, 1000, []byte("abc")) }, "16 bytes"},
			{"acquire dup", func() (int64, error) { return s.acquire(c, 1000, dup, dup) }, "distinct"},
			{"acquire negative lease", func() (int64, error) { return s.acquire(c, -1, newID()) }, "lease_ms must be"},
			{"acquire never lease", func() (int64, error) { return s.acquire(c, never, newID()) }, "lease_ms must be"},
			{"acquire publish", func() (int64, error) { return bad.acquire(c, 1000, newID()) }, "publish must be"},
			{"acquire partly held", func() (int64, error) { return s.acquire(c, 1000, held, newID()) }, "held already"},
			{"release no id", func() (int64, error) { return s.release(c, req) }, "at least one permit id"},
			{"release hex id", func() (int64, error) { return s.release(c, req, hexID) }, "16 bytes"},
			{"release dup", func() (int64, error) { return s.release(c, req, held, held) }, "distinct"},
			{"extend no id", func() (int64, error) { return s.extend(c, 1000) }, "at least one permit id"},
			{"extend negative", func() (int64, error) { return s.extend(c, -5, held) }, "lease_ms must be"},
		}
		for _, tc := range cases {
			_, err := tc.call()
			wantErr(t, err, tc.want)
		}
		if after := dump(t, b.rdb, s.k.name, s.k.timeouts, req); after != before {
			t.Fatalf("state changed by refused calls:\nbefore %s\nafter  %s", before, after)
		}
		msgs.none(t, 100*time.Millisecond)
	})
}

// TestExpirable_resent: an acquire sent again with the same ids takes
// nothing more, and sets their deadlines again from its own time (the
// caller counts the lease from the resend); a release sent again with its
// request id replays "released" instead of "not held"; an extend sent
// again sets the same lease.
func TestExpirable_resent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := expOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.plain().trySet(c, 3, 0, requestKey(s.k.name)))
		id1, id2 := newID(), newID()
		expect(t, "acquire", 0)(s.acquire(c, 60_000, id1, id2))
		first := b.rdb.ZScore(c, s.k.timeouts, string(id1)).Val()
		const gap = 20 * time.Millisecond
		time.Sleep(gap) // Redis's TIME moves on at least as much
		expect(t, "acquire resent", 0)(s.acquire(c, 60_000, id1, id2))
		if av, held := s.available(t, c); av != 1 || held != 2 {
			t.Fatalf("available, held = %d, %d after a resent acquire; want 1, 2", av, held)
		}
		for _, id := range [][]byte{id1, id2} {
			if again := b.rdb.ZScore(c, s.k.timeouts, string(id)).Val(); again < first+float64(gap.Milliseconds()) {
				t.Fatalf("deadline after a resend %v later = %.0f, the first send's %.0f: want it set again from the resend's time", gap, again, first)
			}
		}
		expect(t, "extend", 2)(s.extend(c, 120_000, id1, id2))
		expect(t, "extend resent", 2)(s.extend(c, 120_000, id1, id2))
		req := requestKey(s.k.name)
		expect(t, "release", 2)(s.release(c, req, id1, id2))
		expect(t, "release resent", 2)(s.release(c, req, id1, id2))
		if av, held := s.available(t, c); av != 3 || held != 0 {
			t.Fatalf("available, held = %d, %d after a resent release; want 3, 0", av, held)
		}
	})
}

// TestExpirable_expiredReturn: a holder that stops renewing (dead) loses
// its permits at their deadline; the next call by anyone gives them back
// and publishes the new count, an extend cannot revive them, a release by
// the dead holder's id finds nothing. miniredis's clock is moved; the real
// servers wait out a 300 ms lease, measured on Redis's clock.
func TestExpirable_expiredReturn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := expOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.plain().trySet(c, 2, 0, requestKey(s.k.name)))
		const lease = 300
		var start time.Time
		if b.mini != nil {
			start = time.Now()
			b.mini.SetTime(start)
		} else {
			start = redisNow(t, b, s.k.name)
		}
		dead, alive, forever := newID(), newID(), newID()
		expect(t, "dead holder acquires", 0)(s.acquire(c, lease, dead))
		expect(t, "live holder acquires", 0)(s.acquire(c, 60_000, alive))
		wait := must(t)(s.acquire(c, 60_000, forever))
		if wait < 1 || wait > lease {
			t.Fatalf("failed acquire replied %d, want the ms to the dead holder's deadline (1..%d)", wait, lease)
		}
		msgs := listen(t, b, s.k.channel)

		if b.mini != nil {
			b.mini.SetTime(start.Add(lease*time.Millisecond + time.Millisecond))
		} else {
			for redisNow(t, b, s.k.name).Sub(start) <= lease*time.Millisecond {
				time.Sleep(20 * time.Millisecond)
			}
		}
		expect(t, "extend the expired permit", 0)(s.extend(c, 60_000, dead))
		if m := msgs.next(t, timeout); m != "1" {
			t.Fatalf("reclaim published %q, want the new count 1", m)
		}
		if s.score(t, dead) != -1 {
			t.Fatal("the expired permit is still in the zset")
		}
		expect(t, "dead holder's release", 0)(s.release(c, requestKey(s.k.name), dead))
		expect(t, "another holder takes it", 0)(s.acquire(c, 60_000, forever))
		if av, held := s.available(t, c); av != 0 || held != 2 {
			t.Fatalf("available, held = %d, %d; want 0, 2", av, held)
		}
	})
}

// TestExpirable_overSubscription: holders take 1 or 2 permits under short
// leases, some of them "die" (never release); their permits come back at
// the deadline. The holders that release count permits in use: never more
// than P counting the dead ones' unexpired permits (Redis's clock), and at
// the end, once every lease has passed, exactly P are available. Lost
// replies are resent. Bounded: 400 acquisitions or 20 s.
func TestExpirable_overSubscription(t *testing.T) {
	const (
		permits   = 4
		holders   = 8
		total     = 400
		timeLimit = 20 * time.Second
		lease     = 200
	)
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := expOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.plain().trySet(c, permits, 0, requestKey(s.k.name)))
		lostRel := &lostReply{sha: generated.ExpirableSemaphoreReleaseSHA1}
		lostAcq := &lostReply{sha: generated.ExpirableSemaphoreAcquireSHA1}
		b.rdb.AddHook(lostRel)
		b.rdb.AddHook(lostAcq)

		var done, resent, died, over atomic.Int64
		deadline := time.Now().Add(timeLimit)
		errs := make(chan error, holders)
		var wg sync.WaitGroup
		for g := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 11))
				for done.Load() < total && time.Now().Before(deadline) {
					n := 1 + r.IntN(2)
					ids := make([][]byte, n)
					for i := range ids {
						ids[i] = newID()
					}
					if r.IntN(8) == 0 {
						lostAcq.armed.Store(true)
					}
					got, err := s.acquire(c, lease, ids...)
					for errors.Is(err, errLost) {
						resent.Add(1)
						got, err = s.acquire(c, lease, ids...)
					}
					if err != nil {
						errs <- err
						return
					}
					if got != 0 {
						time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
						continue
					}
					// In use now, by Redis's count: the zset's members. It
					// never exceeds P, dead holders' permits included.
					if held := b.rdb.ZCard(c, s.k.timeouts).Val(); held > permits {
						over.Add(1)
					}
					if r.IntN(20) == 0 {
						died.Add(1)
						done.Add(1)
						continue // dies holding its permits
					}
					time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
					if r.IntN(8) == 0 {
						lostRel.armed.Store(true)
					}
					req := requestKey(s.k.name)
					rel, err := s.release(c, req, ids...)
					for errors.Is(err, errLost) {
						resent.Add(1)
						rel, err = s.release(c, req, ids...)
					}
					if err != nil {
						errs <- err
						return
					}
					if rel != int64(n) && rel != 0 {
						errs <- errors.New("release replied a count other than its ids'")
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
		t.Logf("%d acquisitions, %d died holding, %d resent calls", done.Load(), died.Load(), resent.Load())
		if over.Load() > 0 {
			t.Fatalf("%d times more than %d permits held", over.Load(), permits)
		}
		if done.Load() < 100 || died.Load() == 0 || resent.Load() == 0 {
			t.Fatalf("too little exercised: %d acquisitions, %d deaths, %d resends", done.Load(), died.Load(), resent.Load())
		}
		if b.mini != nil {
			b.mini.SetTime(time.Now().Add(time.Hour))
		} else {
			time.Sleep(lease*time.Millisecond + 50*time.Millisecond)
		}
		if av, held := s.available(t, c); av != permits || held != 0 {
			t.Fatalf("available, held = %d, %d at the end; want %d, 0", av, held, permits)
		}
	})
}
