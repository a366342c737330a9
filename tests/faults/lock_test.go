package faults_test

import (
	"testing"

	"github.com/lualock/lualock/tests/internal/backends"
)

func TestMain(m *testing.M) { backends.Main(m) }

// TestLock runs the scenarios of lost, slow and unsent replies, and of an
// Unlock whose context has ended, on every backend, in parallel: go test
// -run 'TestLock/cluster/Unlock_lostReply' runs one. The faults that need
// a server of their own (down, hung, restarted, a cluster master killed,
// a blackholed connection) are tests of their own.
func TestLock(t *testing.T) {
	backends.Table(t, []backends.Scenario{
		{Name: "Unlock_racesRenewal", Parallel: true, Run: backends.OnClient(testUnlockRacesRenewal)},
		{Name: "Unlock_lostReply", Parallel: true, Run: backends.OnClient(testLostReplies)},
		{Name: "Lock_settlesUnlockPastLatch", Parallel: true, Run: testSettlesUnlockPastLatch},
		{Name: "Lock_reentryIntoLostHold", Parallel: true, Run: testReentryIntoLostHold},
		{Name: "Unlock_endedContext", Parallel: true, Run: testEndedContext},
		{Name: "Unlock_endedContextUnconfirmed", Parallel: true, Run: testEndedContextUnconfirmed},
		{Name: "Unlock_resentPastLatch", Parallel: true, Run: testResentPastLatch},
		{Name: "Unlock_latchesDeleted", Parallel: true, Run: testLatchesDeleted},
	})
}
