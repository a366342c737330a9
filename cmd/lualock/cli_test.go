//go:build unix

package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// -q is as quiet as flock: "lualock lock -q -n -E 0 NAME -- cmd" on a
// held lock (or semaphore) writes nothing at all and exits 0; an error the
// user must see (Redis unreachable) is still said.
func TestQuietNotObtained(t *testing.T) {
	s := newServer(t)
	for _, kind := range [][]string{nil, {"-semaphore", "1"}} {
		name := lockName(t) + strings.Join(kind, "")
		ready := readyFile(t)
		holder := s.start(t, nil, append(append(append([]string{"lock"}, kind...), name, "--"), append(trapTerm, ready)...)...)
		waitFile(t, ready)
		p, code := s.run(t, nil, append(append([]string{"lock", "-q", "-n", "-E", "0"}, kind...), name, "--", "echo", "ran")...)
		if code != 0 || p.stdout.String() != "" || p.stderr.String() != "" {
			t.Errorf("%v -q -n -E 0 on a held lock: exit %d, stdout %q, stderr %q; want 0 and nothing", kind, code, p.stdout.String(), p.stderr.String())
		}
		// Without -q it says so.
		p, code = s.run(t, nil, append(append([]string{"lock", "-n"}, kind...), name, "--", "true")...)
		if code != exitNotObtained || !strings.Contains(p.stderr.String(), "not obtained") && !strings.Contains(p.stderr.String(), "no permit") {
			t.Errorf("%v -n on a held lock: exit %d, stderr %q", kind, code, p.stderr.String())
		}
		holder.signal(t, syscall.SIGTERM)
		holder.wait(t, 10*time.Second)
	}
	// Refused connections are retried until -wait is over: the error says
	// so ("cannot reach Redis at …") or, when the last attempt was still
	// under way at the deadline (a loaded machine), that Redis did not
	// answer within -wait. -q prints either.
	p, code := s.run(t, nil, "lock", "-q", "-addr", "127.0.0.1:1", "-wait", "100ms", "x", "--", "true")
	if msg := p.stderr.String(); code != exitError ||
		!strings.Contains(msg, "cannot reach Redis at 127.0.0.1:1") && !strings.Contains(msg, "Redis at 127.0.0.1:1 did not answer within -wait") {
		t.Errorf("-q with Redis unreachable: exit %d, stderr %q; want %d and the error", code, msg, exitError)
	}
}

// A read-write lock's waiting message says why lualock waits: a reader
// waits for the writer, a writer for the readers; a reader never waits for
// other readers (it enters at once, silently).
func TestReadWriteWaitingMessages(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	writer := s.start(t, nil, append([]string{"lock", "-write", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	readyR := readyFile(t) + "-r"
	reader := s.start(t, nil, append([]string{"lock", "-read", name, "--"}, append(trapTerm, readyR)...)...)
	want := "lualock: lock " + name + " is held for writing by the writer pid " + strconv.Itoa(writer.cmd.Process.Pid) + " on "
	waitFor(t, "reader's message", 10*time.Second, func() bool { return strings.Contains(reader.stderr.String(), want) })
	writer.signal(t, syscall.SIGTERM)
	writer.wait(t, 10*time.Second)
	waitFile(t, readyR)

	// Another reader enters at once beside the first, and says nothing.
	if p, code := s.run(t, nil, "lock", "-read", "-n", name, "--", "true"); code != 0 || p.stderr.String() != "" {
		t.Errorf("a second reader: exit %d, stderr %q; want 0 and nothing", code, p.stderr.String())
	}
	w2 := s.start(t, nil, "lock", "-write", name, "--", "true")
	want = "lualock: lock " + name + " is held for reading by pid " + strconv.Itoa(reader.cmd.Process.Pid) + " on "
	waitFor(t, "writer's message", 10*time.Second, func() bool { return strings.Contains(w2.stderr.String(), want) })
	reader.signal(t, syscall.SIGTERM)
	for _, p := range []*proc{reader, w2} {
		if code := p.wait(t, 10*time.Second); code != 0 {
			t.Errorf("exit %d: %s", code, p.stderr.String())
		}
	}
	if got := reader.stderr.String(); strings.Contains(got, "held by") {
		t.Errorf("the reader said %q: a reader is never held by readers", got)
	}
}

// status shows the lualock record (pid, command) of every kind's holder,
// the writer of a read-write lock and a semaphore's permit included.
func TestStatusRecordsEveryKind(t *testing.T) {
	s := newServer(t)
	for _, kind := range []string{"", "-fair", "-read", "-write", "-fenced", "-semaphore"} {
		name := lockName(t) + kind
		ready := readyFile(t)
		args := []string{"lock"}
		switch kind {
		case "":
		case "-semaphore":
			args = append(args, kind, "2")
		default:
			args = append(args, kind)
		}
		holder := s.start(t, nil, append(append(args, name, "--"), append(trapTerm, ready)...)...)
		waitFile(t, ready)
		st := s.status(t, name)
		if len(st.Holders) == 0 {
			t.Fatalf("%q: no holder in %+v", kind, st)
		}
		for _, h := range st.Holders {
			if h.Lualock == nil || h.Lualock.PID != holder.cmd.Process.Pid || !strings.HasPrefix(h.Lualock.Command, "sh -c ") {
				t.Errorf("%q: holder %s has record %+v, want pid %d", kind, h.Field, h.Lualock, holder.cmd.Process.Pid)
			}
		}
		p, _ := s.run(t, nil, "status", name)
		if want := "lualock pid " + strconv.Itoa(holder.cmd.Process.Pid) + " on "; !strings.Contains(p.stdout.String(), want) {
			t.Errorf("%q: status text lacks %q: %q", kind, want, p.stdout.String())
		}
		if kind == "-semaphore" {
			if st.Available == nil || *st.Available != 1 || len(st.Permits) != 1 || *st.Permits[0].RemainingMS <= 0 {
				t.Errorf("semaphore status %+v: want 1 permit available and 1 taken, with its lease", st)
			}
			if want := "semaphore " + name + ": 1 permits available, 1 taken"; !strings.Contains(p.stdout.String(), want) {
				t.Errorf("status text lacks %q: %q", want, p.stdout.String())
			}
		}
		holder.signal(t, syscall.SIGTERM)
		holder.wait(t, 10*time.Second)
	}
}
