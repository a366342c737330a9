// Command bench measures lualock side by side with the Go Redis lock
// libraries people use today (github.com/bsm/redislock,
// github.com/go-redsync/redsync/v4, github.com/redis/rueidis/rueidislock)
// on the same Redis in the same run, and writes REPORT.md, results.json and
// run.json (what the run was: mode, rounds, sizes, revision).
//
//	go run . [-addr host:port] [-quick] [-rounds N] [-out DIR]
//
// Without -addr it starts its own redis-server (no persistence, a free
// loopback port, never 6379) and stops it by pid at the end. Libraries are
// interleaved A B C D, B C D A, … within every workload, over -rounds
// rounds; the report gives medians with min–max. An overlap detector runs in every
// workload: any overlap is reported at once and at the top of the report,
// and fails the run with exit status 3 once the report is written. See
// README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// config holds the sizes of every workload; quick mode shrinks them.
type config struct {
	addr   string
	quick  bool
	rounds int
	out    string
	only   map[string]bool // empty: all

	uncDur        time.Duration // per uncontended run
	uncGoroutines []int
	uncMaxOps     int // per goroutine bound

	contN      int
	contDur    time.Duration
	hold       time.Duration
	pause      time.Duration
	contMaxOps int // per goroutine bound

	depths     []int
	depthK     int // handoffs measured per depth
	depthJoins int // extra waiters whose join cost is measured

	waitGoroutines int
	waitLocks      int
	waitSettle     time.Duration
	waitWindow     time.Duration

	wdLocks   int
	wdLease   time.Duration
	ack       lualock.ReplicaAck // -ack: lualock's replica acknowledgement
	wdPeriods int

	rwDur time.Duration // per read-write lock run (readers alone, then with a writer)
}

func defaults(quick bool) config {
	c := config{
		rounds:        3,
		uncDur:        2 * time.Second,
		uncGoroutines: []int{1, 32},
		uncMaxOps:     400_000,
		contN:         8,
		contDur:       3 * time.Second,
		hold:          time.Millisecond,
		pause:         time.Millisecond,
		contMaxOps:    100_000,
		depths:        []int{10, 100, 1000, 10000, 100000},
		depthK:        10,
		depthJoins:    3,
		// 10 000 goroutines on 100 locks; the window covers a whole
		// lualock fallback-timer period (MaxWaitTimer, 10s by default).
		waitGoroutines: 10000,
		waitLocks:      100,
		waitSettle:     2 * time.Second,
		waitWindow:     10500 * time.Millisecond,
		wdLocks:        10000,
		wdLease:        3 * time.Second,
		wdPeriods:      3,
		rwDur:          2 * time.Second,
	}
	if quick {
		c.rounds = 1
		c.uncDur = 250 * time.Millisecond
		c.contDur = 600 * time.Millisecond
		c.depths = []int{10, 100, 1000}
		c.depthK = 5
		c.depthJoins = 2
		c.waitGoroutines = 1000
		c.waitLocks = 10
		c.waitSettle = time.Second
		c.waitWindow = 2 * time.Second
		c.wdLocks = 1000
		c.wdPeriods = 2
		c.rwDur = 300 * time.Millisecond
	}
	return c
}

// server is the redis-server this process started, stopped on every exit path.
var (
	serverMu sync.Mutex
	server   *harness.Server
	replica  *harness.Server // -replica: the replica of server
)

func stopServer() {
	serverMu.Lock()
	defer serverMu.Unlock()
	if replica != nil {
		replica.Stop()
		replica = nil
	}
	if server != nil {
		server.Stop()
		server = nil
	}
}

// startReplica starts a replica of s and waits until its link is up.
func startReplica(s *harness.Server) error {
	host, port, _ := strings.Cut(s.Addr(), ":")
	r, err := harness.Start(harness.Options{Args: []string{"--replicaof", host, port}})
	if err != nil {
		return err
	}
	serverMu.Lock()
	replica = r
	serverMu.Unlock()
	c := r.Client()
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			logf("replica pid %d on %s", r.PID(), r.Addr())
			return nil
		}
	}
	return fmt.Errorf("the replica's link to %s is not up after 30s", s.Addr())
}

// fatalf stops our redis-server and exits with status 1.
func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	stopServer()
	os.Exit(1)
}

