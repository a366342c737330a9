//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/tests/harness"
)

// procAlive reports whether pid is a live process (not a zombie).
func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: a zombie counts as alive
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// readPIDs waits for the files and returns the pids written in them.
func readPIDs(t *testing.T, files ...string) []int {
	t.Helper()
	var pids []int
	for _, f := range files {
		var pid int
		waitFor(t, "pid in "+f, 10*time.Second, func() bool {
			b, err := os.ReadFile(f)
			if err != nil {
				return false
			}
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
			return err == nil
		})
		pids = append(pids, pid)
		// Whatever the test's outcome, none is left behind.
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	return pids
}

// treeCommand is a shell that starts a grandchild in its group and one in
// a session of its own (setsid), writes their pids and its own to $1, $2
// and $3, and waits.
var treeCommand = []string{"sh", "-c", `sleep 60 & echo $! > "$1"; setsid sleep 61 & echo $! > "$2"; echo $$ > "$3"; wait`, "sh"}

func treeFiles(t *testing.T) []string {
	d := t.TempDir()
	return []string{filepath.Join(d, "gc"), filepath.Join(d, "gc-setsid"), filepath.Join(d, "sh")}
}

// kill -9 of lualock takes the command and everything it started down with
// it, grandchildren in the command's group and out of it; so the next
// holder, once the lease ran out, never runs beside any of them.
func TestKill9TakesTheCommandDown(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	env := []string{"LUALOCK_WATCHDOG_LEASE=1s"}
	files := treeFiles(t)
	holder := s.start(t, env, append(append([]string{"lock", name, "--"}, treeCommand...), files...)...)
	pids := readPIDs(t, files...)
	for _, pid := range pids {
		if !procAlive(pid) {
			t.Fatalf("pid %d not running before the kill", pid)
		}
	}
	// The next holder starts waiting now; its command checks that none of
	// the first command's processes is alive.
	check := `for p in "$@"; do if kill -0 "$p" 2>/dev/null; then echo "overlap: $p alive"; fi; done; echo checked`
	args := []string{"lock", name, "--", "sh", "-c", check, "sh"}
	for _, pid := range pids {
		args = append(args, strconv.Itoa(pid))
	}
	next := s.start(t, env, args...)
	waitFor(t, "next holder waiting", 10*time.Second, func() bool { return strings.Contains(next.stderr.String(), "is held by") })

	killed := time.Now()
	if err := holder.cmd.Process.Kill(); err != nil { // lualock's pid only
		t.Fatal(err)
	}
	waitFor(t, "every process of the command gone", 5*time.Second, func() bool {
		for _, pid := range pids {
			if procAlive(pid) {
				return false
			}
		}
		return true
	})
	t.Logf("every process of the command gone %v after kill -9 of lualock", time.Since(killed))
	if code := next.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("next holder exit %d: %s", code, next.stderr.String())
	}
	if out := next.stdout.String(); out != "checked\n" {
		t.Errorf("next holder's command saw: %q", out)
	}
}

