package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// RequireEnv is the environment variable that turns "redis binaries missing"
// from a skip into a failure when set to "1" (CI sets it).
const RequireEnv = "LUALOCK_REQUIRE_REDIS"

var loudOnce sync.Once

// Require makes sure the given binaries (default: redis-server) are on PATH.
// If one is missing the test is skipped with a loud message, or fails when
// LUALOCK_REQUIRE_REDIS=1. Every tb-taking starter calls it.
func Require(tb testing.TB, binaries ...string) {
	tb.Helper()
	if len(binaries) == 0 {
		binaries = []string{"redis-server"}
	}
	var missing []string
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("SKIP: %s not on PATH; install redis-server (Debian/Ubuntu: apt-get install redis-server) or these integration tests do not run",
		strings.Join(missing, " and "))
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("%s=1 but %s", RequireEnv, strings.TrimPrefix(msg, "SKIP: "))
	}
	// Skip messages are only shown with -v; say it once on stderr as well.
	loudOnce.Do(func() {
		fmt.Fprintf(os.Stderr, "\n!!!!!!!!!!\n!!! %s\n!!! (set %s=1 to make this a failure)\n!!!!!!!!!!\n\n", msg, RequireEnv)
	})
	tb.Skip(msg)
}

// StartStandalone starts a private standalone server for tb and stops it in
// tb.Cleanup. It skips or fails per Require; a start error fails the test.
func StartStandalone(tb testing.TB) *Server {
	tb.Helper()
	Require(tb)
	s, err := Start(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("redis-server %s log tail:\n%s", s.Addr(), s.LogTail(logTailLines))
		}
		s.Stop()
	})
	return s
}

// StartCluster starts a private 3-master cluster for tb and stops it in
// tb.Cleanup. It skips or fails per Require; a start error fails the test.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	Require(tb, "redis-server", "redis-cli")
	c, err := StartClusterE(ClusterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}

var shared struct {
	mu         sync.Mutex
	standalone *Server
	cluster    *Cluster
}

// SharedStandalone returns this process's shared standalone server, starting
// it on first use (a failed start is retried by the next caller). Callers
// must not Stop or Kill it and should use unique keys; TestMain must call
// Shutdown (or use Run). If the server died anyway it is restarted on the
// same address.
func SharedStandalone(tb testing.TB) *Server {
	tb.Helper()
	Require(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if s := shared.standalone; s != nil {
		if !s.Running() {
			if err := s.Restart(); err != nil {
				tb.Fatalf("harness: restart shared redis-server: %v", err)
			}
		}
		return s
	}
	s, err := Start(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	shared.standalone = s
	return s
}

// SharedCluster returns this process's shared 3-master cluster, starting it
// on first use (a failed start is retried by the next caller). The same
// rules as for SharedStandalone apply.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	Require(tb, "redis-server", "redis-cli")
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		return shared.cluster
	}
	c, err := StartClusterE(ClusterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	shared.cluster = c
	return c
}

// Shutdown stops the shared servers and every other server started by this
// package that has not been stopped yet, each by its pid. Call it from
// TestMain after m.Run (Run does this). Safe to call more than once.
func Shutdown() {
	shared.mu.Lock()
	c, s := shared.cluster, shared.standalone
	shared.cluster, shared.standalone = nil, nil
	shared.mu.Unlock()
	if c != nil {
		c.Stop()
	}
	if s != nil {
		s.Stop()
	}

	liveMu.Lock()
	rest := make([]*Server, 0, len(live))
	for srv := range live {
		rest = append(rest, srv)
	}
	liveMu.Unlock()
	var wg sync.WaitGroup
	for _, srv := range rest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.Stop()
		}()
	}
	wg.Wait()
}

// Run runs the tests and then Shutdown, returning m.Run's exit code:
//
//	func TestMain(m *testing.M) { os.Exit(harness.Run(m)) }
func Run(m *testing.M) int {
	defer Shutdown()
	return m.Run()
}

// Main is a TestMain that checks for leaks: it runs the tests, stops the
// servers (Run) and, when the tests passed, fails the run if a goroutine
// is left behind (FindLeaks); then it exits.
//
//	func TestMain(m *testing.M) { harness.Main(m) }
func Main(m *testing.M) {
	code := Run(m)
	if code == 0 {
		if err := FindLeaks(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
