package track

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// playedNode is a tracker with one node in place and no goroutine: the
// test plays the connection. What the tracker writes lands in out.
func playedNode(t *testing.T) (*Tracker, *node, net.Conn, *bufio.Writer, *bytes.Buffer) {
	t.Helper()
	tr := New(Dialer{Addr: func(context.Context, string) (string, error) { return "node", nil }}, Config{})
	t.Cleanup(tr.Close)
	n := tr.newNode("node")
	tr.nodes["node"] = n
	conn, peer := net.Pipe()
	t.Cleanup(func() { conn.Close(); peer.Close() })
	var buf bytes.Buffer
	return tr, n, conn, bufio.NewWriter(&buf), &buf
}

// commands reads back the commands written to buf, each joined by spaces.
func commands(t *testing.T, w *bufio.Writer, buf *bytes.Buffer) []string {
	t.Helper()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var cmds []string
	r := bufio.NewReader(bytes.NewReader(buf.Bytes()))
	for r.Buffered() > 0 || len(cmds) == 0 {
		v, err := readValue(r)
		if err != nil {
			break
		}
		args := make([]string, len(v.elems))
		for i, e := range v.elems {
			args[i] = e.str
		}
		cmds = append(cmds, strings.Join(args, " "))
	}
	buf.Reset()
	return cmds
}