// A lost lock stops the command's whole tree: SIGTERM to its group and its
// descendants, SIGKILL after -grace to what is left.
func TestLostStopsGrandchildren(t *testing.T) {
	s := newServer(t)
	for _, tc := range []struct {
		name  string
		env   []string
		flags []string
	}{
		{"deleted", []string{"LUALOCK_WATCHDOG_LEASE=600ms"}, []string{"-grace", "1s"}},
		{"lease", nil, []string{"-lease", "1s", "-grace", "1s"}},
		{"ignores-term", []string{"LUALOCK_WATCHDOG_LEASE=600ms"}, []string{"-grace", "300ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			files := treeFiles(t)
			command := treeCommand
			if tc.name == "ignores-term" {
				command = []string{"sh", "-c", `trap '' TERM; sleep 60 & echo $! > "$1"; setsid sh -c 'trap "" TERM; sleep 61' & echo $! > "$2"; echo $$ > "$3"; while :; do sleep 0.05; done`, "sh"}
			}
			p := s.start(t, tc.env, append(append(append([]string{"lock"}, tc.flags...), name, "--"), append(command, files...)...)...)
			pids := readPIDs(t, files...)
			if tc.name != "lease" {
				if err := s.rdb.Del(context.Background(), name).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if code := p.wait(t, 10*time.Second); code != exitLost {
				t.Fatalf("exit %d, want %d: %s", code, exitLost, p.stderr.String())
			}
			for _, pid := range pids {
				if procAlive(pid) {
					t.Errorf("pid %d still running after lualock exited", pid)
				}
			}
			if tc.name == "ignores-term" && !strings.Contains(p.stderr.String(), "after SIGTERM: sending SIGKILL") {
				t.Errorf("stderr lacks the SIGKILL message: %q", p.stderr.String())
			}
		})
	}
}

// What the command leaves running when it exits is stopped before the lock
// is released.
func TestLeftoversStoppedBeforeRelease(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	gc := filepath.Join(t.TempDir(), "gc")
	p, code := s.run(t, nil, "lock", name, "--", "sh", "-c", `setsid sleep 60 & echo $! > "$1"; exit 5`, "sh", gc)
	if code != 5 {
		t.Fatalf("exit %d, want the command's 5: %s", code, p.stderr.String())
	}
	pid := readPIDs(t, gc)[0]
	if procAlive(pid) {
		t.Errorf("the command's leftover %d still runs after lualock exited", pid)
	}
}

// The supervisor killed from outside: lualock kills the command's group and
// exits 1.
func TestSupervisorKilled(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	files := treeFiles(t)
	p := s.start(t, nil, append(append([]string{"lock", name, "--"}, treeCommand...), files...)...)
	pids := readPIDs(t, files...)
	sup := ppid(t, pids[2])
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	for _, pid := range pids {
		if procAlive(pid) {
			t.Errorf("pid %d still running after lualock exited", pid)
		}
	}
	if s.exists(t, name) {
		t.Error("lock still held after lualock exited")
	}
}

func ppid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skip("no /proc")
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, _ := strconv.Atoi(f[1])
	return n
}

// Exit statuses of lualock itself.
func TestExitStatuses(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want int
		msg  string
	}{
		{[]string{"--", "no-such-command-lualock-test"}, exitNotFound, "no-such-command-lualock-test: command not found"},
		{[]string{"--", filepath.Join(dir, "missing")}, exitNotFound, "no such file"},
		{[]string{"--", notExec}, exitCannotExec, "permission denied"},
		{[]string{"--", dir}, exitCannotExec, dir},
		{[]string{"--", "sh", "-c", "exit 9"}, 9, ""},
	} {
		p, code := s.run(t, nil, append([]string{"lock", name}, tc.args...)...)
		if code != tc.want || !strings.Contains(p.stderr.String(), tc.msg) || p.stdout.String() != "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, p.stderr.String(), tc.want, tc.msg)
		}
		if s.exists(t, name) {
			t.Errorf("%q: lock left held", tc.args)
		}
	}
}