func main() {
	addr := flag.String("addr", "", "use this Redis (host:port) instead of starting a redis-server")
	quick := flag.Bool("quick", false, "smoke mode: every workload small (CI); results go to a temp dir by default")
	rounds := flag.Int("rounds", 0, "rounds of every workload (default 3, quick 1)")
	only := flag.String("only", "", "comma-separated workloads to run (uncontended, contended, fair, waiting, watchdog, rwlock); default all")
	out := flag.String("out", "", "directory for REPORT.md, results.json and run.json (default: this directory; quick: $TMPDIR/lualock-bench-quick)")
	ack := flag.String("ack", "one", "lualock's replica acknowledgement (Options.ReplicaAck): one, all or off")
	withReplica := flag.Bool("replica", false, "give the bench's redis-server a replica: lualock then waits for it after each acquisition (Options.ReplicaAck), the other libraries do not")
	flag.Parse()
	if *withReplica && *addr != "" {
		fatalf("-replica needs the bench's own redis-server: leave -addr out")
	}

	cfg := defaults(*quick)
	cfg.addr, cfg.quick, cfg.out = *addr, *quick, *out
	if err := cfg.ack.UnmarshalText([]byte(*ack)); err != nil {
		fatalf("-ack: %v", err)
	}
	cfg.only = map[string]bool{}
	for _, w := range strings.Split(*only, ",") {
		if w = strings.TrimSpace(w); w != "" {
			if !knownWorkloads[w] {
				fatalf("-only: unknown workload %q", w)
			}
			cfg.only[w] = true
		}
	}
	if *rounds > 0 {
		cfg.rounds = *rounds
	}
	if cfg.out == "" {
		cfg.out = "."
		if cfg.quick {
			cfg.out = filepath.Join(os.TempDir(), "lualock-bench-quick")
		}
	}
	if (cfg.quick || len(cfg.only) > 0) && isBenchDir(cfg.out) {
		fatalf("-quick and -only must not overwrite the committed REPORT.md, results.json and run.json in %s: pass another -out", cfg.out)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		fatalf("%v", err)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "bench: %v: stopping\n", s)
		stopServer()
		os.Exit(130)
	}()

	if cfg.addr == "" {
		s, err := harness.Start(harness.Options{})
		if err != nil {
			fatalf("start redis-server: %v", err)
		}
		serverMu.Lock()
		server = s
		serverMu.Unlock()
		cfg.addr = s.Addr()
		logf("redis-server pid %d on %s", s.PID(), cfg.addr)
		if *withReplica {
			if err := startReplica(s); err != nil {
				fatalf("start the replica: %v", err)
			}
		}
	}
	if h, _, err := splitHostPort(cfg.addr); err != nil || (h != "127.0.0.1" && h != "localhost" && h != "::1") {
		fatalf("-addr %q: only loopback Redis is benchmarked", cfg.addr)
	}
	if strings.HasSuffix(cfg.addr, ":6379") && server == nil {
		logf("warning: -addr uses port 6379; the bench writes keys prefixed lb: and changes slowlog settings temporarily")
	}

	e, err := newEnv(cfg)
	if err != nil {
		fatalf("%v", err)
	}
	e.startedServer = server != nil
	e.replicated = replica != nil
	e.revision = lualockRevision()
	e.started = time.Now()
	e.load0 = e.sampleLoad()
	e.run()
	e.load1 = e.sampleLoad()
	e.elapsed = time.Since(e.started)
	e.admin.Close()
	stopServer()

	if err := e.write(); err != nil {
		fatalf("write report: %v", err)
	}
	logf("done in %v; wrote REPORT.md, results.json and run.json in %s", e.elapsed.Round(time.Second), cfg.out)
	if code := e.exitStatus(); code != 0 {
		os.Exit(code)
	}
}

// quickBudget is how long a -quick run may take: CI runs it as a smoke test.
const quickBudget = 2 * time.Minute

// exitStatus is the bench's exit status once the report is written, said
// loudly when not 0: 3 when the overlap detector fired in any run, 5 when a
// -quick run took longer than quickBudget.
func (e *env) exitStatus() int {
	switch {
	case len(e.overlaps) > 0:
		fmt.Fprintf(os.Stderr, "\nbench: FAILED: the overlap detector fired in %d run(s); see the top of REPORT.md\n", len(e.overlaps))
		return 3
	case e.cfg.quick && e.elapsed > quickBudget:
		fmt.Fprintf(os.Stderr, "\nbench: FAILED: the -quick run took %v, more than its %v budget\n", e.elapsed.Round(time.Second), quickBudget)
		return 5
	}
	return 0
}

