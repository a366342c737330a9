package loss_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lualock/lualock"
)

// hold is one held thing of any kind, for the cause matrix.
type hold struct {
	key     string          // the key that holds it in Redis
	ctx     context.Context // its Context
	release func(ctx context.Context) error
	reenter func(ctx context.Context) error // a re-entry (a permit: another permit), undone
	id      string                          // a permit's id
}

// kind takes a hold of one kind on name with c, and force-releases it
// from another client.
type kind struct {
	name  string
	take  func(t *testing.T, c *lualock.Client, name string) hold
	force func(ctx context.Context, other *lualock.Client, name string, h hold) error
}

func lockKind(name string, newLock func(c *lualock.Client, name string) *lualock.Lock, lease time.Duration) kind {
	return kind{
		name: name,
		take: func(t *testing.T, c *lualock.Client, n string) hold {
			t.Helper()
			l := newLock(c, n)
			var err error
			if lease > 0 {
				err = l.LockLease(context.Background(), lease)
			} else {
				err = l.Lock(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			return hold{key: n, ctx: l.Context(), release: l.Unlock, reenter: func(ctx context.Context) error {
				if err := l.Lock(ctx); err != nil {
					return err
				}
				return l.Unlock(ctx)
			}}
		},
		force: func(ctx context.Context, other *lualock.Client, n string, _ hold) error {
			_, err := newLock(other, n).ForceUnlock(ctx)
			return err
		},
	}
}

// kinds are every held thing: the lock kinds, write and read holds, a
// fixed lease, and a permit.
func kinds() []kind {
	return []kind{
		lockKind("reentrant", (*lualock.Client).NewLock, 0),
		lockKind("fair", (*lualock.Client).NewFairLock, 0),
		lockKind("fenced", func(c *lualock.Client, n string) *lualock.Lock { return c.NewFencedLock(n).Handle() }, 0),
		lockKind("spin", (*lualock.Client).NewSpinLock, 0),
		lockKind("write", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).WriteLock() }, 0),
		lockKind("read", func(c *lualock.Client, n string) *lualock.Lock { return c.NewReadWriteLock(n).ReadLock() }, 0),
		lockKind("lease", (*lualock.Client).NewLock, 5*time.Minute),
		{
			name: "permit",
			take: func(t *testing.T, c *lualock.Client, n string) hold {
				t.Helper()
				s := c.NewPermitExpirableSemaphore(n)
				if _, err := s.TrySetPermits(context.Background(), 2); err != nil {
					t.Fatal(err)
				}
				p, err := s.Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return hold{key: timeouts(n), id: p.ID(), ctx: p.Context(), release: p.Release, reenter: func(ctx context.Context) error {
					// Another permit taken and given back changes the same keys.
					q, err := s.Acquire(ctx)
					if err != nil {
						return err
					}
					return q.Release(ctx)
				}}
			},
			force: func(ctx context.Context, other *lualock.Client, n string, h hold) error {
				// Another client releases the permit by its id.
				return other.NewPermitExpirableSemaphore(n).ReleaseID(ctx, h.id)
			},
		},
	}
}

// timeouts is the lease zset of the permit-expirable semaphore name
// (Redisson's suffixName).
func timeouts(name string) string {
	if strings.Contains(name, "{") {
		return name + ":timeout"
	}
	return "{" + name + "}:timeout"
}