// -E sets the exit status of "not obtained"; -n is -wait 0; -q leaves the
// status alone to say it. A -wait counts from lualock's start, connection
// included: it is 100ms plus a canary run's cost measured in the same
// test, so that the process gets to wait for the lock on a loaded machine
// instead of giving up connecting (which is exit status 1, whatever -E
// says).
func TestNotObtainedStatus(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	holder := s.start(t, nil, append([]string{"lock", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	wait := waitArg(100*time.Millisecond, s.runCost(t))
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-n"}, exitNotObtained},
		{[]string{"-n", "-E", "75"}, 75},
		{[]string{"-wait", wait, "-E", "0"}, 0},
		{[]string{"-E", "9", "-wait", wait, "-q"}, 9},
	} {
		args := append(append([]string{"lock"}, tc.args...), name, "--", "echo", "ran")
		p, code := s.run(t, nil, args...)
		said := strings.Contains(p.stderr.String(), "not obtained within")
		quiet := tc.args[len(tc.args)-1] == "-q" // says nothing at all, as flock
		if code != tc.want || p.stdout.String() != "" || said == quiet || quiet && p.stderr.String() != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d", tc.args, code, p.stdout.String(), p.stderr.String(), tc.want)
		}
	}
	holder.signal(t, syscall.SIGTERM)
	holder.wait(t, 5*time.Second)
}

// While it waits, lualock says who holds the lock (a lualock process: its
// pid, host and command), the lease left and, for a fair lock, its place in
// the queue; then a line when it has the lock. -q keeps it quiet. A lock
// obtained at once prints nothing.
func TestWaitingMessages(t *testing.T) {
	s := newServer(t)
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "reentrant", true: "fair"}[fair], func(t *testing.T) {
			name := lockName(t)
			flags := []string{"lock"}
			if fair {
				flags = append(flags, "-fair")
			}
			p, code := s.run(t, nil, append(append(flags, name, "--"), "true")...)
			if code != 0 || p.stderr.String() != "" {
				t.Errorf("a free lock: exit %d, stderr %q; want 0 and nothing", code, p.stderr.String())
			}
			ready := readyFile(t)
			holder := s.start(t, nil, append(append(flags, name, "--"), append(trapTerm, ready)...)...)
			waitFile(t, ready)
			loud := s.start(t, nil, append(flags, name, "--", "true")...)
			want := "lualock: lock " + name + " is held by pid " + strconv.Itoa(holder.cmd.Process.Pid) + " on "
			waitFor(t, "waiting message", 10*time.Second, func() bool { return strings.Contains(loud.stderr.String(), want) })
			quiet := s.start(t, nil, append(flags, "-q", name, "--", "true")...)
			if fair {
				waitFor(t, "second waiter queued", 10*time.Second, func() bool {
					return s.rdb.LLen(context.Background(), keys.Of(name).Queue).Val() == 2
				})
			} else {
				time.Sleep(300 * time.Millisecond) // the quiet waiter is waiting by now
			}
			msg := loud.stderr.String()
			for _, part := range []string{"(sh -c ", "lease ", " left; waiting"} {
				if !strings.Contains(msg, part) {
					t.Errorf("waiting message lacks %q: %q", part, msg)
				}
			}
			if fair && !strings.Contains(msg, "(place 1 of 1 in the queue)") {
				t.Errorf("fair waiting message lacks the place: %q", msg)
			}
			holder.signal(t, syscall.SIGTERM)
			for _, w := range []*proc{holder, loud, quiet} {
				if code := w.wait(t, 10*time.Second); code != 0 {
					t.Fatalf("exit %d: %s", code, w.stderr.String())
				}
			}
			if !strings.Contains(loud.stderr.String(), "lualock: lock "+name+" obtained after ") {
				t.Errorf("no line when obtained: %q", loud.stderr.String())
			}
			if quiet.stderr.String() != "" {
				t.Errorf("-q printed %q", quiet.stderr.String())
			}
		})
	}
}

