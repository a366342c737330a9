package fair_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// fairReleaseWait is fairRelease with the caller's wait budget.
func fairReleaseWait(ctx context.Context, rdb redis.UniversalClient, k fairKeys, field string, leaseMS, waitMS int64) (*int64, error) {
	req := "ft:" + strconv.FormatInt(reqs.Add(1), 10)
	return generated.FairRelease(ctx, rdb,
		generated.FairReleaseKeys{Lock: k.lock, Queue: k.queue, Timeouts: k.timeouts, Channel: k.channel,
			Latch: "redisson_unlock_latch:" + k.tagged + ":" + req},
		generated.FairReleaseArgs{LeaseMS: leaseMS, Field: field, LatchMS: testLatch.Milliseconds(), WaitMS: waitMS, Publish: "publish"})
}

// simCase is one run of the live-waiter simulation.
type simCase struct {
	waitMS, leaseMS int64 // wait budget, and the lease the watchdog renews every lease/3
	firstHoldMS     int64 // how long the first holder holds
	holdMS          int64 // how long every later holder holds
	dead            []int // indexes (in arrival order) of waiters that ask once and die
	leave           []int // indexes of waiters that give up (run the leave script) at leaveAtMS
	leaveAtMS       int64
	waiters         int
}

// TestFairAcquire_liveWaitersNeverPurged drives the fair scripts on a
// miniredis clock that the test moves, with waiters that behave as the
// runtime does when every pub/sub message is lost: a live waiter asks
// again after the wait the script told it (250ms when told "wait 0"), and
// at most FairWait/2 later. Some waiters die after their first ask. A live
// waiter must never be purged from the queue (it would lose its place:
// FIFO broken), and the live waiters must get the lock in their order of
// arrival. A waiter chained behind a dead one used to end up with a
// deadline equal to its next ask after a handoff, and was purged then.
func TestFairAcquire_liveWaitersNeverPurged(t *testing.T) {
	t.Parallel()
	// -short: one budget and one first hold, with every pattern of dead
	// and leaving waiters and every leave time (19 of the 114 cases).
	waits, firsts := []int64{1000, 4000}, []int64{1000, 3000, 8500}
	if testing.Short() {
		waits, firsts = waits[:1], firsts[1:2]
	}
	var cases []simCase
	for _, wait := range waits {
		for _, first := range firsts {
			for _, dead := range [][]int{{1}, {0, 2}, {1, 2}} {
				cases = append(cases, simCase{waitMS: wait, leaseMS: 1500, firstHoldMS: first, holdMS: 700, dead: dead, waiters: 4})
			}
			// Waiters ahead give up: those behind move up without being told.
			for _, lc := range []struct{ leave, dead []int }{{[]int{0}, []int{1}}, {[]int{0, 3}, []int{1}}, {[]int{1}, []int{2}}, {[]int{2}, []int{0}}} {
				for _, at := range []int64{first / 2, first - 100, first + wait/4, first + 2*wait/3} {
					cases = append(cases, simCase{waitMS: wait, leaseMS: 1500, firstHoldMS: first, holdMS: 700,
						dead: lc.dead, leave: lc.leave, leaveAtMS: at, waiters: 6})
				}
			}
		}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("wait%d_first%d_dead%v_leave%v@%d", c.waitMS, c.firstHoldMS, c.dead, c.leave, c.leaveAtMS), func(t *testing.T) {
			simulate(t, c)
		})
	}
}

