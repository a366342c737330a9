package failover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestAck_notReplicated: when the replica never acknowledges (its link is
// cut), every kind's acquisition fails with ErrNotReplicated after
// ReplicaAckTimeout and leaves nothing held: another owner obtains it at
// once. With acknowledgement off the same acquisitions succeed.
func TestAck_notReplicated(t *testing.T) {
	t.Parallel() // every test of the suite has a deployment of its own
	d := harness.StartSentinel(t, harness.SentinelOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients, tag, names := ackSetup(t, ctx, d, lualock.ReplicaAckOne, lualock.ReplicaAckOff)
	on, off := clients[0], clients[1]
	// A hold taken while the link is up, re-entered once it is cut.
	// (A first hold not acknowledged within the short timeout, on a loaded
	// machine, was given back: take it again.)
	reentered := on.NewLock(tag + ":reentry")
	for i := 0; ; i++ {
		err := reentered.Lock(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, lualock.ErrNotReplicated) || i == 20 {
			t.Fatalf("reentry: first hold: %v", err)
		}
	}
	d.Nodes()[0].Proxy.CutLink() // the primary's replication link
	checkReentryUndone(ctx, t, reentered, off.NewLock(tag+":reentry"))
	for _, k := range kinds() {
		_, err := k.take(ctx, on, names[k.name])
		if !errors.Is(err, lualock.ErrNotReplicated) {
			t.Fatalf("%s: %v, want ErrNotReplicated", k.name, err)
		}
		// Undone: the other client obtains it, and gives it back.
		var h hold
		for start := time.Now(); ; {
			if h, err = k.probe(ctx, off, names[k.name]); err == nil || time.Since(start) > 5*time.Second {
				break
			}
			time.Sleep(10 * time.Millisecond) // a semaphore's permits come back in the background
		}
		if err != nil {
			t.Fatalf("%s: after ErrNotReplicated another owner cannot obtain it: %v", k.name, err)
		}
		if err := h.release(ctx); err != nil {
			t.Fatalf("%s: release: %v", k.name, err)
		}
	}
}

// ackSetup returns a client of d per mode (acknowledgement timeout
// 200ms), the test's hash tag and a name per kind under it, set up by the
// first client.
func ackSetup(t *testing.T, ctx context.Context, d *harness.Sentinel, modes ...lualock.ReplicaAck) ([]*lualock.Client, string, map[string]string) {
	t.Helper()
	var clients []*lualock.Client
	for _, mode := range modes {
		rdb := d.Client(func(o *redis.FailoverOptions) { o.ContextTimeoutEnabled = true })
		t.Cleanup(func() { _ = rdb.Close() })
		clients = append(clients, backends.NewClient(t, rdb, lualock.Options{ReplicaAck: mode, ReplicaAckTimeout: 200 * time.Millisecond}))
	}
	tag := roundTag(t.Name(), 0)
	names := map[string]string{}
	for _, k := range kinds() {
		names[k.name] = tag + ":" + k.name
		if k.setup != nil {
			if err := k.setup(ctx, clients[0], names[k.name]); err != nil {
				t.Fatalf("%s setup: %v", k.name, err)
			}
		}
	}
	return clients, tag, names
}

// checkReentryUndone: a re-entry the replicas do not acknowledge fails
// with ErrNotReplicated and gives back its own hold only: the earlier
// hold stands (other owners are refused) until its one Unlock, after
// which another owner obtains the lock and a second Unlock finds no hold.
func checkReentryUndone(ctx context.Context, t *testing.T, l, other *lualock.Lock) {
	t.Helper()
	if err := l.Lock(ctx); !errors.Is(err, lualock.ErrNotReplicated) {
		t.Fatalf("reentry: %v, want ErrNotReplicated", err)
	}
	if held, err := l.IsHeld(ctx); err != nil || !held {
		t.Fatalf("reentry: the earlier hold after ErrNotReplicated: held %v, %v", held, err)
	}
	if err := other.TryLock(ctx, 0); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("reentry: another owner while the earlier hold stands: %v, want ErrNotObtained", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("reentry: the earlier hold's Unlock: %v", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lualock.ErrNotHeld) {
		t.Fatalf("reentry: a second Unlock: %v, want ErrNotHeld", err)
	}
	if err := other.TryLock(ctx, 0); err != nil {
		t.Fatalf("reentry: another owner after the Unlock: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("reentry: the other owner's Unlock: %v", err)
	}
}

// commands counts the commands a client sends, by name.
type commands struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.n[strings.ToLower(cmd.Name())]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		for _, cmd := range cmds {
			c.n[strings.ToLower(cmd.Name())]++
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (c *commands) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// TestAck_noReplicas: on a primary without replicas acknowledgement sends
// nothing per acquisition: no WAIT, and INFO only when the client first
// uses the primary and once a second after.
func TestAck_noReplicas(t *testing.T) {
	t.Parallel()
	s := harness.StartStandalone(t)
	cmds := &commands{n: map[string]int{}}
	rdb := s.Client()
	rdb.AddHook(cmds)
	t.Cleanup(func() { _ = rdb.Close() })
	c := backends.NewClient(t, rdb, lualock.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	const n = 200
	for i := range n {
		l := c.NewLock(fmt.Sprintf("%s:%d", t.Name(), i))
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	secs := int(time.Since(start)/time.Second) + 1
	if w := cmds.count("wait"); w != 0 {
		t.Errorf("%d WAITs for %d acquisitions on a primary without replicas, want 0", w, n)
	}
	if i := cmds.count("info"); i < 1 || i > 1+secs {
		t.Errorf("%d INFOs in %ds for %d acquisitions, want 1 and at most one a second", i, secs, n)
	}
}

// TestAck_allOrOne: on a primary with two replicas, one of them paused
// (connected but acknowledging nothing), every kind's acquisition fails
// with ErrNotReplicated under ReplicaAckAll and leaves nothing held, while
// under ReplicaAckOne it succeeds; once the replica runs again,
// ReplicaAckAll acquisitions succeed.
func TestAck_allOrOne(t *testing.T) {
	t.Parallel()
	d := harness.StartSentinel(t, harness.SentinelOptions{Replicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients, tag, names := ackSetup(t, ctx, d, lualock.ReplicaAckAll, lualock.ReplicaAckOne)
	all, one := clients[0], clients[1]
	// Both clients know the two replicas: an acquisition of each went
	// through (under ReplicaAckAll: both acknowledged it).
	// (An acquisition not acknowledged within the short timeout, on a
	// loaded machine, was given back: take it again.)
	for _, c := range []*lualock.Client{all, one} {
		l := c.NewLock(tag + ":first")
		for i := 0; ; i++ {
			err := l.Lock(ctx)
			if err == nil {
				break
			}
			if !errors.Is(err, lualock.ErrNotReplicated) || i == 20 {
				t.Fatalf("first acquisition with both replicas running: %v", err)
			}
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	paused := d.Nodes()[2]
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := paused.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	for _, k := range kinds() {
		if _, err := k.take(ctx, all, names[k.name]); !errors.Is(err, lualock.ErrNotReplicated) {
			t.Fatalf("%s, ReplicaAckAll, a replica paused: %v, want ErrNotReplicated", k.name, err)
		}
		// The running replica acknowledges (on a loaded machine perhaps
		// not within the short timeout: then the acquisition was given
		// back, and is taken again).
		h, err := k.take(ctx, one, names[k.name])
		for i := 0; errors.Is(err, lualock.ErrNotReplicated) && i < 20; i++ {
			h, err = k.take(ctx, one, names[k.name])
		}
		if err != nil {
			t.Fatalf("%s, ReplicaAckOne, a replica paused: %v (what ReplicaAckAll gave back is not free?)", k.name, err)
		}
		if err := h.release(ctx); err != nil {
			t.Fatalf("%s: release: %v", k.name, err)
		}
	}
	resume()
	for _, k := range kinds() {
		var h hold
		var err error
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			// The resumed replica first works off what it missed.
			if h, err = k.take(ctx, all, names[k.name]); !errors.Is(err, lualock.ErrNotReplicated) || time.Since(start) > 10*time.Second {
				break
			}
		}
		if err != nil {
			t.Fatalf("%s, ReplicaAckAll, both replicas running: %v", k.name, err)
		}
		if err := h.release(ctx); err != nil {
			t.Fatalf("%s: release: %v", k.name, err)
		}
	}
}