// status shows who the lualock holders are, and a fair lock's queue with
// deadlines, without being told the kind; -fair is accepted.
func TestStatusHoldersAndQueue(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	holder := s.start(t, nil, append([]string{"lock", "-fair", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	var waiters []*proc
	for i := range 2 {
		waiters = append(waiters, s.start(t, nil, "lock", "-fair", "-q", name, "--", "true"))
		waitFor(t, "waiter queued", 10*time.Second, func() bool {
			return s.rdb.LLen(context.Background(), keys.Of(name).Queue).Val() == int64(i+1)
		})
	}
	for _, args := range [][]string{{"status", "-json", name}, {"status", "-json", "-fair", name}} {
		p, code := s.run(t, nil, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, p.stderr.String())
		}
		var st lockStatus
		if err := json.Unmarshal([]byte(p.stdout.String()), &st); err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		if !st.Locked || len(st.Holders) != 1 || st.Holders[0].Lualock == nil {
			t.Fatalf("%q: %s", args, p.stdout.String())
		}
		li := st.Holders[0].Lualock
		since, err := time.Parse(time.RFC3339Nano, li.Since)
		if li.PID != holder.cmd.Process.Pid || li.Host != host || !strings.HasPrefix(li.Command, "sh -c 'trap ") || err != nil || time.Since(since) > time.Minute {
			t.Errorf("%q: holder info %+v", args, li)
		}
		if len(st.Queue) != 2 || st.Queue[0].DeadlineMS == nil || *st.Queue[0].RemainingMS <= 0 || st.Queue[1].DeadlineMS == nil {
			t.Errorf("%q: queue %+v", args, st.Queue)
		}
		// The raw JSON names the fields as documented.
		var raw map[string]any
		_ = json.Unmarshal([]byte(p.stdout.String()), &raw)
		h := raw["holders"].([]any)[0].(map[string]any)["lualock"].(map[string]any)
		for _, k := range []string{"host", "pid", "command", "since"} {
			if _, ok := h[k]; !ok {
				t.Errorf("holders[0].lualock lacks %q: %v", k, h)
			}
		}
	}
	p, _ := s.run(t, nil, "status", name)
	for _, want := range []string{"lualock pid " + strconv.Itoa(holder.cmd.Process.Pid) + " on ", "fair queue: 2 waiting", "1. ", "2. ", " deadline "} {
		if !strings.Contains(p.stdout.String(), want) {
			t.Errorf("status text lacks %q:\n%s", want, p.stdout.String())
		}
	}
	// The holder key shares the lock's slot and expires with the hold.
	field := ""
	for f := range s.rdb.HGetAll(context.Background(), name).Val() {
		field = f
	}
	key := holderKey(name, field)
	if ttl := s.rdb.PTTL(context.Background(), key).Val(); ttl <= 0 || ttl > 30*time.Second {
		t.Errorf("holder key %s: PTTL %v, want the lease", key, ttl)
	}
	if redisSlot(key) != redisSlot(name) {
		t.Errorf("holder key %s is not in the lock's slot", key)
	}
	holder.signal(t, syscall.SIGTERM)
	holder.wait(t, 5*time.Second)
	for _, w := range waiters {
		w.wait(t, 10*time.Second)
	}
	if s.exists(t, key) {
		t.Errorf("holder key %s left after the hold", key)
	}
}

// redisSlot is the key's hash slot on the part Redis Cluster hashes.
func redisSlot(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// The command learns from its environment that it holds the lock.
func TestChildEnvironment(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	show := []string{"sh", "-c", `echo "$LUALOCK_NAME|$LUALOCK_HOLDER|$LUALOCK_LEASE"; ` + bin + ` status -json "$LUALOCK_NAME"`}
	for _, tc := range []struct {
		flags []string
		env   []string
		lease string
	}{
		{nil, nil, "30s"},
		{nil, []string{"LUALOCK_WATCHDOG_LEASE=2s"}, "2s"},
		{[]string{"-lease", "5s"}, nil, "5s"},
	} {
		p, code := s.run(t, tc.env, append(append(append([]string{"lock"}, tc.flags...), name, "--"), show...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr.String())
		}
		line, js, _ := strings.Cut(p.stdout.String(), "\n")
		var st lockStatus
		if err := json.Unmarshal([]byte(js), &st); err != nil || len(st.Holders) != 1 {
			t.Fatalf("status: %v %q", err, js)
		}
		if want := name + "|" + st.Holders[0].Field + "|" + tc.lease; line != want {
			t.Errorf("%v: environment %q, want %q", tc.flags, line, want)
		}
	}
}

// A force unlock reaches the holder at once through its hold tracker (not
// at its next renewal, 10s later with the default lease): lualock says the
// lock is lost within 100ms + the force release's round trip and three
// wake-ups (the holder's message reader, its loss report, this test's
// reader of its stderr) as a canary measured them in the same test, so
// that a loaded machine does not pass for a missed message.
func TestForceUnlockNoticedAtOnce(t *testing.T) {
	s := newServer(t)
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "reentrant", true: "fair"}[fair], func(t *testing.T) {
			name := lockName(t)
			ready := readyFile(t)
			flags := []string{"lock", "-grace", "1s"}
			if fair {
				flags = append(flags, "-fair")
			}
			holder := s.start(t, nil, append(append(flags, name, "--"), append(trapTerm, ready)...)...)
			waitFile(t, ready) // the hold tracker checks the hold once it is taken: no wait for it
			c, err := lualock.New(s.rdb, lualock.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l := c.NewLock(name)
			if fair {
				l = c.NewFairLock(name)
			}
			canary := harness.StartCanary(t, 5*time.Millisecond, s.rdb)
			time.Sleep(50 * time.Millisecond) // a few measures before the clock starts
			start := time.Now()
			if deleted, err := l.ForceUnlock(context.Background()); err != nil || !deleted {
				t.Fatalf("ForceUnlock: %v %v", deleted, err)
			}
			lost := "lualock: lock " + name + " lost: "
			for !strings.Contains(holder.stderr.String(), lost) {
				if time.Since(start) > 5*time.Second {
					t.Fatalf("no loss reported 5s after the force unlock: %q", holder.stderr.String())
				}
				time.Sleep(time.Millisecond)
			}
			took := time.Since(start)
			load := canary.Allowance(3, 1)
			t.Logf("force unlock reported by the holder after %v (%v)", took, canary)
			if took > 100*time.Millisecond+load {
				t.Errorf("force unlock reported after %v, want within 100ms + %v for the load (%v)", took, load, canary)
			}
			if code := holder.wait(t, 5*time.Second); code != exitLost {
				t.Errorf("holder exit %d, want %d", code, exitLost)
			}
		})
	}
}

// -wait bounds the call on a Redis that stops answering, and a lualock that
// gave up never takes the lock afterwards. The upper bound (-wait + 800ms)
// grows by a canary run's cost measured in the same test, before the pause
// (the process's start and exit).
func TestWaitPausedRedis(t *testing.T) {
	srv, err := harness.Start(harness.Options{})
	if err != nil {
		t.Skipf("redis-server: %v", err) // harness.Run's policy covers CI
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	s := &server{addr: srv.Addr(), rdb: rdb}
	name := lockName(t)
	cost := s.runCost(t)
	if err := srv.Pause(); err != nil {
		t.Skip(err)
	}
	p, code := s.run(t, nil, "lock", "-wait", "700ms", name, "--", "echo", "ran")
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if code != exitError || p.stdout.String() != "" || p.took > 1500*time.Millisecond+cost || p.took < 700*time.Millisecond {
		t.Errorf("exit %d after %v, stdout %q, stderr %q; want %d after about 700ms (at most %v)", code, p.took, p.stdout.String(), p.stderr.String(), exitError, 1500*time.Millisecond+cost)
	}
	time.Sleep(300 * time.Millisecond)
	if s.exists(t, name) {
		t.Error("the lock was taken after lualock gave up")
	}
}

// A signal to lualock reaches the command's whole group, grandchildren
// included, not only the direct child.
func TestSignalReachesGroup(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	gc := filepath.Join(t.TempDir(), "gc")
	// The shell survives SIGTERM (a trap) and exits 0 once its grandchild
	// is gone.
	p := s.start(t, nil, "lock", name, "--", "sh", "-c",
		`trap : TERM; sleep 60 & echo $! > "$1"; while kill -0 $! 2>/dev/null; do sleep 0.02; done; echo gc-gone`, "sh", gc)
	pid := readPIDs(t, gc)[0]
	p.signal(t, syscall.SIGTERM) // lualock's pid only
	if code := p.wait(t, 5*time.Second); code != 0 || p.stdout.String() != "gc-gone\n" {
		t.Errorf("exit %d, stdout %q; want 0 and gc-gone", code, p.stdout.String())
	}
	if procAlive(pid) {
		t.Errorf("grandchild %d survived the forwarded SIGTERM", pid)
	}
}

// unlock -force finds out that NAME is a fair lock (it has a queue) and
// wakes the head of the queue without being told -fair.
func TestUnlockFairWithoutFlag(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	holder := s.start(t, nil, append([]string{"lock", "-fair", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	waiter := s.start(t, nil, "lock", "-fair", "-q", name, "--", "echo", "ran")
	waitFor(t, "waiter queued", 10*time.Second, func() bool {
		return s.rdb.LLen(context.Background(), keys.Of(name).Queue).Val() == 1
	})
	if p, code := s.run(t, nil, "unlock", "-force", name); code != 0 {
		t.Fatalf("unlock -force: exit %d: %s", code, p.stderr.String())
	}
	start := time.Now()
	if code := waiter.wait(t, 10*time.Second); code != 0 || waiter.stdout.String() != "ran\n" {
		t.Fatalf("waiter exit %d, stdout %q", code, waiter.stdout.String())
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the waiter got the lock %v after the force unlock, want it woken at once", took)
	}
	holder.wait(t, 5*time.Second)
}