func simulate(t *testing.T, c simCase) {
	clk := drivenClock(t)
	rdb := clk.rdb
	ctx := context.Background()
	k := keysOf(backends.UniqueName(t))
	now := func() int64 { return clk.now - clk.t0 }

	type waiter struct {
		field    string
		dead     bool
		leaves   bool
		nextAsk  int64 // sim ms; -1: no longer asking
		acquired bool
	}
	ws := make([]*waiter, c.waiters)
	var liveOrder []string
	for i := range ws {
		ws[i] = &waiter{field: "sim:" + strconv.Itoa(i), dead: slices.Contains(c.dead, i), leaves: slices.Contains(c.leave, i), nextAsk: 10 * int64(i+1)}
		if !ws[i].dead && !ws[i].leaves {
			liveOrder = append(liveOrder, ws[i].field)
		}
	}
	// The runtime's timer: 250ms when told "wait 0" (1ms), else the wait
	// told (+1ms, at least 10ms); never more than half the budget.
	retry := func(reply int64) int64 {
		if reply <= 1 {
			return min(250, c.waitMS/2)
		}
		return min(max(reply+1, 10), c.waitMS/2)
	}

	holder, heldUntil, nextRenew := "sim:holder", c.firstHoldMS, c.leaseMS/3
	if r, err := fairAcquire(ctx, rdb, k, holder, c.leaseMS, c.waitMS); err != nil || r != nil {
		t.Fatalf("holder acquire = %v, %v", ptrString(r), err)
	}
	var got []string
	const tick, limit = 10, 120_000
	for now() < limit && len(got) < len(liveOrder) {
		clk.advance(tick * time.Millisecond)
		if holder != "" && now() >= heldUntil {
			if r, err := fairReleaseWait(ctx, rdb, k, holder, c.leaseMS, c.waitMS); err != nil || r == nil || *r != 1 {
				t.Fatalf("t=%dms: %s release = %v, %v; want 1", now(), holder, ptrString(r), err)
			}
			holder = ""
		}
		if holder != "" && now() >= nextRenew {
			if r, err := fairAcquire(ctx, rdb, k, holder, c.leaseMS, c.waitMS); err != nil || r != nil {
				t.Fatalf("t=%dms: %s renewal = %v, %v; want held", now(), holder, ptrString(r), err)
			}
			nextRenew = now() + c.leaseMS/3
		}
		for _, w := range ws {
			if w.leaves && !w.acquired && w.nextAsk >= 0 && now() >= c.leaveAtMS {
				if _, err := fairLeave(ctx, rdb, k, w.field, c.waitMS); err != nil {
					t.Fatalf("t=%dms: %s leaves: %v", now(), w.field, err)
				}
				w.nextAsk = -1
			}
			if w.nextAsk < 0 || now() < w.nextAsk {
				continue
			}
			r, err := fairAcquire(ctx, rdb, k, w.field, c.leaseMS, c.waitMS)
			if err != nil {
				t.Fatalf("t=%dms: %s asks: %v", now(), w.field, err)
			}
			switch {
			case r == nil && holder != "":
				t.Fatalf("t=%dms: %s acquired while %s holds the lock", now(), w.field, holder)
			case r == nil:
				w.acquired, w.nextAsk = true, -1
				if !w.leaves {
					got = append(got, w.field)
				}
				holder, heldUntil, nextRenew = w.field, now()+c.holdMS, now()+c.leaseMS/3
			case w.dead:
				w.nextAsk = -1
			default:
				w.nextAsk = now() + retry(*r)
			}
		}
		// Every live waiter that asked and has not got the lock is queued,
		// in its order of arrival.
		s := mustSnapshot(t, rdb, k)
		var queued []string
		for i, w := range ws {
			if w.dead || w.leaves || w.acquired || now() <= 10*int64(i+1) {
				continue
			}
			if !slices.Contains(s.queue, w.field) {
				t.Fatalf("t=%dms: live waiter %s was purged from the queue %q (deadlines %v)", now(), w.field, s.queue, s.scores)
			}
			queued = append(queued, w.field)
		}
		live := slices.DeleteFunc(slices.Clone(s.queue), func(f string) bool { return !slices.Contains(queued, f) })
		if !slices.Equal(live, queued) {
			t.Fatalf("t=%dms: live waiters queued as %q, want their arrival order %q", now(), live, queued)
		}
	}
	if !slices.Equal(got, liveOrder) {
		t.Fatalf("acquisition order %q, want arrival order %q", got, liveOrder)
	}
}
