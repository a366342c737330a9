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

// During a cluster failover the placer sends the checks of a master that
// cannot be reached to its replica, which refuses them with MOVED to that
// master until it has promoted itself. The tracker does not follow a MOVED
// to an address whose last dial failed (each would cost a dial of the dead
// node, or a handshake timeout when it hangs): it asks Addr again after
// the backoff, and the check lands on the replica once it serves the slot.
func TestMoved_toUnreachedNodeNotFollowed(t *testing.T) {
	// dead is an address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	// The replica refuses the first checks with MOVED to dead, then
	// answers that the key is gone.
	const refusals = 5
	var checks atomic.Int64
	replica, _ := fakeNode(t, func(cmd []value) string {
		switch strings.ToUpper(cmd[0].str) {
		case "SCRIPT":
			return "$3\r\nsha\r\n"
		case "EVALSHA_RO":
			if checks.Add(1) <= refusals {
				return fmt.Sprintf("-MOVED 1 %s\r\n", dead)
			}
			return "*1\r\n:-2\r\n"
		}
		return "+OK\r\n"
	})

	var refreshed atomic.Bool
	dials := map[string]int{}
	var dmu sync.Mutex
	var d net.Dialer
	tr := New(Dialer{
		// The slot's master is dead until the tracker has failed to
		// reach it; then the placer names the replica.
		Addr: func(context.Context, string) (string, error) {
			if refreshed.Load() {
				return replica, nil
			}
			return dead, nil
		},
		Dial: func(ctx context.Context, a string) (net.Conn, error) {
			dmu.Lock()
			dials[a]++
			dmu.Unlock()
			return d.DialContext(ctx, "tcp", a)
		},
		Refresh: func(context.Context, string) { refreshed.Store(true) },
	}, Config{Slot: func(string) int { return 1 }})
	defer tr.Close()

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
		t.Fatalf("no loss reported in 20s (%d checks on the replica)", checks.Load())
	}
	if n := checks.Load(); n != refusals+1 {
		t.Errorf("%d checks on the replica, want %d", n, refusals+1)
	}
	dmu.Lock()
	defer dmu.Unlock()
	if dials[dead] != 1 {
		t.Errorf("the unreachable master was dialed %d times, want once (MOVED to it followed)", dials[dead])
	}
}
