package faults_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestLock_Context_clusterMasterDies: on a private 3-master cluster, watchdog
// holds on the slots of every master; one master is killed (SIGKILL, by
// pid). The holds it served are reported lost within their lease; the
// holds on the other two masters are never reported lost over several
// leases, and their renewals go on (their PTTL in Redis stays above two
// thirds of the lease).
//
// Both bounds in milliseconds (the loss within the lease + 100ms, the PTTL
// at most 100ms under two thirds of the lease) cover timers of this
// process (the watchdog's, this test's polling): each grows by how late a
// canary timer ran in the same test, twice for the loss (the watchdog's
// timer, then the poll that sees Done), so that a machine starved of CPU
// does not pass for a late loss or stopped renewals. The lease is 1.2s,
// not less: renewals on the live masters have a third of it per try.
func TestLock_Context_clusterMasterDies(t *testing.T) {
	backends.ShortParallel(t)
	cl := harness.StartCluster(t)
	cc := cl.Client(func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true })
	t.Cleanup(func() { _ = cc.Close() })
	ctx := t.Context()
	const lease = 1200 * time.Millisecond
	c := backends.NewClient(t, cc, lualock.Options{WatchdogLease: lease})
	canary := backends.StartCanary(t, 5*time.Millisecond, nil)
	nodes := cl.Nodes()
	dead := nodes[0]

	// Two locks per master, a reentrant and a fair one.
	type hold struct {
		l    *lualock.Lock
		name string
		node string
	}
	var holds []hold
	per := map[string]int{}
	for i := 0; len(holds) < 2*len(nodes) && i < 10000; i++ {
		name := fmt.Sprintf("%s_%d", backends.UniqueName(t), i)
		m, err := cc.MasterForKey(ctx, name)
		if err != nil {
			t.Fatalf("MasterForKey: %v", err)
		}
		addr := m.Options().Addr
		if per[addr] >= 2 {
			continue
		}
		l := c.NewLock(name)
		if per[addr] == 1 {
			l = c.NewFairLock(name)
		}
		per[addr]++
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock %s: %v", name, err)
		}
		holds = append(holds, hold{l, name, addr})
	}
	if len(holds) != 2*len(nodes) {
		t.Fatalf("found locks on %d masters only: %v", len(per), per)
	}
	time.Sleep(lease / 2) // a renewal round or so with every master up

	killed := time.Now()
	dead.Kill()
	lostAt := map[string]time.Duration{}
	end := killed.Add(4 * lease)
	for time.Now().Before(end) {
		for _, h := range holds {
			if _, seen := lostAt[h.name]; seen {
				continue
			}
			select {
			case <-h.l.Done():
				lostAt[h.name] = time.Since(killed)
				if h.node != dead.Addr() {
					t.Errorf("hold on live master %s reported lost %v after the kill: %v",
						h.node, lostAt[h.name], context.Cause(h.l.Context()))
				}
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	late := canary.Late()
	t.Logf("canary timer at most %v late", late)
	for _, h := range holds {
		if h.node != dead.Addr() {
			pttl, err := cc.PTTL(ctx, h.name).Result()
			if err != nil {
				t.Errorf("PTTL %s: %v", h.name, err)
			} else if pttl < 2*lease/3-100*time.Millisecond-late {
				t.Errorf("PTTL of %s on live master %s = %v after %v: renewals stopped (canary %v late)", h.name, h.node, pttl, 4*lease, late)
			}
			if err := h.l.Unlock(ctx); err != nil {
				t.Errorf("Unlock of %s on a live master: %v", h.name, err)
			}
			continue
		}
		at, ok := lostAt[h.name]
		switch {
		case !ok:
			t.Errorf("hold on the dead master was never reported lost")
		case at > lease+100*time.Millisecond+2*late:
			t.Errorf("hold on the dead master reported lost %v after the kill, want within the lease (%v) + 100ms (+2×%v the canary was late)", at, lease, late)
		default:
			t.Logf("hold on the dead master reported lost %v after the kill", at)
		}
		if cause := context.Cause(h.l.Context()); !errors.Is(cause, lualock.ErrLockLost) {
			t.Errorf("cause of the dead master's hold = %v, want ErrLockLost", cause)
		}
		if err := h.l.Unlock(ctx); !errors.Is(err, lualock.ErrLockLost) {
			t.Errorf("Unlock of the dead master's hold = %v, want ErrLockLost", err)
		}
	}
}
