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
// dial of the dead node, or a handshake timeout when it hangs): the check
// waits on the replica, and with a replica whose ROLE says nothing (this
// fake's) it is given back after parkFor and placed by Addr again. The
// dead node is dialed at most once per unreachedFor.
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
	tr.parkFor = unreachedFor // the fake's ROLE says nothing of its link

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

// parkedOn is a fake replica of a master at an address nothing listens on
// (dead): a check there is refused with MOVED to what movedTo returns
// until promoted, then gone; its ROLE names what master returns. The
// tracker (parkFor: the test's) has failed to reach dead, and places the
// key on the replica since. checks and roles count its commands, dials
// the tracker's dials per address.
type parkedOn struct {
	dead, replica   string
	promoted        atomic.Bool
	master, movedTo atomic.Value // string
	checks, roles   atomic.Int64
	tr              *Tracker
	dials           *countingDial
	lost            chan Loss
}

func newParked(t *testing.T, parkFor time.Duration) *parkedOn {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &parkedOn{dead: l.Addr().String(), dials: new(countingDial), lost: make(chan Loss, 1)}
	l.Close()
	p.master.Store(p.dead)
	p.movedTo.Store(p.dead)
	p.replica, _ = fakeNode(t, func(cmd []value) string {
		switch strings.ToUpper(cmd[0].str) {
		case "SCRIPT":
			return "$3\r\nsha\r\n"
		case "ROLE":
			p.roles.Add(1)
			if p.promoted.Load() {
				return "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"
			}
			host, port, _ := net.SplitHostPort(p.master.Load().(string))
			return fmt.Sprintf("*5\r\n$5\r\nslave\r\n$%d\r\n%s\r\n:%s\r\n$10\r\nconnecting\r\n:-1\r\n", len(host), host, port)
		case "EVALSHA_RO":
			p.checks.Add(1)
			if !p.promoted.Load() {
				return fmt.Sprintf("-MOVED 1 %s\r\n", p.movedTo.Load())
			}
			return "*1\r\n:-2\r\n"
		}
		return "+OK\r\n"
	})
	var refreshed atomic.Bool
	p.tr = New(Dialer{
		Addr: func(context.Context, string) (string, error) {
			if refreshed.Load() {
				return p.replica, nil
			}
			return p.dead, nil
		},
		Dial:    p.dials.dial,
		Refresh: func(context.Context, string) { refreshed.Store(true) },
	}, Config{Slot: func(string) int { return 1 }})
	t.Cleanup(p.tr.Close)
	p.tr.parkFor = parkFor
	p.tr.unreachedFor = time.Hour // a MOVED to dead is never followed
	spec := &Spec{Name: "check", SHA1: "sha", Source: "return {}"}
	var w Watch
	p.tr.Add(&w, Target{Spec: spec, Key: "k", Field: "f"}, 0, func(_ uint64, how Loss) { p.lost <- how })
	return p
}

// waitFor returns once cond holds (within 20s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 20s", what)
		}
	}
}

func (p *parkedOn) wantGone(t *testing.T) {
	t.Helper()
	select {
	case how := <-p.lost:
		if how != Gone {
			t.Fatalf("loss %v, want Gone", how)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no loss reported in 20s (%d checks on the replica)", p.checks.Load())
	}
}

// A replica that refuses a check with MOVED to its master, which the
// tracker could not reach, keeps the watch (parked) and is asked ROLE
// until it answers as a primary: the check is then sent again at once,
// once, and not every backoff meanwhile.
func TestMoved_parkedUntilPromoted(t *testing.T) {
	p := newParked(t, time.Hour)
	waitFor(t, "3 ROLEs after the refusal", func() bool { return p.roles.Load() >= 3 })
	if n := p.checks.Load(); n != 1 {
		t.Fatalf("%d checks while the replica was not promoted, want the 1 refused", n)
	}
	p.promoted.Store(true)
	p.wantGone(t)
	if n := p.checks.Load(); n != 2 {
		t.Errorf("%d checks, want 2: the refused one and one after the promotion", n)
	}
	if n := p.dials.count(p.dead); n != 1 {
		t.Errorf("the unreachable master was dialed %d times, want 1", n)
	}
}

// After parkFor the replica's master is dialed aside, while the probes go
// on; when it still cannot be reached the watch stays parked, and the
// promotion is seen as before.
func TestMoved_parkedWhileMasterDown(t *testing.T) {
	p := newParked(t, 20*time.Millisecond)
	waitFor(t, "3 dials of the dead master", func() bool { return p.dials.count(p.dead) >= 3 })
	if n := p.checks.Load(); n != 1 {
		t.Fatalf("%d checks while the master was down and the replica not promoted, want the 1 refused", n)
	}
	p.promoted.Store(true)
	p.wantGone(t)
	if n := p.checks.Load(); n != 2 {
		t.Errorf("%d checks, want 2", n)
	}
}

// A parked replica that follows another master (another replica of its
// master was promoted) gives the watch back at once: the check is sent
// again, and its MOVED now names a node that answers.
func TestMoved_parkedReplicaFollowsAnother(t *testing.T) {
	p := newParked(t, time.Hour)
	other, _ := refusing(t, 0, "") // the promoted replica: the key is gone
	waitFor(t, "a ROLE after the refusal", func() bool { return p.roles.Load() >= 1 })
	p.movedTo.Store(other)
	p.master.Store(other)
	p.wantGone(t)
	if n := p.checks.Load(); n != 2 {
		t.Errorf("%d checks on the replica that was not promoted, want 2", n)
	}
}
