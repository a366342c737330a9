package backends

import (
	"context"
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds or d has passed, and
// reports whether it held.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitFor polls cond every 2 ms for up to limit, and fails the test when
// it does not hold by then.
func WaitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// WaitDone waits up to d for ctx to end and returns how long it took,
// failing the test when it did not end.
func WaitDone(t *testing.T, ctx context.Context, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ctx.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: the hold's Done did not fire within %v", what, d)
		return 0
	}
}