// A check of a few keys tracks them by its own reads; one of more than
// armApart keys tracks them first (EXISTS) and then reads them untracked:
// the connection tracks in OPTIN mode, since on Redis 7.0 every read
// inside a script tracks all of the call's keys again, a cost that grows
// with the square of the keys per call. A change announced while such a
// check is in flight may have untracked the key after its EXISTS: the
// watch is checked again once the reply is in, and only then; one
// announced during a small check is not (the check ran after it).
func TestCheck_tracking(t *testing.T) {
	tr, n, conn, w, buf := playedNode(t)
	spec := &Spec{Name: "check", SHA1: "sha", Source: "return {}"}
	watches := make([]Watch, armApart+1)
	keys := make([]string, len(watches))
	for i := range watches {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	add := func(ws []Watch) {
		t.Helper()
		for i := range ws {
			if !tr.Add(&ws[i], Target{Spec: spec, Key: keys[i], Field: "f"}, 1, func(uint64, Loss) {}) {
				t.Fatal("Add returned false before Close")
			}
		}
	}
	send := func() sent {
		t.Helper()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		n.loaded[spec] = true
		n.writeChecks(conn, w)
		return n.pending[len(n.pending)-1]
	}
	announce := func() {
		n.push(value{kind: '>', elems: []value{{kind: '$', str: "invalidate"}, {kind: '*', elems: []value{{kind: '$', str: "k0"}}}}})
	}
	reply := func(s sent, left int64) (losses int, queued bool) {
		t.Helper()
		vs := make([]value, len(s.check))
		for i := range vs {
			vs[i] = value{kind: ':', int: left}
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		calls := n.replied(s, value{kind: '*', elems: vs})
		return len(calls), watches[0].queuedOn == n
	}
	fields := func(k int) string { return strings.TrimSpace(strings.Repeat(" f", k)) }

	// A few keys: their check's reads track them.
	add(watches[:1])
	s := send()
	if got, want := commands(t, w, buf), []string{"CLIENT CACHING yes", "EVALSHA_RO sha 1 k0 f"}; !slices.Equal(got, want) {
		t.Fatalf("small check written as %q, want %q", got, want)
	}
	announce()
	if losses, queued := reply(s, 60000); losses != 0 || queued {
		t.Fatalf("small check announced in flight: %d losses, queued %v after the reply; want 0, false", losses, queued)
	}
	watches[0].Stop()

	// More: tracked apart.
	add(watches)
	s = send()
	all := strings.Join(keys, " ")
	want := []string{"CLIENT CACHING yes", "EXISTS " + all, fmt.Sprintf("EVALSHA_RO sha %d %s %s", len(keys), all, fields(len(keys)))}
	if got := commands(t, w, buf); !slices.Equal(got, want) {
		t.Fatalf("check of %d keys written as %q, want %q", len(keys), got, want)
	}
	announce()
	tr.mu.Lock()
	early := watches[0].queuedOn == n
	tr.mu.Unlock()
	if losses, queued := reply(s, 60000); early || losses != 0 || !queued {
		t.Fatalf("announced in flight: queued before the reply %v, after it %v, %d losses; want false, true, 0", early, queued, losses)
	}
	// Sent again, nothing announced: the reply leaves it to its lease's end.
	s = send()
	commands(t, w, buf)
	if losses, queued := reply(s, 60000); losses != 0 || queued {
		t.Fatalf("nothing announced in flight: %d losses, queued %v; want 0, false", losses, queued)
	}
	// Announced in flight, then found gone: reported, not checked again.
	tr.mu.Lock()
	for i := range watches {
		watches[i].timer.Stop()
		n.enqueue(&watches[i])
	}
	tr.mu.Unlock()
	s = send()
	commands(t, w, buf)
	announce()
	if losses, queued := reply(s, -2); losses != len(watches) || queued {
		t.Fatalf("gone after an announcement in flight: %d losses, queued %v; want %d, false", losses, queued, len(watches))
	}
}

// A relayed call of a few keys goes out tracked (its script reads its keys
// again after its writes); a larger one in a MULTI with the EXISTS that
// tracks its keys again after its writes, and its caller gets the call's
// own reply out of the EXEC's; a call refused inside the MULTI (a MOVED)
// answers that refusal, not the EXECABORT that follows.
func TestRelay_tracking(t *testing.T) {
	tr, n, conn, w, buf := playedNode(t)
	spec := &Spec{Name: "renew", SHA1: "rsha", Source: "return {}"}
	send := func(k int) *relay {
		t.Helper()
		args := []string{"EVALSHA", "rsha", strconv.Itoa(k)}
		var targets []Target
		for i := range k {
			targets = append(targets, Target{Key: fmt.Sprintf("k%d", i), Field: "f"})
			args = append(args, targets[i].Key)
		}
		args = append(args, "1000", "1")
		for range k {
			args = append(args, "f")
		}
		r := &relay{script: spec, args: args, renewed: targets, lease: time.Second, reply: make(chan Reply, 1), n: n}
		tr.mu.Lock()
		n.loaded[spec] = true
		n.pending = n.pending[:0]
		n.relays = append(n.relays, r)
		n.writeRelays(conn, w)
		tr.mu.Unlock()
		return r
	}
	answer := func(vs ...value) {
		t.Helper()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if len(vs) != len(n.pending) {
			t.Fatalf("%d replies for %d commands written", len(vs), len(n.pending))
		}
		for i, v := range vs {
			n.replied(n.pending[i], v)
		}
	}
	ok, queued := value{kind: '$', str: "OK"}, value{kind: '$', str: "QUEUED"}
	ones := func(k int) value {
		v := value{kind: '*', elems: make([]value, k)}
		for i := range v.elems {
			v.elems[i] = value{kind: ':', int: 1}
		}
		return v
	}
	wantOnes := func(r *relay, k int) {
		t.Helper()
		got := <-r.reply
		if got.Err != nil || len(got.Val.([]any)) != k || got.Val.([]any)[0] != int64(1) {
			t.Fatalf("reply %v, %v; want %d ones", got.Val, got.Err, k)
		}
	}

	r := send(1)
	if got, want := commands(t, w, buf), []string{"CLIENT CACHING yes", "EVALSHA rsha 1 k0 1000 1 f"}; !slices.Equal(got, want) {
		t.Fatalf("small relay written as %q, want %q", got, want)
	}
	answer(ok, ones(1))
	wantOnes(r, 1)

	k := armApart + 1
	r = send(k)
	got := commands(t, w, buf)
	if len(got) != 5 || got[0] != "MULTI" || !strings.HasPrefix(got[1], "EVALSHA rsha") || got[2] != "CLIENT CACHING yes" || got[3] != "EXISTS "+strings.Join(strings.Fields(got[1])[3:3+k], " ") || got[4] != "EXEC" {
		t.Fatalf("relay of %d keys written as %q, want MULTI, the call, CLIENT CACHING yes, EXISTS of its keys, EXEC", k, got)
	}
	answer(ok, queued, queued, queued, value{kind: '*', elems: []value{ones(k), ok, {kind: ':', int: int64(k)}}})
	wantOnes(r, k)

	r = send(k)
	commands(t, w, buf)
	moved := value{kind: '-', str: "MOVED 15495 127.0.0.1:7001"}
	answer(ok, moved, queued, moved, value{kind: '-', str: "EXECABORT Transaction discarded because of previous errors."})
	if got := <-r.reply; got.Err == nil || got.Err.Error() != moved.str {
		t.Fatalf("refused call: %v, %v; want the error %q", got.Val, got.Err, moved.str)
	}

	r = send(k)
	commands(t, w, buf)
	answer(ok, queued, queued, queued, value{kind: '*', elems: []value{{kind: '-', str: "NOSCRIPT No matching script."}, ok, {kind: ':', int: int64(k)}}})
	if got := <-r.reply; got.Err == nil || !strings.HasPrefix(got.Err.Error(), "NOSCRIPT") {
		t.Fatalf("call without its script: %v, %v; want NOSCRIPT", got.Val, got.Err)
	}
	tr.mu.Lock()
	loaded := n.loaded[spec]
	tr.mu.Unlock()
	if loaded {
		t.Error("after NOSCRIPT the script is still taken as loaded")
	}
}
