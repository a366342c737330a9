// Package fair is the fair lock's integration suite, on miniredis, the
// shared standalone redis-server and the shared 3-master cluster: FIFO
// order (order_test.go), deadlines and their drift (deadlines_test.go,
// sim_test.go), dead waiters and short budgets (budget_test.go), leaving
// the queue (leave_test.go), waking only the head (wake_test.go), interop
// with a Redisson-style client (redisson_test.go), re-entry and force
// unlock (reentry_test.go), the queue scripts' edge cases
// (queue_test.go), and the fair lock's benchmarks (bench_test.go).
package fair
