package lualock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/renew"
)

// expiryRecorder is a config.afterFunc that records when each timer it
// starts will fire, and starts it.
type expiryRecorder struct {
	mu    sync.Mutex
	fires []time.Time
}

func (r *expiryRecorder) afterFunc(d time.Duration, f func()) *time.Timer {
	r.mu.Lock()
	r.fires = append(r.fires, time.Now().Add(d))
	r.mu.Unlock()
	return time.AfterFunc(d, f)
}

func (r *expiryRecorder) last(t *testing.T) time.Time {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fires) == 0 {
		t.Fatal("no fixed-lease timer was started")
	}
	return r.fires[len(r.fires)-1]
}

// TestLifetime_fixedLease_lossMargin: a fixed lease, a Lock's or a
// Permit's alike, ends its holder's Context renew.LossMargin before Redis
// lets it go. Judged against Redis's own deadline, not by waiting: the
// moment the expiry timer fires must be at least the margin before the
// deadline Redis holds (a lock's PTTL, read after the acquisition; a
// permit's score in the timeout set, from Redis's TIME). A Permit's
// Context used to end at the lease itself, with no margin.
func TestLifetime_fixedLease_lossMargin(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	c, err := New(rdb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := &expiryRecorder{}
	c.cfg.afterFunc = rec.afterFunc
	ctx := context.Background()
	const lease = 10 * time.Second
	margin := renew.LossMargin(lease) // 102ms

	t.Run("lock", func(t *testing.T) {
		l := c.NewLock("lt-lock")
		if err := l.LockLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		fire := rec.last(t)
		// miniredis keeps a TTL until the test moves its clock: the lock
		// expires at the latest pttl after this read.
		pttl, err := rdb.PTTL(ctx, "lt-lock").Result()
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(pttl)
		if fire.After(deadline.Add(-margin)) {
			t.Errorf("the hold's Context ends %v before Redis's deadline, want at least the margin %v", deadline.Sub(fire), margin)
		}
	})

	// permitMargin checks that the last fixed-lease timer fires at least
	// the margin before the deadline Redis holds for permit p.
	permitMargin := func(t *testing.T, name string, p *Permit) {
		t.Helper()
		fire := rec.last(t)
		score, err := rdb.ZScore(ctx, keys.Suffix(name, "timeout"), string(p.id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.UnixMilli(int64(score)) // Redis's TIME when the lease was set + lease, in ms
		if fire.Truncate(time.Millisecond).After(deadline.Add(-margin)) {
			t.Errorf("the permit's Context ends %v before Redis's deadline (%s), want at least the margin %v",
				deadline.Sub(fire), strconv.FormatFloat(score, 'f', 0, 64), margin)
		}
	}

	t.Run("permit", func(t *testing.T) {
		s := c.NewPermitExpirableSemaphore("lt-permit")
		if _, err := s.TrySetPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		p, err := s.AcquireLease(ctx, lease)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		permitMargin(t, "lt-permit", p)
	})

	// A renewed permit given a fixed lease by UpdateLease leaves the
	// watchdog and keeps the margin too; once released, it has no lease
	// to update.
	t.Run("permit UpdateLease", func(t *testing.T) {
		s := c.NewPermitExpirableSemaphore("lt-update")
		if _, err := s.TrySetPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		p, err := s.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := c.Stats().Watched; n != 1 {
			t.Fatalf("%d watched before UpdateLease, want the permit", n)
		}
		if err := p.UpdateLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		if n := c.Stats().Watched; n != 0 {
			t.Errorf("%d watched after UpdateLease, want 0: a fixed lease is not renewed", n)
		}
		permitMargin(t, "lt-update", p)
		if err := p.UpdateLease(ctx, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("UpdateLease(0) = %v, want ErrInvalid", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.UpdateLease(ctx, lease); !errors.Is(err, ErrNotHeld) {
			t.Errorf("UpdateLease after Release = %v, want ErrNotHeld", err)
		}
		// A permit given back behind the handle's back: Redis says so.
		q, err := s.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseID(ctx, q.ID()); err != nil {
			t.Fatal(err)
		}
		if err := q.UpdateLease(ctx, lease); !errors.Is(err, ErrNotHeld) {
			t.Errorf("UpdateLease of a permit released by id = %v, want ErrNotHeld", err)
		}
		if !errors.Is(context.Cause(q.Context()), ErrNotHeld) {
			t.Errorf("its Context's cause %v, want ErrNotHeld", context.Cause(q.Context()))
		}
	})
}

// TestLifetime_end: the first cause stands, the end event runs once, and
// finish stops the expiry and takes the thing off the watchdog.
func TestLifetime_end(t *testing.T) {
	var ends []error
	env := &fakeHoldEnv{}
	lt := lifetime{onEnd: func(cause error, _ time.Time) { ends = append(ends, cause) }}
	lt.begin(time.Now())
	ctx := lt.context()
	lt.watch(fakeEntry{env})
	first, second := errors.New("first"), errors.New("second")
	lt.finish(first)
	lt.end(second)
	if got := context.Cause(ctx); got != first {
		t.Errorf("Context's cause %v, want the first", got)
	}
	if len(ends) != 1 || ends[0] != first {
		t.Errorf("end events %v, want one, with the first cause", ends)
	}
	if lt.watched || env.unrenewed != 1 {
		t.Errorf("after finish: watched %v, entry removed %d times; want off the watchdog once", lt.watched, env.unrenewed)
	}
	// A Context asked for after the end is already done, with the cause.
	lt2 := lifetime{}
	lt2.begin(time.Now())
	lt2.end(first)
	if got := context.Cause(lt2.context()); got != first {
		t.Errorf("late Context's cause %v, want the first", got)
	}
}
