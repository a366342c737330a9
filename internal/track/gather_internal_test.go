package track

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// gatherNode returns a tracker with Config.Gather gather and its node,
// in place and with no goroutine (the test plays it), and a send that
// writes the queue's checks as the sender would and returns them.
func gatherNode(t *testing.T, gather time.Duration) (*Tracker, *node, func() []sent) {
	tr := New(Dialer{Addr: func(context.Context, string) (string, error) { return "node", nil }}, Config{Gather: gather})
	t.Cleanup(tr.Close)
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

// A new watch's first check waits for Config.Gather without waking the
// sender: a hold stopped before then sends nothing, and a check sent for
// any other reason first takes the waiting first checks along in its call;
// when the wait ends with every first check stopped, the sender sleeps on
// and the next wait is longer.
// With Gather negative the first check wakes the sender at once.
func TestGather_firstChecks(t *testing.T) {
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

	tr, n, send := gatherNode(t, time.Hour)
	var a, b, c, e Watch
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

	// When the gathering ends with every watch queued stopped, the
	// sender is not woken and the queue is emptied; one live watch gets
	// it woken.
	tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, 5, nop)
	tr.Add(&e, Target{Spec: spec, Key: "e", Field: "f"}, 6, nop)
	a.Stop()
	n.gathered() // what the timer runs after Gather
	tr.mu.Lock()
	gathering, left := n.gathering, len(n.queue)
	tr.mu.Unlock()
	if woken := kicked(n); gathering || left != 2 || !woken {
		t.Fatalf("one of two first checks stopped, gathered: gathering %v, %d queued, sender woken %v; want false, 2, true", gathering, left, woken)
	}
	if got := send(); len(got) != 1 || len(got[0].check) != 1 || got[0].check[0].w != &e {
		t.Fatalf("sent %v, want e's check alone", got)
	}
	tr.mu.Lock()
	e.inflight = false // its reply came
	tr.mu.Unlock()
	e.Stop()
	tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, 7, nop)
	tr.Add(&e, Target{Spec: spec, Key: "e", Field: "f"}, 8, nop)
	a.Stop()
	e.Stop()
	n.gathered()
	tr.mu.Lock()
	gathering, left, count := n.gathering, len(n.queue), n.queued
	off := a.queuedOn == nil && e.queuedOn == nil
	tr.mu.Unlock()
	if woken := kicked(n); gathering || left != 0 || count != 0 || !off || woken {
		t.Fatalf("both stopped, gathered: gathering %v, %d queued (count %d), watches unqueued %v, sender woken %v; want false, 0, 0, true, false", gathering, left, count, off, woken)
	}
	if got := send(); len(got) != 0 {
		t.Fatalf("%d check calls sent after every first check stopped, want none", len(got))
	}
	// The waits that end with nothing to send stretch: twice as long each
	// time, up to gatherStretch × Gather; one that ends with a check to
	// send brings the wait back to Gather.
	tr.mu.Lock()
	w1 := n.wait
	tr.mu.Unlock()
	if w1 != 2*time.Hour {
		t.Fatalf("wait after one empty gathering = %v, want 2 × Gather", w1)
	}
	for range 5 {
		tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, 9, nop)
		a.Stop()
		n.gathered()
	}
	tr.mu.Lock()
	w2 := n.wait
	tr.mu.Unlock()
	tr.Add(&e, Target{Spec: spec, Key: "e", Field: "f"}, 10, nop)
	n.gathered()
	kicked(n)
	tr.mu.Lock()
	w3 := n.wait
	tr.mu.Unlock()
	if w2 != gatherStretch*time.Hour || w3 != time.Hour {
		t.Fatalf("waits %v after empty gatherings, %v after one with a check; want %v, %v", w2, w3, gatherStretch*time.Hour, time.Hour)
	}
	if got := send(); len(got) != 1 {
		t.Fatalf("sent %v, want e's check", got)
	}
	tr.mu.Lock()
	e.inflight = false
	tr.mu.Unlock()
	e.Stop()

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
	// Watches stopped after their check went out leave the count alone.
	b.Stop()
	c.Stop()
	tr.mu.Lock()
	count = n.queued
	tr.mu.Unlock()
	if count != 0 {
		t.Fatalf("queued = %d after stopping watches already sent, want 0", count)
	}

	tr, n, _ = gatherNode(t, -1)
	var d Watch
	tr.Add(&d, Target{Spec: spec, Key: "d", Field: "f"}, 4, nop)
	if !kicked(n) {
		t.Fatal("with Gather negative, the first check did not wake the sender")
	}
}

// A handle reuses its Watch for each hold: stopped and added again while
// its first check waits, it counts as waiting again, however often that
// happens in one gathering, and the other watches' first checks are sent
// too. A gathering whose checks another send took along leaves the wait
// at Gather.
func TestGather_reusedWatch(t *testing.T) {
	tr, n, send := gatherNode(t, time.Hour)
	sendChecks := func() (k int) {
		for _, s := range send() {
			k += len(s.check)
		}
		return k
	}
	woken := func() bool {
		select {
		case <-n.kick:
			return true
		default:
			return false
		}
	}
	spec := &Spec{Name: "check", SHA1: "sha", Source: "return {}"}
	nop := func(uint64, Loss) {}
	var a, b Watch
	for i := range 5 {
		tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, uint64(i), nop)
		a.Stop()
	}
	tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, 5, nop) // kept
	tr.mu.Lock()
	count := n.queued
	tr.mu.Unlock()
	n.gathered()
	if w := woken(); !w || count != 1 {
		t.Fatalf("a watch added 6 times, stopped 5: queued %d, sender woken %v; want 1, true", count, w)
	}
	if got := sendChecks(); got != 1 {
		t.Fatalf("%d first checks sent, want a's", got)
	}
	a.Stop()
	tr.mu.Lock()
	count = n.queued
	tr.mu.Unlock()
	if count != 0 {
		t.Fatalf("queued %d after a's check went out and a stopped, want 0", count)
	}

	// Short holds, then another watch: its first check is sent.
	for i := range 5 {
		tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, uint64(10+i), nop)
		a.Stop()
	}
	n.gathered()
	tr.Add(&b, Target{Spec: spec, Key: "b", Field: "f"}, 20, nop)
	n.gathered()
	if !woken() {
		t.Fatal("b's gathering ended without waking the sender")
	}
	if got := sendChecks(); got != 1 {
		t.Fatalf("%d first checks sent, want b's", got)
	}

	// A first check sent by another send before its gathering ends: the
	// next wait is Gather, not longer.
	tr.mu.Lock()
	b.inflight = false
	n.wait = 4 * time.Hour
	tr.mu.Unlock()
	b.Stop()
	tr.Add(&a, Target{Spec: spec, Key: "a", Field: "f"}, 30, nop)
	if got := sendChecks(); got != 1 {
		t.Fatalf("%d first checks sent, want a's", got)
	}
	n.gathered()
	tr.mu.Lock()
	wait := n.wait
	tr.mu.Unlock()
	if wait != time.Hour {
		t.Fatalf("wait after a gathering whose check went out with another send = %v, want Gather", wait)
	}
}
