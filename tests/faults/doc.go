// Package faults is the suite of a lock's promise under faults: Redis
// down, hung or restarted without persistence (server_test.go), a cluster
// master killed (cluster_test.go), the holder's connection blackholed just
// before its lease runs out (margin_test.go), replies lost, slow or never
// sent (replies_test.go), an acquisition whose first reply is lost and
// resent late, for every kind of hold with a lease (resend_test.go), and
// an Unlock whose context has ended or whose
// release is resent past the unlock latch (unlock_test.go). TestLock
// (lock_test.go) runs the scenarios that need no server of their own on
// every backend.
package faults
