package sem

// The watchdog renews the permits of a PermitExpirableSemaphore taken
// without a fixed lease (lua/expirable_semaphore_renew.lua), batched like
// the locks' renewals.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
)

// TestPermitRenew_batched: n permits of one semaphore (one slot) held by one
// client are renewed in one script call per round, and stay held over
// several leases; Client.Close ends them with ErrClosed.
func TestPermitRenew_batched(t *testing.T) {
	const (
		lease = 600 * time.Millisecond
		n     = 20
	)
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		var mu sync.Mutex
		most := 0 // the most permits one renewal call carried
		cl, err := lualock.New(b.rdb, lualock.Options{WatchdogLease: lease, Observer: lualock.Observer{
			Renew: func(ev lualock.RenewEvent) {
				mu.Lock()
				most = max(most, ev.Holds)
				if ev.Err != nil {
					t.Logf("renewal call: %v (%v)", ev.Err, ev.Took)
				}
				mu.Unlock()
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		closed := false
		t.Cleanup(func() {
			if !closed {
				_ = cl.Close()
			}
		})
		e := cl.NewPermitExpirableSemaphore(uniqueName(t, false))
		if _, err := e.TrySetPermits(c, n); err != nil {
			t.Fatal(err)
		}
		ps := make([]*lualock.Permit, n)
		for i := range ps {
			if ps[i], err = e.Acquire(c); err != nil {
				t.Fatal(err)
			}
		}
		if st := cl.Stats(); st.Watched != n {
			t.Fatalf("watchdog entries %d, want %d", st.Watched, n)
		}
		time.Sleep(3 * lease)
		for i, p := range ps {
			if p.Context().Err() != nil {
				t.Fatalf("permit %d ended: %v", i, context.Cause(p.Context()))
			}
		}
		if av, held, err := e.AvailablePermits(c); err != nil || av != 0 || held != n {
			t.Fatalf("available, held = %d, %d, %v after 3 leases; want 0, %d", av, held, err, n)
		}
		mu.Lock()
		got := most
		mu.Unlock()
		if got != n {
			t.Fatalf("the largest renewal call carried %d permits, want all %d in one", got, n)
		}
		if err := ps[0].Release(c); err != nil {
			t.Fatal(err)
		}
		if st := cl.Stats(); st.Watched != n-1 {
			t.Fatalf("watchdog entries %d after a Release, want %d", st.Watched, n-1)
		}
		closed = true
		if err := cl.Close(); err != nil {
			t.Fatal(err)
		}
		for i, p := range ps[1:] {
			select {
			case <-p.Done():
			case <-time.After(timeout):
				t.Fatalf("permit %d still live after Close", i+1)
			}
			if cause := context.Cause(p.Context()); !errors.Is(cause, lualock.ErrClosed) {
				t.Fatalf("permit %d cause after Close: %v, want ErrClosed", i+1, cause)
			}
		}
	})
}

// TestPermitRenew_script: one call renews the held permits of several
// semaphores of one slot, answers 0 for a permit not held, gives expired
// permits back once per semaphore, and refuses bad input.
func TestPermitRenew_script(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		base := uniqueName(t, true) // braced: both semaphores share a slot
		a, z := newSemKeys(base+"a"), newSemKeys(base+"z")
		held, gone, other := newID(), newID(), newID()
		for _, k := range []semKeys{a, z} {
			if err := b.rdb.Set(c, k.name, 0, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// held: a's permit with a far deadline; other: z's, expired.
		if err := b.rdb.ZAdd(c, a.timeouts, redis.Z{Score: 1 << 45, Member: held}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.rdb.ZAdd(c, z.timeouts, redis.Z{Score: 1, Member: other}).Err(); err != nil {
			t.Fatal(err)
		}
		run := func(ks []semKeys, ids [][]byte) ([]int64, error) {
			var keys []string
			for _, k := range ks {
				keys = append(keys, k.name, k.timeouts, k.channel)
			}
			return generated.ExpirableSemaphoreRenew(c, b.rdb, generated.ExpirableSemaphoreRenewKeys{Permits: keys},
				generated.ExpirableSemaphoreRenewArgs{LeaseMS: 60_000, Publish: b.publish, IDs: ids})
		}
		v, err := run([]semKeys{a, a, z}, [][]byte{held, gone, other})
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 3 || v[0] != 1 || v[1] != 0 || v[2] != 0 {
			t.Fatalf("renewed %v, want [1 0 0]", v)
		}
		if s, err := b.rdb.Get(c, z.name).Int(); err != nil || s != 1 {
			t.Fatalf("z's count %d, %v after its expired permit came back; want 1", s, err)
		}
		score, err := b.rdb.ZScore(c, a.timeouts, string(held)).Result()
		if err != nil || score >= 1<<45 {
			t.Fatalf("held permit's deadline %v, %v; want now+60s", score, err)
		}
		for _, bad := range [][][]byte{{held[:8]}, {}} {
			if _, err := run([]semKeys{a}, bad); err == nil {
				t.Fatalf("ids %q: no error", bad)
			}
		}
	})
}

// TestLatchAPI_noPolling: an Await with no message sends nothing for
// longer than a second (its fallback timer is Options.MaxWaitTimer, not
// a 1 s poll), and the count down's message still wakes it.
func TestLatchAPI_noPolling(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		// Added before the client: the hooks added after it do not see
		// its script calls (they go on its pipelined connection).
		h := &counter{}
		b.rdb.AddHook(h)
		cl := newClient(t, b, lualock.Options{MaxWaitTimer: 20 * time.Second})
		l := cl.NewCountDownLatch(uniqueName(t, false))
		if ok, err := l.TrySetCount(c, 1); err != nil || !ok {
			t.Fatalf("TrySetCount: %v %v", ok, err)
		}
		done := make(chan error, 1)
		go func() { done <- l.Await(c) }()
		time.Sleep(300 * time.Millisecond) // subscribed, first attempts made
		h.n.Store(0)
		time.Sleep(2500 * time.Millisecond)
		if n := h.n.Load(); n != 0 {
			t.Fatalf("an idle Await sent %d commands in 2.5 s, want 0", n)
		}
		if err := l.CountDown(c); err != nil {
			t.Fatal(err)
		}
		if h.n.Load() == 0 {
			t.Fatal("the hook saw none of the client's calls")
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(timeout):
			t.Fatal("Await not woken by the count down")
		}
	})
}
