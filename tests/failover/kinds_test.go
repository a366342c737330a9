package failover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lualock/lualock"
)

// hold is what one acquisition of a kind gave its holder.
type hold struct {
	ctx     context.Context                     // ends when the hold is lost; nil: the kind has none (plain semaphore)
	held    func(context.Context) (bool, error) // nil: the kind cannot tell
	release func(context.Context) error
	token   int64  // the fenced lock's token
	field   string // a Lock handle's field in the lock's hash
}

// kind is one primitive as the rounds use it: take blocks until the first
// holder has it; probe makes the second holder's single attempt (wait 0),
// ok when it obtained what the first holds.
type kind struct {
	name  string
	setup func(ctx context.Context, c *lualock.Client, name string) error // nil: none
	take  func(ctx context.Context, c *lualock.Client, name string) (hold, error)
	probe func(ctx context.Context, c *lualock.Client, name string) (hold, error)
}

// lockHold is the hold of a Lock handle.
func lockHold(l *lualock.Lock) hold {
	return hold{ctx: l.Context(), held: l.IsHeld, release: l.Unlock, field: l.Field()}
}

// lockKind is a kind made of a Lock handle per client.
func lockKind(name string, handle func(c *lualock.Client, name string) *lualock.Lock) kind {
	return kind{
		name: name,
		take: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
			l := handle(c, n)
			err := l.Lock(ctx) // first: a hold's Context is the one of the hold taken
			return lockHold(l), err
		},
		probe: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
			l := handle(c, n)
			err := l.TryLock(ctx, 0)
			return lockHold(l), err
		},
	}
}

// kinds are the reentrant and fair locks and one lock of each other kind.
func kinds() []kind {
	write := func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).WriteLock() }
	read := lockKind("read", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).ReadLock() })
	read.probe = lockKind("", write).probe // readers share: a writer is what a read hold excludes
	fenced := func(ctx context.Context, c *lualock.Client, n string, wait time.Duration) (hold, error) {
		f := c.NewFencedLock(n)
		var tok int64
		var err error
		if wait < 0 {
			tok, err = f.LockToken(ctx)
		} else {
			tok, err = f.TryLockToken(ctx, wait)
		}
		h := lockHold(f.Handle())
		h.token = tok
		return h, err
	}
	multi := func(c *lualock.Client, n string) *lualock.MultiLock {
		return c.NewMultiLock(c.NewLock(n+":a"), c.NewLock(n+":b"))
	}
	multiHold := func(m *lualock.MultiLock) hold {
		first := m.Locks()[0]
		return hold{ctx: first.Context(), held: first.IsHeld, release: m.Unlock}
	}
	return []kind{
		lockKind("reentrant", (*lualock.Client).NewLock),
		lockKind("fair", (*lualock.Client).NewFairLock),
		lockKind("spin", (*lualock.Client).NewSpinLock),
		lockKind("write", write),
		read,
		{
			name: "fenced",
			take: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				return fenced(ctx, c, n, -1)
			},
			probe: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				return fenced(ctx, c, n, 0)
			},
		},
		{
			name: "multi",
			take: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				m := multi(c, n)
				err := m.Lock(ctx)
				return multiHold(m), err
			},
			probe: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				m := multi(c, n)
				err := m.TryLock(ctx, 0)
				return multiHold(m), err
			},
		},
		{
			name: "semaphore",
			setup: func(ctx context.Context, c *lualock.Client, n string) error {
				return setPermits(c.NewSemaphore(n).TrySetPermits(ctx, 1))
			},
			take: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				s := c.NewSemaphore(n)
				return hold{release: func(ctx context.Context) error { return s.Release(ctx, 1) }}, s.Acquire(ctx, 1)
			},
			probe: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				s := c.NewSemaphore(n)
				return hold{release: func(ctx context.Context) error { return s.Release(ctx, 1) }}, s.TryAcquire(ctx, 1, 0)
			},
		},
		{
			name: "expirable",
			setup: func(ctx context.Context, c *lualock.Client, n string) error {
				return setPermits(c.NewPermitExpirableSemaphore(n).TrySetPermits(ctx, 1))
			},
			take: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				p, err := c.NewPermitExpirableSemaphore(n).Acquire(ctx)
				return permitHold(p), err
			},
			probe: func(ctx context.Context, c *lualock.Client, n string) (hold, error) {
				p, err := c.NewPermitExpirableSemaphore(n).TryAcquire(ctx, 0)
				return permitHold(p), err
			},
		},
	}
}

func permitHold(p *lualock.Permit) hold {
	if p == nil {
		return hold{release: func(context.Context) error { return nil }}
	}
	return hold{ctx: p.Context(), release: p.Release}
}

func setPermits(ok bool, err error) error {
	if err == nil && !ok {
		err = errors.New("permits already set")
	}
	return err
}

// roundTag is the hash tag of a round's names: on a cluster they share
// one slot, whose master the round crashes.
func roundTag(test string, round int) string {
	return fmt.Sprintf("failover:{%s:%d:%d}", test, round, time.Now().UnixNano())
}
