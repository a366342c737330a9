//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/tests/harness"
)

// bin is the lualock binary built by TestMain.
var bin string

// raceBuild is set by race_test.go when the tests run with -race: the
// binary is then built with -race too, and a race in it fails the test that
// ran it (exit status 66).
var raceBuild bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lualock-cli-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "lualock")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(args, " "), err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := harness.Run(m) // stops the shared redis-server after the tests
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is the test's Redis: the harness's shared standalone server (on a
// free loopback port, never 6379) and a client on it.
type server struct {
	addr string
	rdb  *redis.Client
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := harness.SharedStandalone(t)
	rdb := s.Client()
	t.Cleanup(func() { rdb.Close() })
	return &server{addr: s.Addr(), rdb: rdb}
}

// lockName is a lock name unique to the test.
func lockName(t *testing.T) string {
	return "cli-test:" + strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
}

// syncBuffer is a bytes.Buffer that a running process may write to while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a lualock process started by a test, in its own process group:
// the test's cleanup SIGKILLs that group by its id, which takes the
// command and anything it left behind as well.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	start          time.Time
	done           chan struct{}
	code           int
	took           time.Duration
}

// start runs the lualock binary with args against s, with the extra
// environment variables env.
func (s *server) start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(cleanEnv(), "REDIS_URL=redis://"+s.addr)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 2 * time.Second // a grandchild left holding stdout does not hang Wait
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.took = time.Since(p.start)
		p.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	pgid := p.cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // the group we started, by its id
		<-p.done
		if t.Failed() {
			t.Logf("lualock %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, p.code, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// cleanEnv is the environment without the variables lualock reads. It
// also stops a race-enabled binary from sleeping 1s before it exits
// (GORACE atexit_sleep_ms, default 1000).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") && !strings.HasPrefix(kv, "LUALOCK_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	return append(env, strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(limit):
		t.Fatalf("lualock %q still running after %v\nstderr:\n%s", p.cmd.Args[1:], limit, p.stderr.String())
		return 0
	}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// run runs lualock to the end and returns its exit code.
func (s *server) run(t *testing.T, env []string, args ...string) (*proc, int) {
	t.Helper()
	p := s.start(t, env, args...)
	return p, p.wait(t, 20*time.Second)
}

// waitFor polls cond every 10ms until it holds, or fails the test.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runCost runs lualock once on a free lock of its own (start, connect,
// lock, run true, release, exit) and returns how long that took: the
// canary of a test whose -wait or bound in milliseconds includes the
// process's start and connection, which on a machine starved of CPU take
// longer than any constant allows.
func (s *server) runCost(t *testing.T) time.Duration {
	t.Helper()
	p, code := s.run(t, nil, "lock", "-wait", "10s", lockName(t)+":canary", "--", "true")
	if code != 0 {
		t.Fatalf("canary run: exit %d: %s", code, p.stderr.String())
	}
	t.Logf("canary: a whole lualock run on a free lock took %v", p.took)
	return p.took
}

// waitArg is D + cost as a -wait argument.
func waitArg(d, cost time.Duration) string {
	return (d + cost).Round(time.Millisecond).String()
}

func (s *server) exists(t *testing.T, key string) bool {
	n, err := s.rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func (s *server) waitLocked(t *testing.T, name string) {
	t.Helper()
	waitFor(t, "lock "+name+" taken", 10*time.Second, func() bool { return s.exists(t, name) })
}

// status runs "lualock status -json NAME".
func (s *server) status(t *testing.T, name string) lockStatus {
	t.Helper()
	p, code := s.run(t, nil, "status", "-json", name)
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, p.stderr.String())
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(p.stdout.String()), &st); err != nil {
		t.Fatalf("status -json: %v\n%s", err, p.stdout.String())
	}
	return st
}

// readyFile returns a path for a command to create once it is set up.
func readyFile(t *testing.T) string { return filepath.Join(t.TempDir(), "ready") }

func waitFile(t *testing.T, path string) {
	t.Helper()
	waitFor(t, "file "+path, 10*time.Second, func() bool { _, err := os.Stat(path); return err == nil })
}

// trapTerm is a command that, once its TERM trap is set, creates its $1 and
// then waits; on SIGTERM it prints got-term and exits 0. It waits in short
// sleeps rather than one long one: a signal that reaches a child the shell
// has forked but not yet exec'd runs the shell's trap handler in that child
// and is lost, and a sleep 30 that missed its SIGTERM that way would keep
// the group alive for the whole -grace.
var trapTerm = []string{"sh", "-c", `trap 'echo got-term; exit 0' TERM INT HUP; : > "$1"; while :; do sleep 0.05 & wait; done`, "sh"}

