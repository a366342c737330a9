package reentrant_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Options.Scripter with a scripter that sends the calls of concurrent
// goroutines in shared pipelines: go-redis's auto-pipeliner
// (rdb.AutoPipeline(), go-redis 9.22 or later) and lualock.Batched. The
// locks keep every guarantee.

// TestClient_Scripter_autoPipeline runs the checks of checkScripter with
// the scripts sent by go-redis's auto-pipeliner.
func TestClient_Scripter_autoPipeline(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		checkScripter(t, b, rdb, backends.AutoPipeliner(t, rdb))
	})
}

// TestClient_Scripter_batched runs the checks of checkScripter with the
// scripts sent by lualock.Batched.
func TestClient_Scripter_batched(t *testing.T) {
	t.Parallel()
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		t.Parallel()
		checkScripter(t, b, rdb, lualock.Batched(rdb))
	})
}

// checkScripter runs workers goroutines, each with its own handle, through
// n Lock/Unlock pairs on a few names of each kind of lock, with the
// scripts sent through via: no two holders of a name are ever inside
// together, no update is lost, every call succeeds, re-entry counts, and
// nothing is left in Redis.
func checkScripter(t *testing.T, b backends.Backend, rdb redis.UniversalClient, via redis.Scripter) {
	ctx := t.Context()
	// Counted on their way into via, which sends them.
	sc := &backends.Recorder{Scripter: via}
	c := backends.NewClient(t, rdb, lualock.Options{Scripter: sc, UnlockLatch: 200 * time.Millisecond})
	const workers, names = 16, 4
	n := 40
	if b.Name == "miniredis" {
		n = 15 // gopher-lua parses every script call
	}
	for _, kind := range []struct {
		name string
		make func(string) *lualock.Lock
	}{
		{"reentrant", c.NewLock},
		{"fair", c.NewFairLock},
	} {
		base := backends.UniqueName(t) + "_" + kind.name
		var inside [names]atomic.Bool
		var counter [names]int // guarded by the distributed lock only
		var got atomic.Int64
		failures := make(chan string, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := w % names
				l := kind.make(fmt.Sprintf("%s_%d", base, k))
				for range n {
					if err := l.LockLease(ctx, 10*time.Second); err != nil {
						failures <- fmt.Sprintf("%s Lock: %v", kind.name, err)
						return
					}
					if !inside[k].CompareAndSwap(false, true) {
						failures <- fmt.Sprintf("%s: two holders of name %d at once", kind.name, k)
						_ = l.Unlock(ctx)
						return
					}
					// Re-enter and leave once inside the hold.
					var bad string
					if err := l.LockLease(ctx, 10*time.Second); err != nil {
						bad = fmt.Sprintf("%s re-entry: %v", kind.name, err)
					} else if h, err := l.HoldCount(ctx); err != nil || h != 2 {
						bad = fmt.Sprintf("%s HoldCount after re-entry = %d, %v; want 2", kind.name, h, err)
					} else if err := l.Unlock(ctx); err != nil {
						bad = fmt.Sprintf("%s Unlock of the re-entry: %v", kind.name, err)
					}
					counter[k]++
					got.Add(1)
					inside[k].Store(false)
					if bad != "" {
						failures <- bad
						for range 2 { // leave the name to the others
							if l.Unlock(ctx) != nil {
								break
							}
						}
						return
					}
					if err := l.Unlock(ctx); err != nil {
						failures <- fmt.Sprintf("%s Unlock: %v", kind.name, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(failures)
		for f := range failures {
			t.Error(f)
		}
		total := 0
		for _, v := range counter {
			total += v
		}
		if got.Load() != int64(workers*n) || total != workers*n {
			t.Errorf("%s: %d acquisitions, counters add up to %d; want %d each (a lost update means two holders)", kind.name, got.Load(), total, workers*n)
		}
		for k := range names {
			backends.NoKeys(t, rdb, fmt.Sprintf("%s_%d", base, k))
		}
	}
	// A try-lock that times out through via is a plain
	// ErrNotObtained, and the fair waiter leaves the queue.
	name := backends.UniqueName(t) + "_timeout"
	holder, waiter := c.NewFairLock(name), c.NewFairLock(name)
	if err := holder.LockLease(ctx, 10*time.Second); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := waiter.TryLock(ctx, 50*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock behind a holder = %v, want ErrNotObtained", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	backends.NoKeys(t, rdb, name)
	// Two acquisitions and two releases per round, for both kinds.
	if calls, want := sc.Count("evalsha"), 2*workers*n*4; calls < want {
		t.Errorf("%d script calls through the scripter, want at least the %d of the rounds", calls, want)
	}
}
