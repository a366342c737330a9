package sem

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// TestMultiLock_allOrNothing: a member held elsewhere fails the whole
// TryLock, and the members it took are free again; Unlock releases every
// member.
func TestMultiLock_allOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		cl := newClient(t, b, lualock.Options{})
		base := uniqueName(t, false)
		a, bb, z := cl.NewLock(base+"a"), cl.NewLock(base+"b"), cl.NewLock(base+"c")
		m := cl.NewMultiLock(z, a, bb)
		if got := m.Locks(); got[0] != a || got[1] != bb || got[2] != z {
			t.Fatal("members not sorted by name")
		}
		other := cl.NewLock(base + "c")
		if err := other.Lock(c); err != nil {
			t.Fatal(err)
		}
		if err := m.TryLock(c, 100*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
			t.Fatalf("TryLock with a member held: %v, want ErrNotObtained", err)
		}
		for _, l := range []*lualock.Lock{a, bb} {
			if held, err := l.IsLocked(c); err != nil || held {
				t.Fatalf("%s locked after the failed TryLock (%v)", l.Name(), err)
			}
		}
		if err := other.Unlock(c); err != nil {
			t.Fatal(err)
		}
		if err := m.TryLock(c, time.Second); err != nil {
			t.Fatal(err)
		}
		for _, l := range m.Locks() {
			if n, err := l.HoldCount(c); err != nil || n != 1 {
				t.Fatalf("%s hold count %d (%v), want 1", l.Name(), n, err)
			}
		}
		if err := m.Unlock(c); err != nil {
			t.Fatal(err)
		}
		for _, l := range m.Locks() {
			if held, _ := l.IsLocked(c); held {
				t.Fatalf("%s still locked after Unlock", l.Name())
			}
		}
		if err := m.Unlock(c); !errors.Is(err, lualock.ErrNotHeld) {
			t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
		}
		if err := cl.NewMultiLock(a, a).TryLock(c, 0); !errors.Is(err, lualock.ErrInvalid) {
			t.Fatalf("a lock given twice: %v, want ErrInvalid", err)
		}
		if err := cl.NewMultiLock().Lock(c); !errors.Is(err, lualock.ErrInvalid) {
			t.Fatalf("no locks: %v, want ErrInvalid", err)
		}
	})
}

// TestMultiLock_exclusion: goroutines of two clients take multi-locks over
// the same three names given in different orders (one fixed order inside,
// so no two hold a part each and wait forever), 60 holds in all: no two
// holds overlap. Bounded: 60 s.
func TestMultiLock_exclusion(t *testing.T) {
	const workers, total = 6, 60
	forEachBackend(t, func(t *testing.T, b backend) {
		c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		base := uniqueName(t, false)
		names := []string{base + "x", base + "y", base + "z"}
		clients := []*lualock.Client{newClient(t, b, lualock.Options{}), newClient(t, b, lualock.Options{})}
		var inside, overlaps, done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := clients[w%2]
				order := []string{names[w%3], names[(w+1)%3], names[(w+2)%3]}
				if w%2 == 1 {
					order[0], order[2] = order[2], order[0]
				}
				var locks []*lualock.Lock
				for _, n := range order {
					locks = append(locks, cl.NewLock(n))
				}
				m := cl.NewMultiLock(locks...)
				for done.Add(1) <= total {
					if err := m.Lock(c); err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					time.Sleep(200 * time.Microsecond)
					inside.Add(-1)
					if err := m.Unlock(c); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if overlaps.Load() != 0 {
			t.Fatalf("%d overlapping holds", overlaps.Load())
		}
	})
}

// TestMultiLock_twoDeployments: members on two independent Redis servers
// (two miniredis), all or nothing across them.
func TestMultiLock_twoDeployments(t *testing.T) {
	c := ctx(t)
	var clients []*lualock.Client
	for range 2 {
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		clients = append(clients, newClient(t, backend{rdb: rdb}, lualock.Options{}))
	}
	name := uniqueName(t, false)
	m := clients[0].NewMultiLock(clients[0].NewLock(name), clients[1].NewLock(name))
	blocker := clients[1].NewLock(name)
	if err := blocker.Lock(c); err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(c, 50*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock with the second deployment's member held: %v, want ErrNotObtained", err)
	}
	if held, _ := clients[0].NewLock(name).IsLocked(c); held {
		t.Fatal("the first deployment's member is still held after the failure")
	}
	if err := blocker.Unlock(c); err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(c, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(c); err != nil {
		t.Fatal(err)
	}
}

// TestMultiLock_reverseOrderForeign: a multi-lock of another client that
// takes the same two names in the other order, Redisson's way (it holds
// the first and waits for the second), is never stalled by a lualock
// MultiLock, which waits for a member only while it holds none: each of
// the foreign side's waits for its second member ends with the member
// (before, both sides could hold one member each and wait until a wait
// ran out). Bounded: 20 rounds each, 60 s.
func TestMultiLock_reverseOrderForeign(t *testing.T) {
	const rounds = 20
	forEachBackend(t, func(t *testing.T, b backend) {
		c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl := newClient(t, b, lualock.Options{})
		base := uniqueName(t, false)
		first, second := base+"a", base+"b"
		m := cl.NewMultiLock(cl.NewLock(first), cl.NewLock(second))
		foreign := newClient(t, b, lualock.Options{})
		fb, fa := foreign.NewLock(second), foreign.NewLock(first)
		var stalls atomic.Int32
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := m.TryLock(c, 20*time.Second); err != nil {
					t.Errorf("MultiLock: %v", err)
					return
				}
				_ = m.Unlock(c)
			}
		}()
		go func() {
			defer wg.Done()
			for range rounds {
				if err := fb.TryLock(c, 20*time.Second); err != nil {
					t.Errorf("foreign %s: %v", second, err)
					return
				}
				// Redisson's rule: hold the first member, wait for the next.
				if err := fa.TryLock(c, 5*time.Second); err != nil {
					stalls.Add(1)
				} else {
					_ = fa.Unlock(c)
				}
				_ = fb.Unlock(c)
			}
		}()
		wg.Wait()
		if n := stalls.Load(); n > 0 {
			t.Errorf("the foreign multi-lock's wait for its second member ran out %d times: the lualock MultiLock held a member while waiting", n)
		}
	})
}
