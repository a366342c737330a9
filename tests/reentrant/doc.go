// Package reentrant is the reentrant lock's integration suite, on
// miniredis, the shared standalone redis-server and the shared 3-master
// cluster. TestLock (lock_test.go) is its table of scenarios, written in
// hold_test.go (re-entry, visibility, hold count, force unlock),
// lease_test.go (leases, the watchdog, a deleted key), wait_test.go
// (waiting, timeouts, cancellation), load_test.go (no overlap under load,
// many clients) and redisson_test.go (interop with Redisson's own
// scripts). autopipeline_test.go runs both kinds of lock through go-redis's
// auto-pipeliner; bench_test.go has the uncontended benchmark.
package reentrant