func TestExitStatus(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 255", 255},
		{"kill -KILL $$", 128 + 9},
	} {
		p, code := s.run(t, nil, "lock", name, "--", "sh", "-c", tc.script)
		if code != tc.want {
			t.Errorf("sh -c %q: exit %d, want %d; stderr: %s", tc.script, code, tc.want, p.stderr.String())
		}
		if s.exists(t, name) {
			t.Errorf("sh -c %q: lock still held after the command exited", tc.script)
		}
	}
	p, code := s.run(t, nil, "lock", name, "--", "no-such-command-lualock-test")
	if code != exitNotFound || !strings.Contains(p.stderr.String(), "lualock: no-such-command-lualock-test: command not found") {
		t.Errorf("missing command: exit %d, stderr %q; want %d", code, p.stderr.String(), exitNotFound)
	}
}

func TestPassesStdio(t *testing.T) {
	s := newServer(t)
	cmd := exec.Command(bin, "lock", lockName(t), "--", "sh", "-c", "read line; echo out:$line; echo err:$line >&2; exit 3")
	cmd.Env = append(cleanEnv(), "REDIS_URL=redis://"+s.addr)
	cmd.Stdin = strings.NewReader("hello\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState.ExitCode() != 3 || stdout.String() != "out:hello\n" || stderr.String() != "err:hello\n" {
		t.Errorf("exit %v (%v), stdout %q, stderr %q; want 3, out:hello, err:hello", cmd.ProcessState.ExitCode(), err, stdout.String(), stderr.String())
	}
}

func TestHeldWhileCommandRuns(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	// The command is lualock status itself, run while the lock is held.
	p, code := s.run(t, nil, "lock", name, "--", bin, "status", "-json", name)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr.String())
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(p.stdout.String()), &st); err != nil {
		t.Fatalf("%v: %s", err, p.stdout.String())
	}
	if !st.Locked || len(st.Holders) != 1 || st.Holders[0].Holds != 1 || st.LeaseMS == nil || *st.LeaseMS <= 0 || *st.LeaseMS > 30000 {
		t.Errorf("status while the command runs: %+v, want locked by one holder with 1 hold and a lease of at most 30s", st)
	}
	if st := s.status(t, name); st.Locked || len(st.Holders) != 0 || st.LeaseMS != nil {
		t.Errorf("status after the command exited: %+v, want not locked", st)
	}
}

func TestStatusText(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	p, code := s.run(t, nil, "status", name)
	if code != 0 || p.stdout.String() != "lock "+name+": not locked\nreplica acknowledgement: one (timeout 1s); replicas of the primary: 0\n" {
		t.Errorf("status of a free lock: exit %d, stdout %q", code, p.stdout.String())
	}
	// The replica acknowledgement in effect: -ack, else the environment.
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"LUALOCK_REPLICA_ACK=all", "LUALOCK_REPLICA_ACK_TIMEOUT=250ms"}, nil, "all (timeout 250ms)"},
		{[]string{"LUALOCK_REPLICA_ACK=all"}, []string{"-ack", "off"}, "off"},
	} {
		p, code := s.run(t, c.env, append(append([]string{"status"}, c.args...), name)...)
		if want := "replica acknowledgement: " + c.want + ";"; code != 0 || !strings.Contains(p.stdout.String(), want) {
			t.Errorf("status with %v %v: exit %d, stdout %q, want %q", c.env, c.args, code, p.stdout.String(), want)
		}
	}
	if p, code := s.run(t, nil, "status", "-ack", "maybe", name); code != exitUsage || !strings.Contains(p.stderr.String(), "want one, all or off") {
		t.Errorf("status -ack maybe: exit %d, stderr %q", code, p.stderr.String())
	}
	p, code = s.run(t, nil, "lock", name, "--", bin, "status", name)
	if out := p.stdout.String(); code != 0 || !strings.HasPrefix(out, "lock "+name+": locked, lease ") || !strings.Contains(out, "  holds 1\n") {
		t.Errorf("status of a held lock: exit %d, stdout %q", code, out)
	}
	// A key that is no lock.
	if err := s.rdb.Set(context.Background(), name, "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	defer s.rdb.Del(context.Background(), name)
	p, code = s.run(t, nil, "status", "-json", name)
	if code != exitError || !strings.Contains(p.stderr.String(), "is a string, not a lock (a hash) nor a semaphore") {
		t.Errorf("status of a string key: exit %d, stderr %q", code, p.stderr.String())
	}
}

