//go:build unix

package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lualock/lualock/tests/harness"
)

// kill -9 of lualock while a second lualock lock waits: the supervisor
// kills the command and gives the hold back, and the second command starts
// at once. The holder's lease is 60s, so only the release can explain a
// start within 30s of the kill; the second command also checks that the
// first one's process is gone when it starts. Every kind on standalone
// Redis, two on the cluster.
func TestKill9HandsOver(t *testing.T) {
	s := newServer(t)
	for _, tc := range []struct {
		kind         string
		first, after []string // the flags of the holder and of the waiter
	}{
		{"reentrant", nil, nil},
		{"fair", []string{"-fair"}, []string{"-fair"}},
		{"read", []string{"-read"}, []string{"-write"}},
		{"write", []string{"-write"}, []string{"-read"}},
		{"fenced", []string{"-fenced"}, []string{"-fenced"}},
		{"semaphore", []string{"-semaphore", "1"}, []string{"-semaphore", "1"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			name := handOver(t, s, tc.first, tc.after)
			if tc.kind != "semaphore" && s.exists(t, name) {
				t.Errorf("lock %s still exists after both commands ended", name)
			}
		})
	}
	t.Run("cluster", func(t *testing.T) {
		cl := &server{addr: harness.SharedCluster(t).Addrs()[0]}
		for _, flags := range [][]string{nil, {"-semaphore", "1"}} {
			handOver(t, cl, flags, flags)
		}
	})
}

// handOver runs a holder with flags first and a waiter with flags after on
// the lock lockName(t) of s, kills the holder's lualock with SIGKILL and
// checks that the waiter's command starts, after the holder's command is
// gone, well before the holder's 60s lease could have run out. It returns
// the lock's name.
func handOver(t *testing.T, s *server, first, after []string) string {
	t.Helper()
	name := lockName(t) + strings.Join(first, "")
	pidFile := filepath.Join(t.TempDir(), "pid")
	env := []string{"LUALOCK_WATCHDOG_LEASE=60s"}
	args := append(append([]string{"lock"}, first...), name, "--", "sh", "-c", `echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 120`, "sh", pidFile)
	holder := s.start(t, env, args...)
	cmdPID := readPIDs(t, pidFile)[0]

	check := `if kill -0 "$1" 2>/dev/null; then echo "overlap: $1 alive"; fi; echo started`
	args = append(append([]string{"lock", "-wait", "50s"}, after...), name, "--", "sh", "-c", check, "sh", strconv.Itoa(cmdPID))
	next := s.start(t, env, args...)
	// It waits: it said so (a permit's waiter says so after 1s).
	waitFor(t, "the second lualock waiting", 10*time.Second, func() bool {
		return strings.Contains(next.stderr.String(), "waiting")
	})
	if err := holder.cmd.Process.Kill(); err != nil { // lualock's pid only
		t.Fatal(err)
	}
	killed := time.Now()
	if code := next.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("%v: second lualock: exit %d: %s", first, code, next.stderr.String())
	}
	t.Logf("%v: the second command started %v after kill -9 of the holder (lease 60s)", first, time.Since(killed).Round(time.Millisecond))
	if out := next.stdout.String(); out != "started\n" {
		t.Errorf("%v: second command printed %q, want %q", first, out, "started\n")
	}
	if got := holder.stderr.String(); got != "" {
		t.Errorf("%v: the supervisor said %q, want nothing", first, got)
	}
	return name
}

// killHolderAndSupervisor kills lualock and its supervisor (the parent of
// the command cmdPID) with SIGKILL, stopping the supervisor first so that it
// never sees lualock die: nothing is left to give the hold back.
func killHolderAndSupervisor(t *testing.T, holder *proc, cmdPID int) {
	t.Helper()
	sup := ppid(t, cmdPID)
	if sup == os.Getpid() || sup <= 1 || sup == holder.cmd.Process.Pid {
		t.Fatalf("supervisor pid %d", sup)
	}
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-holder.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// blipServer is a loopback listener in front of target that closes the
// first drop connections at once (the client reads EOF) and forwards the
// later ones. It returns its address and a count of the connections it
// accepted; everything stops when the test ends.
func blipServer(t *testing.T, target string, drop int) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if int(accepted.Add(1)) <= drop {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String(), &accepted
}

// A blip at lualock's first contact with Redis (the connection closed
// before any answer, twice) does not fail lualock lock: it tries again
// within -wait, or within 5s with -n or without -wait.
func TestFirstContactRetried(t *testing.T) {
	s := newServer(t)
	for _, flags := range [][]string{{"-n"}, {"-wait", "10s"}, nil} {
		addr, accepted := blipServer(t, s.addr, 2)
		args := append(append([]string{"lock", "-addr", addr}, flags...), lockName(t), "--", "echo", "ran")
		p, code := s.run(t, nil, args...)
		if code != 0 || p.stdout.String() != "ran\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and the command run", flags, code, p.stdout.String(), p.stderr.String())
		}
		if n := accepted.Load(); n < 3 {
			t.Errorf("%v: %d connections, want the 2 dropped ones and more", flags, n)
		}
	}
	// status keeps failing at once: one attempt.
	addr, accepted := blipServer(t, s.addr, 1)
	if p, code := s.run(t, nil, "status", "-addr", addr, lockName(t)); code != exitError || !strings.Contains(p.stderr.String(), "cannot reach Redis at "+addr) {
		t.Errorf("status through a blip: exit %d, stderr %q; want %d", code, p.stderr.String(), exitError)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("status: %d connections, want 1", n)
	}
}
