package main

import (
	"context"
	"errors"
	"sync"

	"github.com/lualock/lualock"
)

// libLualockSem is lualock's Semaphore (Redisson's RSemaphore) of one
// permit used as a lock: lock is Acquire(1), unlock Release(1) (the
// semaphore's acquire+release row).
const libLualockSem = "lualock (Semaphore, 1 permit)"

var vLualockSem = variant{libLualockSem, false, openLualockSem}

// lualockSemInst is a lualock client whose mutexes are 1-permit semaphores.
type lualockSemInst struct {
	*lualockInst
	mu  sync.Mutex
	set map[string]bool // keys whose permits were set
}

func openLualockSem(e *env, o openOpts) (instance, error) {
	inst, err := openLualock(false, false)(e, o)
	if err != nil {
		return nil, err
	}
	return &lualockSemInst{lualockInst: inst.(*lualockInst), set: map[string]bool{}}, nil
}

func (i *lualockSemInst) newMutex(key string) mutex {
	s := i.c.NewSemaphore(key)
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.set[key] {
		i.set[key] = true
		_, _ = s.TrySetPermits(context.Background(), 1)
	}
	return semMutex{s}
}

type semMutex struct{ s *lualock.Semaphore }

func (m semMutex) lock(ctx context.Context) error { return m.s.Acquire(ctx, 1) }
func (m semMutex) tryLock(ctx context.Context) (bool, error) {
	err := m.s.TryAcquire(ctx, 1, 0)
	if errors.Is(err, lualock.ErrNotObtained) {
		return false, nil
	}
	return err == nil, err
}
func (m semMutex) unlock(ctx context.Context) error { return m.s.Release(ctx, 1) }
func (m semMutex) renew(context.Context) error      { return errNoRenew }
func (m semMutex) lost() bool                       { return false }

// newProbe is the semaphore itself: the probe must take a permit of the
// same semaphore (the embedded lualockInst's would take a plain lock on the
// semaphore's key, which Redis refuses with WRONGTYPE).
func (i *lualockSemInst) newProbe(key string) mutex { return i.newMutex(key) }
