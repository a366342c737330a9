package sem

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSemaphore_claim: a waiter for 3 permits that is refused takes the
// claim "3:waiter" and is told so (reply 2, other refusals 0); from then
// on others' acquisitions must leave 3 available, another waiter does not
// take the claim over, the claimer's success deletes it, and only the
// claimer can give it up.
func TestSemaphore_claim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := semOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.trySet(c, 2, 0, requestKey(s.k.name)))

		expect(t, "big waiter refused, holding the claim", 2)(s.acquireAs(c, 3, requestKey(s.k.name), "big", 5000))
		if v := get(t, b.rdb, s.k.claim); v != "3:big" {
			t.Fatalf("claim = %q, want 3:big", v)
		}
		if d := pttl(t, b.rdb, s.k.claim); d <= 0 || d > 5*time.Second {
			t.Fatalf("claim PTTL %v, want (0, 5s]", d)
		}
		// Others may not dip into the claimed permits.
		expect(t, "small single try", 0)(s.acquire(c, 1, requestKey(s.k.name)))
		expect(t, "small waiter", 0)(s.acquireAs(c, 1, requestKey(s.k.name), "small", 5000))
		if v := get(t, b.rdb, s.k.claim); v != "3:big" {
			t.Fatalf("claim = %q after another waiter's refusal, want 3:big", v)
		}
		expect(t, "big waiter refreshing its claim", 2)(s.acquireAs(c, 3, requestKey(s.k.name), "big", 5000))
		must(t)(s.release(c, 1, requestKey(s.k.name)))
		expect(t, "small after a release", 0)(s.acquireAs(c, 1, requestKey(s.k.name), "small", 5000))
		must(t)(s.release(c, 1, requestKey(s.k.name))) // 4 available, 3 claimed
		expect(t, "small beside the claim", 1)(s.acquireAs(c, 1, requestKey(s.k.name), "small", 5000))
		expect(t, "big", 1)(s.acquireAs(c, 3, requestKey(s.k.name), "big", 5000))
		if n := b.rdb.Exists(c, s.k.claim).Val(); n != 0 {
			t.Fatal("the claimer's success left its claim")
		}

		// Giving up: only the claimer deletes its claim.
		expect(t, "big2 refused", 2)(s.acquireAs(c, 2, requestKey(s.k.name), "big2", 5000))
		expect(t, "unclaim by another", 0)(s.unclaim(c, "small"))
		expect(t, "unclaim by the claimer", 1)(s.unclaim(c, "big2"))
		expect(t, "unclaim again", 0)(s.unclaim(c, "big2"))
		if n := b.rdb.Exists(c, s.k.claim).Val(); n != 0 {
			t.Fatal("claim left after unclaim")
		}

		// A dead claimer's claim lapses at its TTL.
		expect(t, "big3 refused", 2)(s.acquireAs(c, 5, requestKey(s.k.name), "big3", 200))
		must(t)(s.release(c, 1, requestKey(s.k.name)))
		expect(t, "small while claimed", 0)(s.acquire(c, 1, requestKey(s.k.name)))
		if b.mini != nil {
			b.mini.FastForward(time.Second)
		} else {
			time.Sleep(300 * time.Millisecond)
		}
		expect(t, "small after the claim lapsed", 1)(s.acquire(c, 1, requestKey(s.k.name)))

		// The largest request waiting wins the claim; equal or smaller ones
		// do not take it over.
		must(t)(s.drain(c, requestKey(s.k.name)))
		for _, step := range []struct {
			waiter string
			n      int64
			want   string
			reply  int64 // 2: the refused waiter holds the claim
		}{{"s1", 1, "1:s1", 2}, {"s2", 1, "1:s1", 0}, {"b1", 3, "3:b1", 2}, {"m1", 2, "3:b1", 0}, {"b2", 3, "3:b1", 0}, {"b3", 4, "4:b3", 2}, {"b3", 4, "4:b3", 2}} {
			expect(t, "refused "+step.waiter, step.reply)(s.acquireAs(c, step.n, requestKey(s.k.name), step.waiter, 5000))
			if v := get(t, b.rdb, s.k.claim); v != step.want {
				t.Fatalf("claim = %q after %s (%d) was refused, want %q", v, step.waiter, step.n, step.want)
			}
		}
	})
}

