package track

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// A new watch's first check waits for Config.Gather without waking the
// sender: a hold stopped before then sends nothing, and a check sent for
// any other reason first takes the waiting first checks along in its call.
// With Gather negative the first check wakes the sender at once.
func TestGather_firstChecks(t *testing.T) {
	setup := func(gather time.Duration) (*Tracker, *node, func() []sent) {
		tr := New(Dialer{Addr: func(context.Context, string) (string, error) { return "node", nil }}, Config{Gather: gather})
		t.Cleanup(tr.Close)
		// The node is in place and has no goroutine: the test plays it.
		n := tr.newNode("node")
		tr.nodes["node"] = n
		conn, peer := net.Pipe()
		t.Cleanup(func() { conn.Close(); peer.Close() })
		out := bufio.NewWriter(io.Discard)
		send := func() []sent {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			n.pending = n.pending[:0]
			n.writeChecks(conn, out)
			var checks []sent
			for _, s := range n.pending {
				if s.check != nil {
					checks = append(checks, s)
				}
			}
			return checks
		}
		return tr, n, send
	}
	spec := &Spec{Name: "check", SHA1: "sha", Source: "return {}"}
	nop := func(uint64, Loss) {}
	kicked := func(n *node) bool {
		select {
		case <-n.kick:
			return true
		default:
			return false
		}
	}

	tr, n, send := setup(time.Hour)
	var a, b, c Watch
	tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, 1, nop)
	tr.mu.Lock()
	gathering, queued := n.gathering, a.queuedOn == n
	tr.mu.Unlock()
	if woken := kicked(n); !gathering || !queued || woken {
		t.Fatalf("after Add: gathering %v, queued %v, sender woken %v; want the check queued for Gather, the sender asleep", gathering, queued, woken)
	}
	a.Stop()
	if got := send(); len(got) != 0 {
		t.Fatalf("%d check calls sent for a watch stopped within Gather, want none", len(got))
	}

	// b's first check is sent; then c is added, and an invalidation
	// queues b again: c's first check goes along, in the same call.
	tr.Add(&b, Target{Spec: spec, Key: "b", Field: "f"}, 2, nop)
	if got := send(); len(got) != 1 || len(got[0].check) != 1 {
		t.Fatalf("sent %v, want b's first check", got)
	}
	tr.mu.Lock()
	b.inflight = false // its reply came
	tr.mu.Unlock()
	tr.Add(&c, Target{Spec: spec, Key: "c", Field: "f"}, 3, nop)
	if kicked(n) {
		t.Fatal("the sender was woken by a first check")
	}
	n.push(value{kind: '>', elems: []value{{kind: '$', str: "invalidate"}, {kind: '*', elems: []value{{kind: '$', str: "b"}}}}})
	if !kicked(n) {
		t.Fatal("an invalidation did not wake the sender")
	}
	got := send()
	if len(got) != 1 || len(got[0].check) != 2 {
		t.Fatalf("sent %v, want one call checking c and b", got)
	}

	tr, n, _ = setup(-1)
	var d Watch
	tr.Add(&d, Target{Spec: spec, Key: "d", Field: "f"}, 4, nop)
	if !kicked(n) {
		t.Fatal("with Gather negative, the first check did not wake the sender")
	}
}
