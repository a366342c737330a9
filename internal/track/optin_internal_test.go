package track

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
	// send writes the queued checks and returns the last one; arming
	// are the commands written before it.
	var arming []sent
	send := func() sent {
		t.Helper()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		n.loaded[spec] = true
		from := len(n.pending)
		n.writeChecks(conn, w)
		arming = n.pending[from : len(n.pending)-1]
		return n.pending[len(n.pending)-1]
	}
	requeueAll := func() {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for i := range watches {
			watches[i].timer.Stop()
			n.enqueue(&watches[i])
		}
	}
	anyQueued := func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for i := range watches {
			if watches[i].queuedOn == n {
				return true
			}
		}
		return false
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
	// Sent again, nothing announced: the reply leaves them to their
	// lease's end.
	requeueAll()
	s = send()
	commands(t, w, buf)
	if len(s.check) != len(watches) {
		t.Fatalf("check of %d watches, want %d", len(s.check), len(watches))
	}
	if losses, _ := reply(s, 60000); losses != 0 || anyQueued() {
		t.Fatalf("nothing announced in flight: %d losses, queued %v; want 0, false", losses, anyQueued())
	}
	// Its arming refused (a BUSY that ended before the check ran): the
	// holds it found are checked again, after the backoff.
	requeueAll()
	s = send()
	commands(t, w, buf)
	tr.mu.Lock()
	for _, a := range arming {
		n.replied(a, value{kind: '-', str: "BUSY Redis is busy running a script."})
	}
	tr.mu.Unlock()
	if losses, _ := reply(s, 60000); losses != 0 {
		t.Fatalf("check with its arming refused: %d losses, want 0", losses)
	}
	for i := range watches {
		waitQueued(t, tr, n, &watches[i])
	}
	// Announced in flight, then found gone: reported, not checked again.
	requeueAll()
	s = send()
	commands(t, w, buf)
	announce()
	if losses, queued := reply(s, -2); losses != len(watches) || queued {
		t.Fatalf("gone after an announcement in flight: %d losses, queued %v; want %d, false", losses, queued, len(watches))
	}
}

// waitQueued waits (up to 10s) until x is queued on n.
func waitQueued(t *testing.T, tr *Tracker, n *node, x *Watch) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		tr.mu.Lock()
		queued := x.queuedOn == n
		tr.mu.Unlock()
		if queued {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("watch of %s not checked again in 10s", x.target.Key)
		}
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

	// Its CLIENT CACHING refused (a BUSY that ended before the call
	// ran): the call's writes left its keys untracked, and the watches of
	// its keys are checked again, which tracks them.
	var x Watch
	if !tr.Add(&x, Target{Spec: &Spec{Name: "check", SHA1: "sha"}, Key: "k0", Field: "f"}, 1, func(uint64, Loss) {}) {
		t.Fatal("Add returned false before Close")
	}
	tr.mu.Lock()
	n.queue, x.queuedOn, x.fresh = n.queue[:0], nil, false // its first check was sent
	tr.mu.Unlock()
	r = send(1)
	commands(t, w, buf)
	answer(value{kind: '-', str: "BUSY Redis is busy running a script."}, ones(1))
	wantOnes(r, 1)
	tr.mu.Lock()
	again := x.queuedOn == n
	tr.mu.Unlock()
	if !again {
		t.Fatal("after a renewal whose CLIENT CACHING was refused, the watch of its key was not checked again")
	}
	x.Stop()

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

// A server (or an ACL) that turns tracking on but refuses CLIENT CACHING
// would track nothing the checks read: its handshake fails as one
// without client-side caching, and nothing is sent to it.
func TestHandshake_cachingRefused(t *testing.T) {
	addr, _ := fakeNode(t, func(cmd []value) string {
		if len(cmd) > 1 && strings.EqualFold(cmd[0].str, "CLIENT") && strings.EqualFold(cmd[1].str, "CACHING") {
			return "-NOPERM User has no permissions to run the 'client|caching' command\r\n"
		}
		return "+OK\r\n"
	})
	var d net.Dialer
	dial := func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }
	tr := New(Dialer{Addr: func(context.Context, string) (string, error) { return addr, nil }, Dial: dial}, Config{Timeout: 10 * time.Second})
	defer tr.Close()
	n := tr.newNode(addr)
	conn, _, _, err := n.handshake(context.Background(), try{dial: dial, addr: addr})
	if conn != nil {
		conn.Close()
	}
	if !errors.Is(err, errUnsupported) {
		t.Fatalf("handshake with CLIENT CACHING refused: %v, want errUnsupported", err)
	}
}