// isBenchDir reports whether dir is this module's directory, where the
// committed report lives.
func isBenchDir(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	return err == nil && strings.Contains(string(b), "module github.com/lualock/lualock/bench")
}

func splitHostPort(addr string) (string, string, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", "", fmt.Errorf("no port")
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:], nil
}

var logMu sync.Mutex

func logf(format string, args ...any) {
	logMu.Lock()
	defer logMu.Unlock()
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// run executes every workload, rounds as the outer loop and libraries
// interleaved inside each workload, in an order that rotates by one every
// round.
func (e *env) run() {
	for r := 1; r <= e.cfg.rounds; r++ {
		e.round = r
		logf("=== round %d/%d", r, e.cfg.rounds)
		if e.runs("uncontended") {
			for _, g := range e.cfg.uncGoroutines {
				for _, v := range rotate(uncontendedVariants(), r-1) {
					e.step(uncontendedWorkload(g), v.name, e.cfg.uncDur+2*time.Minute, func() { e.uncontended(v, g) })
				}
			}
		}
		if e.runs("contended") {
			for _, pause := range []time.Duration{0, e.cfg.pause} {
				for _, v := range rotate(contendedVariants(), r-1) {
					e.step(contendedWorkload(pause), v.name, e.cfg.contDur+2*time.Minute, func() { e.contended(v, pause) })
				}
			}
		}
		if e.runs("fair") {
			for _, d := range e.cfg.depths {
				e.step(fairDepthWorkload(d), libLualockFair, 8*time.Minute, func() { e.fairDepth(d) })
			}
		}
		if e.runs("waiting") {
			for _, v := range rotate(waitingVariants(), r-1) {
				e.step(waitingWorkload, v.name, e.cfg.waitSettle+e.cfg.waitWindow+4*time.Minute, func() { e.waiting(v) })
			}
		}
		if e.runs("rwlock") {
			e.step(rwlockWorkload, libLualock, 2*e.cfg.rwDur+2*time.Minute, e.rwlock)
		}
		if e.runs("watchdog") {
			for _, v := range rotate(watchdogVariants(), r-1) {
				e.step(watchdogWorkload, v.name, 5*time.Minute, func() { e.watchdog(v) })
			}
		}
	}
}

// rotate returns vs starting at index r mod len(vs), wrapping around: round
// r (from 0) runs the libraries in that order, so that no library always
// runs first or right after another one.
func rotate(vs []variant, r int) []variant {
	k := r % len(vs)
	return append(append([]variant(nil), vs[k:]...), vs[:k]...)
}

// step runs one library's run of a workload under a stall guard, then
// deletes the keys the run left, so that the next library starts on a
// Redis with none of them.
func (e *env) step(workload, library string, limit time.Duration, run func()) {
	stop := e.stallGuard(workload, library, limit)
	run()
	e.dropKeys()
	stop()
}

// stallGuard bounds one run in time: if it has not returned after limit,
// the goroutines are dumped and the run fails (exit status 4), whatever a
// library is waiting for.
func (e *env) stallGuard(workload, library string, limit time.Duration) (stop func()) {
	t := time.AfterFunc(limit, func() {
		fmt.Fprintf(os.Stderr, "\nbench: %s / %s still running after %v: goroutines follow\n", workload, library, limit)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		stopServer()
		os.Exit(4)
	})
	return func() { t.Stop() }
}

var knownWorkloads = map[string]bool{"uncontended": true, "contended": true, "fair": true, "waiting": true, "watchdog": true, "rwlock": true}

func (e *env) runs(w string) bool { return len(e.cfg.only) == 0 || e.cfg.only[w] }

// newAdmin returns the bench's own connection for INFO and friends; it
// counts what it sends in counts, to be left out of the command counts.
func newAdmin(addr string, counts *nameCounts) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2, ReadTimeout: 30 * time.Second})
	c.AddHook(countHook{n: new(atomic.Int64), byName: counts})
	return c
}
