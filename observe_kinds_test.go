package lualock_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lualock/lualock"
)

// obKind is one primitive of TestObserver_kinds: take makes one acquisition
// call of it and returns the owner its events must carry, end ends what it
// took (nil: nothing is held), and gone deletes its keys behind its back
// (nil: nothing is held).
type obKind struct {
	kind lualock.Kind
	name string
	take func(ctx context.Context, c *lualock.Client) (owner string, end func() error, err error)
	gone []string // the keys whose deletion loses what it holds
}

// obLock is a lock handle: a *Lock or a *FencedLock.
type obLock interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Field() string
}

// lockKind is an obKind of a lock handle.
func lockKind(kind lualock.Kind, name string, l func(c *lualock.Client) obLock) obKind {
	return obKind{kind: kind, name: name, gone: []string{name},
		take: func(ctx context.Context, c *lualock.Client) (string, func() error, error) {
			h := l(c)
			return h.Field(), func() error { return h.Unlock(ctx) }, h.Lock(ctx)
		}}
}

func obKinds() []obKind {
	return []obKind{
		lockKind(lualock.KindReentrant, "k-reentrant", func(c *lualock.Client) obLock { return c.NewLock("k-reentrant") }),
		lockKind(lualock.KindFair, "k-fair", func(c *lualock.Client) obLock { return c.NewFairLock("k-fair") }),
		lockKind(lualock.KindRead, "k-read", func(c *lualock.Client) obLock { return c.NewReadWriteLock("k-read").ReadLock() }),
		lockKind(lualock.KindWrite, "k-write", func(c *lualock.Client) obLock { return c.NewReadWriteLock("k-write").WriteLock() }),
		lockKind(lualock.KindFenced, "k-fenced", func(c *lualock.Client) obLock { return c.NewFencedLock("k-fenced") }),
		lockKind(lualock.KindSpin, "k-spin", func(c *lualock.Client) obLock { return c.NewSpinLock("k-spin") }),
		{kind: lualock.KindSemaphore, name: "k-semaphore",
			take: func(ctx context.Context, c *lualock.Client) (string, func() error, error) {
				s := c.NewSemaphore("k-semaphore")
				if _, err := s.TrySetPermits(ctx, 1); err != nil {
					return "", nil, err
				}
				return "", nil, s.Acquire(ctx, 1)
			}},
		{kind: lualock.KindPermit, name: "k-permit", gone: []string{"k-permit", "{k-permit}:timeout"},
			take: func(ctx context.Context, c *lualock.Client) (string, func() error, error) {
				s := c.NewPermitExpirableSemaphore("k-permit")
				if _, err := s.TrySetPermits(ctx, 1); err != nil {
					return "", nil, err
				}
				p, err := s.Acquire(ctx)
				if err != nil {
					return "", nil, err
				}
				return p.ID(), func() error { return p.Release(ctx) }, nil
			}},
		{kind: lualock.KindLatch, name: "k-latch",
			take: func(ctx context.Context, c *lualock.Client) (string, func() error, error) {
				return "", nil, c.NewCountDownLatch("k-latch").Await(ctx) // never set: open
			}},
		{kind: lualock.KindMultiLock, name: "k-m1+k-m2",
			take: func(ctx context.Context, c *lualock.Client) (string, func() error, error) {
				m := c.NewMultiLock(c.NewLock("k-m2"), c.NewLock("k-m1"))
				return "", func() error { return m.Unlock(ctx) }, m.Lock(ctx)
			}},
	}
}

