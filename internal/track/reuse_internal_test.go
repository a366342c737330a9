package track

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
)

// The reply to a check sent for an earlier add of a Watch is stale: a
// "gone" it brings (the earlier hold's release deleted the key) is not
// reported for the hold the Watch was added again for, and leaves that
// add's own check to come; the reply to the current add's check is.
func TestReplied_staleCheckOfEarlierAdd(t *testing.T) {
	tr := New(Dialer{Addr: func(context.Context, string) (string, error) { return "node", nil }}, Config{})
	defer tr.Close()
	// The node is in place and has no goroutine: the test plays it.
	n := tr.newNode("node")
	tr.nodes["node"] = n
	conn, peer := net.Pipe()
	defer conn.Close()
	defer peer.Close()
	out := bufio.NewWriter(io.Discard)

	var lost []uint64
	report := func(tag uint64, _ Loss) { lost = append(lost, tag) }
	spec := &Spec{Name: "check", SHA1: "sha", Source: "return {}"}
	target := Target{Spec: spec, Key: "k", Field: "f"}
	var w Watch
	sendQueued := func() sent {
		t.Helper()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		n.pending = n.pending[:0]
		n.writeChecks(conn, out)
		s := n.pending[len(n.pending)-1] // after the SCRIPT LOAD, if any
		if len(s.check) != 1 || s.check[0].w != &w {
			t.Fatalf("check sent for %d watches, want w alone", len(s.check))
		}
		return s
	}
	reply := func(s sent, left int64) {
		t.Helper()
		tr.mu.Lock()
		calls := n.replied(s, value{kind: '*', elems: []value{{kind: ':', int: left}}})
		tr.mu.Unlock()
		for _, c := range calls {
			c.lost(c.tag, c.how)
		}
	}

	if !tr.Add(&w, target, 1, report) {
		t.Fatal("Add returned false before Close")
	}
	first := sendQueued() // the first hold's check, in flight
	w.Stop()
	if !tr.Add(&w, target, 2, report) {
		t.Fatal("Add returned false before Close")
	}
	reply(first, -2) // the first hold's key was gone
	if len(lost) != 0 {
		t.Fatalf("losses %v reported from the check of an earlier add", lost)
	}
	tr.mu.Lock()
	stopped, queued := w.stopped, w.queuedOn == n
	tr.mu.Unlock()
	if stopped || !queued {
		t.Fatalf("after the stale reply: stopped %v, queued %v; want the second add live with its check queued", stopped, queued)
	}
	second := sendQueued()
	reply(second, -2)
	if len(lost) != 1 || lost[0] != 2 {
		t.Fatalf("losses %v, want the second add's (tag 2) alone", lost)
	}
}
