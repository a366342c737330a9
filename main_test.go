package lualock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: a watchdog,
// a pub/sub listener or a waiter that Close or Unlock did not stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
