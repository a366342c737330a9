package loss_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/internal/backends"
)

// The watchdog's own renewals wake no check of the hold tracker: they run
// on the tracker's connection, which tracks with NOLOOP, and their script
// reads each key again after its write, so that a change made by anyone
// else after a renewal is still heard. On a server and a cluster of the
// test's own (INFO commandstats then counts this test's calls only), with
// a hold of every kind the watchdog renews (lock_renew, the read hold's
// and the permit's scripts): some three consecutive renewal rounds run no
// check script (EVALSHA_RO), whose count grew by about one per hold and
// round when the renewals went through the client; then an overwrite of
// every hold's key with a string, which only the tracker can find (the
// renewal fails on the key's type), ends each hold as overwritten.
func TestLoss_ownRenewalsCheckNothing(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(t *testing.T) {
			rdb, _ := ownServers(t, cluster)
			ctx := context.Background()
			var holds atomic.Int64 // renewed by successful calls
			// Renewals every second: several rounds in the test's time, and
			// a lease long enough that a loaded machine lets none lapse.
			c := newClient(t, rdb, lualock.Options{WatchdogLease: 3 * time.Second,
				Observer: lualock.Observer{Renew: func(e lualock.RenewEvent) {
					if e.Err == nil {
						holds.Add(int64(e.Holds))
					}
				}}})
			var hs []hold
			var names []string
			for _, k := range kinds() {
				if k.name == "lease" {
					continue // a fixed lease: nothing renews it
				}
				hs = append(hs, k.take(t, c, "own-"+k.name))
				names = append(names, k.name)
			}
			n := int64(len(hs))
			checks := func() int64 {
				return calls(t, rdb, func(cmd string) bool { return cmd == "evalsha_ro" })
			}
			quiet := false
			for try := 0; try < 5 && !quiet; try++ {
				c0, h0 := checks(), holds.Load()
				backends.WaitFor(t, "three renewal rounds", 30*time.Second, func() bool { return holds.Load()-h0 >= 3*n })
				got := checks() - c0
				quiet = got == 0
				t.Logf("three renewal rounds of %d holds: %d check calls", n, got)
			}
			if !quiet {
				t.Fatal("every window of three renewal rounds ran check scripts: the renewals woke the tracker")
			}
			// Overwrites right after a round: the renewal cannot find those
			// (its script fails on the key's type, and the hold would end
			// only when its lease runs out), the tracker's check can.
			h0 := holds.Load()
			backends.WaitFor(t, "a renewal round", 30*time.Second, func() bool { return holds.Load()-h0 >= n })
			for _, h := range hs {
				if err := rdb.Set(ctx, h.key, "overwritten", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i, h := range hs {
				wantLost(t, h, names[i]+": an overwrite after the renewals")
				if cause := context.Cause(h.ctx); !strings.Contains(cause.Error(), "overwritten with another type") {
					t.Errorf("%s: ended with %v, want the tracker's overwrite: it did not hear the change", names[i], cause)
				}
			}
		})
	}
}
