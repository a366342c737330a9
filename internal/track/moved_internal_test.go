package track

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// refusing is a fake cluster node that answers the first refusals checks
// with MOVED to movedTo, and then that the key is gone.
func refusing(t *testing.T, refusals int64, movedTo string) (addr string, checks *atomic.Int64) {
	checks = new(atomic.Int64)
	addr, _ = fakeNode(t, func(cmd []value) string {
		switch strings.ToUpper(cmd[0].str) {
		case "SCRIPT":
			return "$3\r\nsha\r\n"
		case "EVALSHA_RO":
			if checks.Add(1) <= refusals {
				return fmt.Sprintf("-MOVED 1 %s\r\n", movedTo)
			}
			return "*1\r\n:-2\r\n"
		}
		return "+OK\r\n"
	})
	return addr, checks
}

// countingDial dials over TCP and counts the dials per address.
type countingDial struct {
	mu    sync.Mutex
	dials map[string]int
}

func (c *countingDial) dial(ctx context.Context, a string) (net.Conn, error) {
	c.mu.Lock()
	if c.dials == nil {
		c.dials = map[string]int{}
	}
	c.dials[a]++
	c.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", a)
}

func (c *countingDial) count(a string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials[a]
}

// waitGone adds a watch of key "k" and waits for its loss, Gone.
func waitGone(t *testing.T, tr *Tracker, checks *atomic.Int64) {
	t.Helper()
	spec := &Spec{Name: "check", SHA1: "sha", Source: "return {}"}
	lost := make(chan Loss, 1)
	var w Watch
	tr.Add(&w, Target{Spec: spec, Key: "k", Field: "f"}, 0, func(_ uint64, how Loss) { lost <- how })
	select {
	case how := <-lost:
		if how != Gone {
			t.Fatalf("loss %v, want Gone", how)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no loss reported in 20s (%d checks on the refusing node)", checks.Load())
	}
}

// During a cluster failover the placer sends the checks of a master that
// cannot be reached to its replica, which refuses them with MOVED to that
// master until it has promoted itself. The tracker does not follow a MOVED
// to an address whose dial failed within unreachedFor (each would cost a
// dial of the dead node, or a handshake timeout when it hangs): it asks
// Addr again after the backoff, and the check lands on the replica once it
// serves the slot. The dead node is dialed at most once per unreachedFor.
func TestMoved_toUnreachedNodeNotFollowed(t *testing.T) {
	// dead is an address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	const refusals = 5
	replica, checks := refusing(t, refusals, dead)

	// The slot's master is dead until the tracker has failed to reach
	// it; then the placer names the replica.
	var refreshed atomic.Bool
	var cd countingDial
	tr := New(Dialer{
		Addr: func(context.Context, string) (string, error) {
			if refreshed.Load() {
				return replica, nil
			}
			return dead, nil
		},
		Dial:    cd.dial,
		Refresh: func(context.Context, string) { refreshed.Store(true) },
	}, Config{Slot: func(string) int { return 1 }, MaxBackoff: time.Millisecond})
	defer tr.Close()

	start := time.Now()
	waitGone(t, tr, checks)
	windows := 1 + int(time.Since(start)/unreachedFor)
	if n := checks.Load(); n != refusals+1 {
		t.Errorf("%d checks on the replica, want %d", n, refusals+1)
	}
	if n := cd.count(dead); n > windows {
		t.Errorf("the unreachable master was dialed %d times in %d windows of %v: MOVED to it followed", n, windows, unreachedFor)
	}
}

// A MOVED that names a node whose failed dial is older than unreachedFor
// is followed: the node may serve again (it came back, or a migration
// moved the slot there), and the slot map that named the refusing node is
// stale.
func TestMoved_toNodeThatFailedLongAgoFollowed(t *testing.T) {
	master, mchecks := refusing(t, 0, "")
	stale, schecks := refusing(t, 1<<30, master) // refuses every check
	var cd countingDial
	tr := New(Dialer{
		Addr: func(context.Context, string) (string, error) { return stale, nil },
		Dial: cd.dial,
	}, Config{Slot: func(string) int { return 1 }, MaxBackoff: time.Millisecond})
	defer tr.Close()
	tr.mu.Lock()
	tr.unreached[master] = time.Now().Add(-time.Hour)
	tr.mu.Unlock()

	waitGone(t, tr, mchecks)
	if n := schecks.Load(); n != 1 {
		t.Errorf("%d checks on the node that refused, want 1: its MOVED was not followed at once", n)
	}
}
