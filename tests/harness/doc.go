// Package harness starts real Redis servers for integration tests and stops
// them again by pid.
//
// # Servers
//
// [Start] / [StartStandalone] launch a standalone redis-server and
// [StartClusterE] / [StartCluster] launch a three-master Redis Cluster. Every
// redis-server is a child process of the test binary (exec.Cmd, --daemonize
// no) listening on 127.0.0.1 only, on a port chosen by binding 127.0.0.1:0
// (never 6379), with no persistence (--save "" --appendonly no) and its own
// temporary --dir. Its stdout/stderr go to a log file in that directory; when
// a server fails to start, the last lines of that log are part of the error.
//
// Servers are stopped by pid only ([Server.Stop]: SIGTERM, then SIGKILL after
// a grace period, then wait for the exit). The harness never signals a
// process it did not start and never looks processes up by name.
//
// On Linux each redis-server is started in its own process group with
// Pdeathsig=SIGKILL, so if the test binary dies (panic, timeout, kill -9)
// its servers die with it instead of lingering.
//
// # Skipping policy
//
// Integration tests need the redis-server binary (and redis-cli for the
// cluster). When a binary is missing from PATH, [Require] — called by every
// tb-taking starter — skips the test with a loud "SKIP: ..." message. When
// the environment variable LUALOCK_REQUIRE_REDIS=1 is set (CI sets it), a
// missing binary is a test failure instead, so CI can never silently run
// zero integration tests. A server that is present but fails to start is
// always a failure. Note that `go test ./...` without -v prints only "ok"
// for a package whose tests all passed or skipped, hiding the skip message
// (and the banner Require also writes to stderr); run with -v, or set
// LUALOCK_REQUIRE_REDIS=1, to be sure the integration tests ran.
//
// # Sharing servers within a test binary
//
// [SharedStandalone] and [SharedCluster] lazily start one server (cluster)
// per test process and hand the same instance to every caller; a failed
// start is retried by the next caller. Tests using shared servers must not
// Stop, Kill or Restart them and should use unique keys (they may run in
// parallel). The package's TestMain must stop them after the tests:
//
//	func TestMain(m *testing.M) {
//		os.Exit(harness.Run(m)) // m.Run(), then harness.Shutdown()
//	}
//
// [Main] does the same and then fails the run when a goroutine is left
// behind ([FindLeaks]).
//
// [Shutdown] stops the shared servers and every other server started by this
// package that is still running.
package harness