// TestExpirable_claim: the permit-expirable semaphore honours the same
// claim and tells a refused claimer so (-2 - the hint, -2 with none).
func TestExpirable_claim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		s := expOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.plain().trySet(c, 1, 0, requestKey(s.k.name)))
		big := [][]byte{newID(), newID()}
		if v := must(t)(s.acquireAs(c, "big", 5000, 60_000, big...)); v != -2 {
			t.Fatalf("big refused with no held permit: %d, want -2 (claimer, no deadline)", v)
		}
		if v := get(t, b.rdb, s.k.claim); v != "2:big" {
			t.Fatalf("claim = %q, want 2:big", v)
		}
		if v := must(t)(s.acquire(c, 60_000, newID())); v != -1 {
			t.Fatalf("a single try beside the claim: %d, want -1 (refused, no deadline)", v)
		}
		if v := must(t)(s.acquireAs(c, "small", 5000, 60_000, newID())); v != -1 {
			t.Fatalf("a smaller waiter beside the claim: %d, want -1 (refused, not the claimer)", v)
		}
		must(t)(s.plain().release(c, 1, requestKey(s.k.name)))
		expect(t, "big", 0)(s.acquireAs(c, "big", 5000, 60_000, big...))
		if n := b.rdb.Exists(c, s.k.claim).Val(); n != 0 {
			t.Fatal("the claimer's success left its claim")
		}
		// Refused beside permits held under a lease: the claimer gets the
		// nearest deadline as -2 - ms, another waiter as ms.
		if v := must(t)(s.acquireAs(c, "big", 5000, 60_000, newID())); v > -2-59_000 || v < -2-60_000 {
			t.Fatalf("claimer refused beside leased permits: %d, want -2 - (59000..60000]", v)
		}
		if v := must(t)(s.acquireAs(c, "other", 5000, 60_000, newID())); v < 59_000 || v > 60_000 {
			t.Fatalf("another waiter refused beside leased permits: %d, want (59000..60000]", v)
		}
	})
}

// TestSemaphore_claimStarvation: eight holders cycle through 4 permits one
// at a time, re-acquiring at once, while one waiter wants all 4. Without
// the claim (Redisson's behaviour) the small holders overtake the big
// waiter hundreds of times per round (measured: about 300); with it, a
// round sees at most the holders already in flight or claiming before it
// (bound: holders + permits), 5 rounds in a row. Bounded: 10 s.
func TestSemaphore_claimStarvation(t *testing.T) {
	const permits, smallHolders, bigRounds, limit = 4, 8, 5, 10 * time.Second
	const claimMS = 1000
	forEachBackend(t, func(t *testing.T, b backend) {
		c, cancel := context.WithTimeout(context.Background(), limit+5*time.Second)
		defer cancel()
		s := semOps{b, newSemKeys(uniqueName(t, false))}
		must(t)(s.trySet(c, permits, 0, requestKey(s.k.name)))
		var stop atomic.Bool
		var small atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, smallHolders)
		for g := range smallHolders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				waiter := fmt.Sprintf("small%d", g)
				for !stop.Load() {
					got, err := s.acquireAs(c, 1, requestKey(s.k.name), waiter, claimMS)
					if err != nil {
						errs <- err
						return
					}
					if got != 1 {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					small.Add(1)
					time.Sleep(time.Millisecond)
					if _, err := s.release(c, 1, requestKey(s.k.name)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		// The big waiter starts once the small holders are cycling.
		for warmUntil := time.Now().Add(limit); small.Load() < 50 && time.Now().Before(warmUntil); {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		deadline := start.Add(limit)
		var overtakes []int64
		for len(overtakes) < bigRounds && time.Now().Before(deadline) {
			before := small.Load()
			for time.Now().Before(deadline) {
				got, err := s.acquireAs(c, permits, requestKey(s.k.name), "big", claimMS)
				if err != nil {
					t.Fatal(err)
				}
				if got == 1 {
					overtakes = append(overtakes, small.Load()-before)
					if _, err := s.release(c, permits, requestKey(s.k.name)); err != nil {
						t.Fatal(err)
					}
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
			time.Sleep(5 * time.Millisecond) // let the small holders cycle
		}
		stop.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("big waiter: %d rounds in %v, overtaken %v times per round; small holders: %d acquisitions", len(overtakes), time.Since(start).Round(time.Millisecond), overtakes, small.Load())
		if len(overtakes) < bigRounds {
			t.Fatalf("the waiter for %d permits got them %d times in %v, want %d: starved", permits, len(overtakes), limit, bigRounds)
		}
		for _, n := range overtakes {
			if n > smallHolders+permits {
				t.Fatalf("overtaken %d times in one round, want at most %d", n, smallHolders+permits)
			}
		}
	})
}