func TestStatusJSON(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ctx := context.Background()
	p, code := s.run(t, nil, "status", "-json", name)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr.String())
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(p.stdout.String()), &raw); err != nil {
		t.Fatal(err)
	}
	if raw["name"] != name || raw["locked"] != false || fmt.Sprint(raw["holders"]) != "[]" || fmt.Sprint(raw["queue"]) != "[]" {
		t.Errorf("status -json of a free lock: %s", p.stdout.String())
	}
	if _, ok := raw["lease_ms"]; ok {
		t.Errorf("status -json of a free lock has a lease_ms: %s", p.stdout.String())
	}
	// A Redisson-made hold with a re-entry, and a fair queue, written by hand.
	queue, timeouts := keys.Of(name).Queue, keys.Of(name).Timeouts
	now := time.Now().UnixMilli()
	s.rdb.HSet(ctx, name, "c1:7", 2)
	s.rdb.PExpire(ctx, name, 20*time.Second)
	s.rdb.RPush(ctx, queue, "c2:1", "c3:1")
	s.rdb.ZAdd(ctx, timeouts, redis.Z{Score: float64(now + 60000), Member: "c2:1"}, redis.Z{Score: float64(now + 120000), Member: "c3:1"})
	defer s.rdb.Del(ctx, name, queue, timeouts)
	st := s.status(t, name)
	if !st.Locked || len(st.Holders) != 1 || st.Holders[0].Field != "c1:7" || st.Holders[0].Holds != 2 || *st.LeaseMS <= 15000 || *st.LeaseMS > 20000 {
		t.Errorf("holders/lease: %+v", st)
	}
	if len(st.Queue) != 2 || st.Queue[0].ID != "c2:1" || st.Queue[1].ID != "c3:1" ||
		*st.Queue[0].DeadlineMS != now+60000 || *st.Queue[0].RemainingMS < 50000 || *st.Queue[1].RemainingMS < 110000 {
		t.Errorf("queue: %+v", st.Queue)
	}
	p, _ = s.run(t, nil, "status", name)
	for _, want := range []string{"holder c1:7  holds 2", "fair queue: 2 waiting", "1. c2:1  deadline ", "2. c3:1  deadline "} {
		if !strings.Contains(p.stdout.String(), want) {
			t.Errorf("status text lacks %q:\n%s", want, p.stdout.String())
		}
	}
	// No expiry.
	s.rdb.Persist(ctx, name)
	if st := s.status(t, name); *st.LeaseMS != -1 {
		t.Errorf("lease_ms of a lock without expiry: %d, want -1", *st.LeaseMS)
	}
}

// Several lualock processes on one name never run their commands at once.
func TestMutualExclusion(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	log := filepath.Join(t.TempDir(), "log")
	const n = 4
	var ps []*proc
	for i := range n {
		ps = append(ps, s.start(t, nil, "lock", name, "--", "sh", "-c",
			`echo "start $1" >> "$2"; sleep 0.15; echo "end $1" >> "$2"`, "sh", fmt.Sprint(i), log))
	}
	for _, p := range ps {
		if code := p.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr.String())
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*n, b)
	}
	seen := map[string]bool{}
	for i := 0; i < len(lines); i += 2 {
		id, ok := strings.CutPrefix(lines[i], "start ")
		if !ok || lines[i+1] != "end "+id || seen[id] {
			t.Fatalf("commands overlapped:\n%s", b)
		}
		seen[id] = true
	}
}