// TestObserver_kinds: every primitive reports its acquisitions with its
// own kind, its name and its owner; what it holds reports its end
// (released at Unlock or Release, lost when its keys are deleted behind
// its back, found by a renewal) with the same kind, name and owner, to the
// Observer and to the Logger.
func TestObserver_kinds(t *testing.T) {
	for _, k := range obKinds() {
		t.Run(k.kind.String(), func(t *testing.T) {
			mr, rdb := lkMini(t)
			rec := &obRecorder{}
			var logs obLog
			c := lkClient(t, rdb, lualock.Options{
				Observer:      rec.observer(),
				Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
				WatchdogLease: 1500 * time.Millisecond, // a renewal every 500ms: a permit lives through a stall of 1.5s
			})
			ctx := context.Background()

			owner, end, err := k.take(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			ev := rec.lastAcquire(t)
			if ev.Kind != k.kind || ev.Name != k.name || ev.Owner != owner || ev.Err != nil || ev.Context != ctx {
				t.Errorf("Acquire event %+v, want kind %v, name %q, owner %q, no error", ev, k.kind, k.name, owner)
			}
			if owner != "" && k.kind != lualock.KindPermit && !strings.HasPrefix(owner, c.ID()+":") {
				t.Errorf("owner %q is not an owner field of client %s", owner, c.ID())
			}
			if k.gone == nil {
				if end != nil {
					if err := end(); err != nil {
						t.Fatal(err)
					}
				}
				return
			}

			// Released: the end event has the kind, the name and the owner.
			if err := end(); err != nil {
				t.Fatal(err)
			}
			if e := rec.waitEnd(t, k.name); e.Kind != k.kind || e.Owner != owner || e.Reason != lualock.Released {
				t.Errorf("HoldEnd event at release %+v, want kind %v, owner %q, reason released", e, k.kind, owner)
			}

			// Lost: deleted behind its back, found gone by a renewal.
			owner, _, err = k.take(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			mr.Del(k.gone[0])
			for _, key := range k.gone[1:] {
				mr.Del(key)
			}
			e := rec.waitEnd(t, k.name)
			if e.Kind != k.kind || e.Owner != owner || e.Reason != lualock.LostGone {
				t.Errorf("HoldEnd event at the loss %+v, want kind %v, owner %q, reason lost_gone", e, k.kind, owner)
			}
			want := []string{"level=WARN", `msg="lualock: lost"`, "kind=" + k.kind.String(), "name=" + k.name, "owner=" + owner, "reason=lost_gone"}
			// The log line is written after the Observer is called.
			waitUntil(t, func() bool { return len(logs.lines(want...)) >= 1 })
			if got := logs.lines(want...); len(got) != 1 {
				t.Errorf("log lines with %q: %q; log: %q", want, got, logs.lines())
			}
		})
	}
}

// TestObserver_renewalLog_permitOwner: a failed renewal of a permit logs
// the permit's id as its owner (32 hex characters), not its 16 raw bytes.
func TestObserver_renewalLog_permitOwner(t *testing.T) {
	mr, rdb := lkMini(t)
	var logs obLog
	c := lkClient(t, rdb, lualock.Options{
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		WatchdogLease: 300 * time.Millisecond,
	})
	ctx := context.Background()
	s := c.NewPermitExpirableSemaphore("k-renew")
	if _, err := s.TrySetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mr.SetError("injected")
	waitUntil(t, func() bool { return len(logs.lines("lualock: renewal failed")) > 0 })
	mr.SetError("")
	line := logs.lines("lualock: renewal failed")[0]
	if !strings.Contains(line, "name=k-renew") || !strings.Contains(line, "owner="+p.ID()) {
		t.Errorf("renewal failure logged as %q, want name=k-renew owner=%s", line, p.ID())
	}
	if bytes.ContainsFunc([]byte(line), func(r rune) bool { return r < 0x20 && r != '\t' }) {
		t.Errorf("renewal failure log line has control bytes: %q", line)
	}
	_ = p.Release(ctx)
}

// TestKind_String: every kind has its own label.
func TestKind_String(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range lualock.Kinds() {
		s := k.String()
		if s == "unknown" || seen[s] {
			t.Errorf("Kind %d labelled %q", k, s)
		}
		seen[s] = true
	}
	if len(seen) != len(obKinds()) {
		t.Errorf("%d kinds, TestObserver_kinds covers %d", len(seen), len(obKinds()))
	}
	if s := lualock.Kind(0).String(); s != "unknown" {
		t.Errorf("Kind(0) = %q", s)
	}
}
