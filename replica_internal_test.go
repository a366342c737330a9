package lualock

import (
	"testing"
	"time"
)

// TestReplicaAck_fastReads: a primary is read every replicaFast, for
// replicaFastFor, from a read that finds no replica on a client that has
// seen replicas after an event (a new replication id, a primary read for
// the first time, replicas gone since the last read), and at the usual
// period otherwise: never faster on a deployment without replicas, nor
// again for more reads of none under the same id.
func TestReplicaAck_fastReads(t *testing.T) {
	r := &replicaAck{nodes: map[string]*nodeReplicas{}}
	add := func(addr string) *nodeReplicas {
		nr := &nodeReplicas{last: -1}
		r.nodes[addr] = nr
		return nr
	}
	full := func(now time.Time) time.Time { return now.Add(replicaRefresh) }
	fast := func(step string, nr *nodeReplicas, want bool) {
		t.Helper()
		now := time.Now()
		if got := now.Before(nr.fast); got != want {
			t.Errorf("%s: fast mode %v, want %v", step, got, want)
		}
		wait := r.next(now, full(now))
		if want && wait > replicaFast || !want && wait < replicaRefresh-10*time.Millisecond {
			t.Errorf("%s: the refresher sleeps %v (fast mode %v)", step, wait, want)
		}
		due := r.fastNodes(now.Add(replicaFast))
		if got := len(due) == 1 && due[0] == nr; got != want {
			t.Errorf("%s: due for a fast read %v, want %v", step, got, want)
		}
	}

	a := add("a")
	r.store(a, 0, "id1")
	fast("no replica ever seen, first read", a, false)
	r.store(a, 0, "id2")
	fast("no replica ever seen, new replication id", a, false)

	r.store(a, 1, "id2")
	fast("a replica", a, false)
	r.store(a, 0, "id3") // a failover: the promoted primary has none yet
	fast("none under a new replication id", a, true)
	if n := a.n.Load(); n != 0 {
		t.Errorf("count under a new replication id %d, want 0", n)
	}
	until := a.fast
	r.store(a, 0, "id3")
	if a.fast != until {
		t.Errorf("another read of none under the same id moved the fast reads' end")
	}
	r.store(a, 1, "id3") // the old primary rejoined as a replica
	fast("the replica back", a, false)
	if n := a.n.Load(); n != 1 {
		t.Errorf("count %d, want 1", n)
	}

	r.store(a, 0, "id3") // the replica left
	fast("replicas gone since the last read", a, true)
	if n := a.n.Load(); n != 1 {
		t.Errorf("count while the replica may reconnect %d, want 1 (sticky)", n)
	}
	a.fast = time.Now().Add(-time.Millisecond) // replicaFastFor passed
	r.store(a, 0, "id3")
	fast("none, read again after the fast reads ended", a, false)

	r.store(a, 1, "id3")
	b := add("b") // a cluster's replica promoted: a primary new to the client
	r.store(b, 0, "id4")
	fast("a new primary without replicas", b, true)

	// A fast read that failed is tried again replicaFast later, not at once.
	now := time.Now()
	b.at.Store(now.Add(-time.Second).UnixNano())
	b.tried.Store(now.UnixNano())
	if due := r.fastNodes(now); len(due) != 0 {
		t.Errorf("a primary whose fast read just failed is due again at once")
	}
	if wait := r.next(now, full(now)); wait < replicaFast/2 {
		t.Errorf("the refresher sleeps %v after a failed fast read, want about %v", wait, replicaFast)
	}
}