// -wait D gives up after D (and not before), counted from lualock's start.
// The upper bounds (D + 1.3s, 1s for -wait 0) cover the process's start,
// connection and exit: each grows by a canary run's cost measured in the
// same test, so that a loaded machine does not pass for a late give-up
// (nor an idle one for a quick one).
func TestWaitNotObtained(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	holder := s.start(t, nil, append([]string{"lock", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	cost := s.runCost(t)
	waitD := (time.Second + cost).Round(time.Millisecond)
	wait := waitD.String()
	for _, tc := range []struct {
		args     []string
		min, max time.Duration
	}{
		// -wait 1s and more: the race-built binary's start and its first
		// contact with Redis count in it, and took more than 200ms on a
		// loaded 2-core machine (load average 14), which then exits 1;
		// with wait, 1s + a whole run's cost, it gets to wait.
		{[]string{"-wait", wait}, waitD, waitD + 1300*time.Millisecond + cost},
		{[]string{"-wait", "0"}, 0, time.Second + cost},
		{[]string{"-wait", wait, "-lease", "5s"}, waitD, waitD + 1300*time.Millisecond + cost},
	} {
		args := append(append([]string{"lock"}, tc.args...), name, "--", "sh", "-c", "echo ran")
		p, code := s.run(t, nil, args...)
		if code != exitNotObtained || p.stdout.String() != "" || !strings.Contains(p.stderr.String(), "lualock: lock "+name+" not obtained within") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and no output from the command", tc.args, code, p.stdout.String(), p.stderr.String(), exitNotObtained)
		}
		// took includes the process start and the connection.
		if p.took < tc.min || p.took > tc.max {
			t.Errorf("%v: gave up after %v, want %v..%v", tc.args, p.took, tc.min, tc.max)
		}
	}
	holder.signal(t, syscall.SIGTERM)
	if code := holder.wait(t, 5*time.Second); code != 0 {
		t.Errorf("holder exit %d", code)
	}
	// Free now: -wait 0 gets it.
	if p, code := s.run(t, nil, "lock", "-wait", "0", name, "--", "true"); code != 0 {
		t.Errorf("-wait 0 on a free lock: exit %d: %s", code, p.stderr.String())
	}
}

// A holder killed with SIGKILL together with its supervisor releases
// nothing: the next process gets the lock when the lease runs out.
func TestExpiryAfterHolderDies(t *testing.T) {
	s := newServer(t)
	for _, tc := range []struct {
		name  string
		env   []string
		flags []string
		lease time.Duration
	}{
		{"watchdog", []string{"LUALOCK_WATCHDOG_LEASE=1s"}, nil, time.Second},
		{"lease", nil, []string{"-lease", "1s"}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := lockName(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			args := append(append([]string{"lock"}, tc.flags...), name, "--", "sh", "-c", `echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30`, "sh", pidFile)
			holder := s.start(t, tc.env, args...)
			cmdPID := readPIDs(t, pidFile)[0]
			time.Sleep(300 * time.Millisecond) // the watchdog has renewed at least once
			killHolderAndSupervisor(t, holder, cmdPID)
			killed := time.Now()
			if code := holder.wait(t, 5*time.Second); code != 128+9 {
				t.Fatalf("holder exit %d, want %d", code, 128+9)
			}
			p, code := s.run(t, nil, "lock", "-wait", "10s", name, "--", "true")
			if code != 0 {
				t.Fatalf("second lock: exit %d: %s", code, p.stderr.String())
			}
			// The second lualock's whole run is in took: the slack grows by
			// what such a run costs on this machine now (runCost).
			if took, cost := time.Since(killed), s.runCost(t); took > tc.lease+time.Second+cost {
				t.Errorf("the lock was free %v after its holder died, want within the lease %v (+1s slack, +%v a lualock run costs now)", took, tc.lease, cost)
			}
		})
	}
}

// TestCluster: -addr naming one node of a Redis Cluster works for every
// lock name, whichever node serves its slot: lock, status (with a fair
// waiter queued) and unlock -force, which the holder's lualock reports as
// a lost lock.
func TestCluster(t *testing.T) {
	cl := harness.SharedCluster(t)
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	s := &server{addr: cl.Addrs()[0]}
	nodes := map[string]bool{}
	for i := range 8 {
		name := fmt.Sprintf("%s:%d", lockName(t), i)
		if n, err := rdb.MasterForKey(ctx, name); err == nil {
			nodes[n.Options().Addr] = true
		}
		p, code := s.run(t, nil, "lock", "-wait", "5s", name, "--", "echo", "held")
		if code != 0 || p.stdout.String() != "held\n" {
			t.Fatalf("lock %s on the cluster: exit %d, stdout %q, stderr %q", name, code, p.stdout.String(), p.stderr.String())
		}
		if n := rdb.Exists(ctx, name).Val(); n != 0 {
			t.Errorf("lock %s left behind", name)
		}
	}
	if len(nodes) < 2 {
		t.Fatalf("the names landed on %d node(s); the test needs several", len(nodes))
	}

	name := lockName(t) + ":fair"
	env := []string{"LUALOCK_WATCHDOG_LEASE=600ms"}
	holder := s.start(t, env, "lock", "-fair", name, "--", "sleep", "30")
	waitFor(t, "lock taken", 10*time.Second, func() bool { return rdb.Exists(ctx, name).Val() == 1 })
	waiter := s.start(t, nil, "lock", "-fair", "-wait", "20s", name, "--", "true")
	waitFor(t, "waiter queued", 10*time.Second, func() bool { return rdb.LLen(ctx, keys.Of(name).Queue).Val() == 1 })
	p, code := s.run(t, nil, "status", "-json", name)
	if code != 0 {
		t.Fatalf("status on the cluster: exit %d: %s", code, p.stderr.String())
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(p.stdout.String()), &st); err != nil {
		t.Fatalf("status -json: %v: %q", err, p.stdout.String())
	}
	if !st.Locked || len(st.Holders) != 1 || len(st.Queue) != 1 {
		t.Errorf("status = %+v, want locked, one holder, one waiter", st)
	}
	if p, code := s.run(t, nil, "unlock", "-force", "-fair", name); code != 0 {
		t.Fatalf("unlock -force on the cluster: exit %d: %s", code, p.stderr.String())
	}
	if code := holder.wait(t, 5*time.Second); code != exitLost {
		t.Errorf("holder exit %d after the force unlock, want %d (lost)", code, exitLost)
	}
	if code := waiter.wait(t, 10*time.Second); code != 0 {
		t.Errorf("waiter exit %d, want 0: %s", code, waiter.stderr.String())
	}
	waitFor(t, "keys gone", 5*time.Second, func() bool {
		return rdb.Exists(ctx, name, keys.Of(name).Queue, keys.Of(name).Timeouts).Val() == 0
	})
}

// A fair waiter whose process is killed (SIGKILL) while it waits in the
// queue delays the waiter behind it by at most its wait budget once the
// lock is free, and the dead waiter is purged from the queue.
func TestFairWaiterDies(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	name := lockName(t)
	const budget = time.Second
	env := []string{"LUALOCK_FAIR_WAIT=" + budget.String(), "LUALOCK_WATCHDOG_LEASE=600ms"}
	queue := keys.Of(name).Queue
	queued := func(n int64) func() bool {
		return func() bool { return s.rdb.LLen(ctx, queue).Val() == n }
	}
	release := filepath.Join(t.TempDir(), "release")
	holder := s.start(t, env, "lock", "-fair", name, "--", "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.01; done`, release)
	s.waitLocked(t, name)
	dead := s.start(t, env, "lock", "-fair", name, "--", "true")
	waitFor(t, "the first waiter queued", 10*time.Second, queued(1))
	next := s.start(t, env, "lock", "-fair", name, "--", "true")
	waitFor(t, "the second waiter queued", 10*time.Second, queued(2))
	if err := syscall.Kill(-dead.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := dead.wait(t, 5*time.Second); code != 128+9 {
		t.Fatalf("killed waiter exit %d, want %d", code, 128+9)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("holder exit %d: %s", code, holder.stderr.String())
	}
	released := time.Now()
	if code := next.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("second waiter exit %d: %s", code, next.stderr.String())
	}
	// The second waiter's exit is in took (its command's run, its release,
	// its exit): the slack grows by a whole lualock run measured now.
	took, cost := time.Since(released), s.runCost(t)
	t.Logf("the waiter behind the dead one got the lock %v after the release (budget %v)", took, budget)
	if took > budget+300*time.Millisecond+cost {
		t.Errorf("the dead waiter held the queue up %v, want at most its budget %v (+300ms slack, +%v a lualock run costs now)", took, budget, cost)
	}
	waitFor(t, "queue empty", 5*time.Second, queued(0))
	if n := s.rdb.Exists(ctx, name, queue, keys.Of(name).Timeouts).Val(); n != 0 {
		t.Errorf("%d keys of the lock left behind", n)
	}
}

// The lock deleted from outside while the command runs: the command gets
// SIGTERM and lualock exits 3.
func TestLockLost(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	p := s.start(t, []string{"LUALOCK_WATCHDOG_LEASE=3s"}, append([]string{"lock", "-grace", "5s", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	if n, err := s.rdb.Del(context.Background(), name).Result(); err != nil || n != 1 {
		t.Fatalf("del: %d, %v", n, err)
	}
	if code := p.wait(t, 5*time.Second); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	// The cause is the deletion itself, seen by the hold's watch or a
	// renewal, not a lease that ran out (how soon is the loss suite's
	// measure, not a wall-clock bound here). The 3 s lease keeps a starved
	// holder's own expiry from winning that race.
	if e := p.stderr.String(); !strings.Contains(e, "lualock: lock "+name+" lost: ") ||
		!strings.Contains(e, "removed while held") && !strings.Contains(e, "found it gone") {
		t.Errorf("stderr %q lacks the lost message with the deletion as its cause", e)
	}
	if p.stdout.String() != "got-term\n" {
		t.Errorf("the command did not get SIGTERM: stdout %q", p.stdout.String())
	}
}

// A command that ignores SIGTERM is killed after -grace.
func TestLockLostGraceKill(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	p := s.start(t, []string{"LUALOCK_WATCHDOG_LEASE=600ms"},
		"lock", "-grace", "300ms", name, "--", "sh", "-c", `trap '' TERM; : > "$1"; while :; do sleep 0.05; done`, "sh", ready)
	waitFile(t, ready)
	s.rdb.Del(context.Background(), name)
	if code := p.wait(t, 5*time.Second); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	if !strings.Contains(p.stderr.String(), "still running 300ms after SIGTERM: sending SIGKILL") {
		t.Errorf("stderr %q lacks the SIGKILL message", p.stderr.String())
	}
}

// A fixed -lease that runs out while the command runs counts as lost.
func TestLeaseRunsOut(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	p, code := s.run(t, nil, "lock", "-lease", "300ms", "-grace", "1s", name, "--", "sleep", "10")
	if code != exitLost || !strings.Contains(p.stderr.String(), "lualock: lock "+name+" lost: ") {
		t.Errorf("exit %d, stderr %q; want %d and the lost message", code, p.stderr.String(), exitLost)
	}
	if p.took > 3*time.Second {
		t.Errorf("took %v, want about 300ms", p.took)
	}
}

// Signals to lualock go to the command; the lock is released afterwards.
func TestSignalForwarding(t *testing.T) {
	s := newServer(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			name := lockName(t)
			ready := readyFile(t)
			p := s.start(t, nil, append([]string{"lock", name, "--"}, append(trapTerm, ready)...)...)
			waitFile(t, ready)
			if !s.exists(t, name) {
				t.Fatal("lock not held while the command runs")
			}
			p.signal(t, sig) // lualock's pid only, not its group
			if code := p.wait(t, 5*time.Second); code != 0 {
				t.Fatalf("exit %d, want the command's 0", code)
			}
			if p.stdout.String() != "got-term\n" {
				t.Errorf("the command did not get the signal: stdout %q", p.stdout.String())
			}
			if s.exists(t, name) {
				t.Error("lock still held after lualock exited")
			}
		})
	}
}

// A signal while waiting for the lock ends the wait: exit 128+N.
func TestSignalWhileWaiting(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	holder := s.start(t, nil, append([]string{"lock", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	waiter := s.start(t, nil, "lock", name, "--", "echo", "ran")
	// Waiting: it says so.
	waitFor(t, "waiter waiting", 10*time.Second, func() bool {
		return strings.Contains(waiter.stderr.String(), "lualock: lock "+name+" is held by ")
	})
	waiter.signal(t, syscall.SIGTERM)
	if code := waiter.wait(t, 5*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("waiter exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(waiter.stderr.String(), "while waiting for lock "+name) || waiter.stdout.String() != "" {
		t.Errorf("waiter stdout %q, stderr %q", waiter.stdout.String(), waiter.stderr.String())
	}
	holder.signal(t, syscall.SIGTERM)
	holder.wait(t, 5*time.Second)
}

func TestForceUnlock(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	holder := s.start(t, []string{"LUALOCK_WATCHDOG_LEASE=600ms"}, append([]string{"lock", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)

	p, code := s.run(t, nil, "unlock", name)
	if code != exitUsage || !strings.Contains(p.stderr.String(), "only the holder can release a lock normally") {
		t.Errorf("unlock without -force: exit %d, stderr %q", code, p.stderr.String())
	}
	if !s.exists(t, name) {
		t.Fatal("unlock without -force deleted the lock")
	}
	p, code = s.run(t, nil, "unlock", "-force", name)
	if code != 0 || p.stdout.String() != "lualock: lock "+name+" force-unlocked (deleted)\n" {
		t.Errorf("unlock -force: exit %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
	}
	if code := holder.wait(t, 5*time.Second); code != exitLost {
		t.Errorf("holder exit %d, want %d", code, exitLost)
	}
	p, code = s.run(t, nil, "unlock", name, "-force") // flags after NAME too
	if code != 0 || p.stdout.String() != "lualock: lock "+name+" was not locked: nothing deleted\n" {
		t.Errorf("unlock -force of a free lock: exit %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
	}
}

// unlock -force on a key that is not a lock leaves it byte for byte as it
// was (DUMP), prints one line saying what it is and exits 1; a read-write
// lock (Redisson's layout) is force-unlocked in its mode.
func TestForceUnlock_notALock(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, is string
		make     func(k string) error
	}{
		{"string", "a string", func(k string) error { return s.rdb.Set(ctx, k, "important data", 0).Err() }},
		{"list", "a list", func(k string) error { return s.rdb.RPush(ctx, k, "a", "b").Err() }},
		{"set", "a set", func(k string) error { return s.rdb.SAdd(ctx, k, "a").Err() }},
		{"zset", "a zset", func(k string) error { return s.rdb.ZAdd(ctx, k, redis.Z{Score: 1, Member: "a"}).Err() }},
		{"stream", "a stream", func(k string) error {
			return s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: []string{"f", "v"}}).Err()
		}},
		{"hash", `a hash whose field "user" holds "alice"`, func(k string) error { return s.rdb.HSet(ctx, k, "user", "alice").Err() }},
		{"hash of two counts", "a hash of 2 fields", func(k string) error { return s.rdb.HSet(ctx, k, "a:1", "1", "b:1", "1").Err() }},
	} {
		name := lockName(t) + ":" + strings.ReplaceAll(tc.name, " ", "_")
		if err := tc.make(name); err != nil {
			t.Fatal(err)
		}
		before, err := s.rdb.Dump(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		p, code := s.run(t, nil, "unlock", "-force", name)
		stderr := p.stderr.String()
		if code != exitError || p.stdout.String() != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, name+" is "+tc.is+", not a lock") {
			t.Errorf("unlock -force of a %s: exit %d, stdout %q, stderr %q; want exit %d and one line saying it is %s",
				tc.name, code, p.stdout.String(), stderr, exitError, tc.is)
		}
		if after, err := s.rdb.Dump(ctx, name).Result(); err != nil || after != before {
			t.Errorf("unlock -force of a %s changed it: DUMP before %q, after %q (%v)", tc.name, before, after, err)
		}
	}
	for _, mode := range []string{"read", "write"} {
		name := lockName(t) + ":" + mode
		field := "8f3b6c1e-3f2a-4c55-9e43-1b2a3c4d5e6f:57"
		if mode == "write" {
			field += ":write"
		}
		if err := s.rdb.HSet(ctx, name, "mode", mode, field, "1").Err(); err != nil {
			t.Fatal(err)
		}
		p, code := s.run(t, nil, "unlock", "-force", name)
		if code != 0 || p.stdout.String() != "lualock: lock "+name+" force-unlocked (deleted)\n" || s.exists(t, name) {
			t.Errorf("unlock -force of a read-write lock in %s mode: exit %d, stdout %q, stderr %q", mode, code, p.stdout.String(), p.stderr.String())
		}
	}
}

func TestFair(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	ready := readyFile(t)
	holder := s.start(t, nil, append([]string{"lock", "-fair", name, "--"}, append(trapTerm, ready)...)...)
	waitFile(t, ready)
	queue := keys.Of(name).Queue
	var waiters []*proc
	for i := range 2 {
		waiters = append(waiters, s.start(t, nil, "lock", "-fair", name, "--", "echo", fmt.Sprint("waiter ", i)))
		waitFor(t, "waiter queued", 5*time.Second, func() bool {
			n, _ := s.rdb.LLen(context.Background(), queue).Result()
			return n == int64(i+1)
		})
	}
	st := s.status(t, name)
	if !st.Locked || len(st.Queue) != 2 {
		t.Fatalf("status: %+v, want locked with 2 waiters", st)
	}
	for i, w := range st.Queue {
		if w.DeadlineMS == nil || *w.RemainingMS <= 0 {
			t.Errorf("waiter %d: %+v, want a deadline in the future", i, w)
		}
	}
	// A fair waiter that gives up leaves the queue. Its -wait covers a
	// canary run's cost: it must get to wait, not give up connecting.
	wait := waitArg(100*time.Millisecond, s.runCost(t))
	p, code := s.run(t, nil, "lock", "-fair", "-wait", wait, name, "--", "true")
	if code != exitNotObtained {
		t.Errorf("-fair -wait %s: exit %d: %s", wait, code, p.stderr.String())
	}
	if n, _ := s.rdb.LLen(context.Background(), queue).Result(); n != 2 {
		t.Errorf("queue has %d waiters after one gave up, want 2", n)
	}
	holder.signal(t, syscall.SIGTERM)
	holder.wait(t, 5*time.Second)
	for i, w := range waiters {
		if code := w.wait(t, 10*time.Second); code != 0 {
			t.Errorf("waiter %d: exit %d: %s", i, code, w.stderr.String())
		}
	}
	if s.exists(t, name) || s.exists(t, queue) {
		t.Errorf("lock or queue left behind")
	}
	// unlock -force -fair.
	ready2 := readyFile(t)
	holder = s.start(t, []string{"LUALOCK_WATCHDOG_LEASE=600ms"}, append([]string{"lock", "-fair", name, "--"}, append(trapTerm, ready2)...)...)
	waitFile(t, ready2)
	if p, code := s.run(t, nil, "unlock", "-force", "-fair", name); code != 0 || !strings.Contains(p.stdout.String(), "force-unlocked") {
		t.Errorf("unlock -force -fair: exit %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
	}
	if code := holder.wait(t, 5*time.Second); code != exitLost {
		t.Errorf("holder exit %d, want %d", code, exitLost)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{
		// lock tries again within -wait (else 5s) before it gives up.
		{"lock", "-addr", addr, "-wait", "300ms", "x", "--", "true"},
		{"status", "-addr", "redis://" + addr + "/0", "x"},
		{"unlock", "-force", "-addr", addr, "x"},
	} {
		stderr.Reset()
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "lualock: cannot reach Redis at "+addr) {
			t.Errorf("%q: exit %d, stderr %q; want %d", args, code, stderr.String(), exitError)
		}
	}
}

// Usage errors exit 2 with a message, before any connection (the -addr of
// these calls has nothing listening; reaching it would exit 1).
func TestUsage(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1")
	t.Setenv(envWatchdog, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage:"},
		{[]string{"frob"}, `unknown subcommand "frob"`},
		{[]string{"lock", "x", "true"}, `missing "--" before COMMAND`},
		{[]string{"lock", "x"}, `missing "--" before COMMAND`},
		{[]string{"lock", "x", "--"}, `missing COMMAND after "--"`},
		{[]string{"lock", "--", "true"}, "lock: missing NAME"},
		{[]string{"lock", "", "--", "true"}, "lock: empty NAME"},
		{[]string{"lock", "a", "b", "--", "true"}, "want one NAME"},
		{[]string{"lock", "-addr", "nonsense", "x", "--", "true"}, "bad -addr"},
		{[]string{"lock", "-addr", "redis://u:secret@h:port", "x", "--", "true"}, "bad -addr: bad Redis URL"},
		{[]string{"lock", "-addr", "http://h:1", "x", "--", "true"}, "bad -addr"},
		{[]string{"lock", "-addr", "h:0", "x", "--", "true"}, "bad -addr"},
		{[]string{"lock", "-wait", "-1s", "x", "--", "true"}, "-wait -1s is negative"},
		{[]string{"lock", "-wait", "soon", "x", "--", "true"}, "invalid value"},
		{[]string{"lock", "-lease", "0s", "x", "--", "true"}, "-lease 0s, want at least 1ms"},
		{[]string{"lock", "-grace", "-1s", "x", "--", "true"}, "-grace -1s is negative"},
		{[]string{"lock", "-bogus", "x", "--", "true"}, "flag provided but not defined"},
		{[]string{"status"}, "status: missing NAME"},
		{[]string{"status", "a", "b"}, "want one NAME"},
		{[]string{"unlock", "x"}, "only the holder can release a lock normally"},
		{[]string{"unlock", "-force", ""}, "unlock: empty NAME"},
		// Names the locks refuse are refused by every subcommand, status
		// included, before anything reaches Redis.
		{[]string{"status", "a{b"}, "status: invalid argument: lock name \"a{b\" has a brace but no hash tag"},
		{[]string{"status", "-json", "a}b{"}, "has a brace but no hash tag"},
		{[]string{"status", "{}"}, "has a brace but no hash tag"},
		{[]string{"status", strings.Repeat("x", 64<<10+1)}, "at most 65536 allowed"},
		{[]string{"unlock", "-force", "a{b"}, "has a brace but no hash tag"},
		{[]string{"lock", "a{b", "--", "true"}, "has a brace but no hash tag"},
		// -addr '' is refused, not taken as $REDIS_URL.
		{[]string{"status", "-addr", "", "x"}, "empty address"},
		{[]string{"lock", "-addr", "", "x", "--", "true"}, "empty address"},
		{[]string{"unlock", "-force", "-addr", " ", "x"}, "empty address"},
		{[]string{"lock", "-n", "-wait", "1s", "x", "--", "true"}, "-n and -wait 1s disagree"},
		{[]string{"lock", "-E", "256", "x", "--", "true"}, "-E 256, want 0..255"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || (tc.args != nil && strings.Count(stderr.String(), "lualock: ") != 1) {
			t.Errorf("%.200q: exit %d, stderr %.300q; want %d and one line with %q", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
		if strings.Contains(stderr.String(), "secret") {
			t.Errorf("%q: stderr shows the password: %q", tc.args, stderr.String())
		}
	}
	t.Setenv(envWatchdog, "fast")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"lock", "x", "--", "true"}, strings.NewReader(""), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), envWatchdog) {
		t.Errorf("bad %s: exit %d, stderr %q", envWatchdog, code, stderr.String())
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, strings.NewReader(""), &stdout, &stderr)
		if code != 0 || stdout.String() != usageText {
			t.Errorf("%q: exit %d, stdout %q", args, code, stdout.String())
		}
	}
	for _, want := range []string{"lock ", "status ", "unlock ", "-addr", "-wait", "-lease", "-grace", "-fair", "-json", "-force", "-q", "-n", "-E N",
		"REDIS_URL", envWatchdog, envName, envHolder, envLease, keys.HolderPrefix, "exit status", "\n  1 ", "\n  2 ", "\n  3 ", "\n  4 ", "\n  126 ", "\n  127 ", "128+N"} {
		if !strings.Contains(usageText, want) {
			t.Errorf("usage text lacks %q", want)
		}
	}
	for _, sub := range []string{"lock", "status", "unlock"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{sub, "-h"}, strings.NewReader(""), &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: lualock "+sub) {
			t.Errorf("%s -h: exit %d, stdout %q", sub, code, stdout.String())
		}
	}
}

// silentServer is a loopback listener that accepts connections and never
// answers. It is closed when the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// -wait bounds everything from lualock's start to the lock, connecting
// included: against a server that accepts and never answers, -wait 700ms
// gives up after about 700ms. The upper bounds grow by a canary run's cost
// measured in the same test (the process's start and exit).
func TestWaitBoundsConnect(t *testing.T) {
	s := newServer(t)
	addr := silentServer(t)
	cost := s.runCost(t)
	for _, tc := range []struct {
		args     []string
		min, max time.Duration
	}{
		{[]string{"-wait", "700ms"}, 700 * time.Millisecond, 1500*time.Millisecond + cost},
		{[]string{"-wait", "300ms", "-lease", "5s"}, 300 * time.Millisecond, 1100*time.Millisecond + cost},
	} {
		args := append(append([]string{"lock", "-addr", addr}, tc.args...), "x", "--", "echo", "ran")
		p, code := s.run(t, nil, args...)
		t.Logf("%v: exit %d after %v: %s", tc.args, code, p.took, p.stderr.String())
		if code != exitError || p.stdout.String() != "" || !strings.Contains(p.stderr.String(), "did not answer") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d", tc.args, code, p.stdout.String(), p.stderr.String(), exitError)
		}
		if p.took < tc.min || p.took > tc.max {
			t.Errorf("%v: returned after %v, want %v..%v", tc.args, p.took, tc.min, tc.max)
		}
	}
}

// The README's exit status table and the help's list the same statuses.
func TestExitTableInREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip(err)
	}
	readme := string(b)
	for _, code := range []string{"0..255", "0", "1", "2", "3", "4", "126", "127", "128+N"} {
		if !strings.Contains(usageText, "\n  "+code+" ") {
			t.Errorf("help lacks exit status %s", code)
		}
		if !strings.Contains(readme, "\n| "+code+" | ") {
			t.Errorf("README's table lacks exit status %s", code)
		}
	}
	if strings.Count(readme, "| exit status | meaning |") != 1 {
		t.Error("README should have one exit status table")
	}
}
