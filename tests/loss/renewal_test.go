package loss_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// The watchdog's own renewals wake no check of the hold tracker: they run
// on the tracker's connection, which tracks with NOLOOP, and their script
// reads each key again after its write, so that a change made by anyone
// else after a renewal is still heard. On a server and a cluster of the
// test's own (INFO commandstats then counts this test's calls only), with
// a hold of every kind the watchdog renews (lock_renew, the read hold's
// and the permit's scripts) and bigLocks locks of one slot (one renewal
// call larger than the tracker's 4 KB write buffer): in every window of
// renewal rounds the client sent no renewal script itself (a go-redis
// hook counts them: each was relayed) and no check script ran
// (EVALSHA_RO, whose count grew by about one per hold and round when the
// renewals went through the client); then an overwrite of every hold's
// key with a string, which only the tracker can find (the renewal fails
// on the key's type), ends each hold as overwritten. At a 12 s lease the
// tracker pings every 4 s, longer than its 3 s Timeout: the big call is
// written after the connection was idle that long.
func TestLoss_ownRenewalsCheckNothing(t *testing.T) {
	for _, c := range []struct {
		name            string
		cluster         bool
		lease           time.Duration
		windows, rounds int
	}{
		// Renewals every second: several rounds in the test's time, and a
		// lease long enough that a loaded machine lets none lapse.
		{"standalone", false, 3 * time.Second, 3, 3},
		{"cluster", true, 3 * time.Second, 3, 3},
		{"standalone idle", false, 12 * time.Second, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb, _ := ownServers(t, c.cluster)
			ctx := context.Background()
			direct := renewalCalls()
			rdb.AddHook(direct)
			var holds atomic.Int64 // renewed by successful calls
			cl := newClient(t, rdb, lualock.Options{WatchdogLease: c.lease,
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
				hs = append(hs, k.take(t, cl, "own-"+k.name))
				names = append(names, k.name)
			}
			for i := range bigLocks {
				if err := cl.NewLock(fmt.Sprintf("{own-big}-%03d", i)).Lock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			n := int64(len(hs) + bigLocks)
			checks := func() int64 {
				return calls(t, rdb, func(cmd string) bool { return cmd == "evalsha_ro" })
			}
			// The first round after the acquisitions, so that every hold's
			// first check is answered before the windows.
			h0 := holds.Load()
			backends.WaitFor(t, "a renewal round", 60*time.Second, func() bool { return holds.Load()-h0 >= n })
			for w := range c.windows {
				c0, d0, h0 := checks(), direct.N.Load(), holds.Load()
				backends.WaitFor(t, "renewal rounds", 60*time.Second, func() bool { return holds.Load()-h0 >= int64(c.rounds)*n })
				got, sent := checks()-c0, direct.N.Load()-d0
				t.Logf("window %d, %d renewal rounds of %d holds: %d check calls, %d renewal calls sent by the client", w, c.rounds, n, got, sent)
				if sent != 0 {
					t.Errorf("window %d: the client sent %d renewal calls: the tracking connection did not carry them", w, sent)
				}
				if got != 0 {
					t.Errorf("window %d: %d check calls: the renewals woke the tracker", w, got)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			// Overwrites right after a round: the renewal cannot find those
			// (its script fails on the key's type, and the hold would end
			// only when its lease runs out), the tracker's check can.
			h0 = holds.Load()
			backends.WaitFor(t, "a renewal round", 60*time.Second, func() bool { return holds.Load()-h0 >= n })
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

// bigLocks is how many locks of one slot make a renewal call larger than
// the tracker's 4 KB write buffer (about 60 bytes a lock).
const bigLocks = 200

// renewalCalls counts the renewal script calls (EVALSHA of the
// watchdog's scripts) a go-redis client sends.
func renewalCalls() *backends.CountCalls {
	shas := []string{generated.LockRenewSHA1, generated.RwlockReadRenewSHA1, generated.ExpirableSemaphoreRenewSHA1}
	return &backends.CountCalls{Match: func(a []any) bool {
		return len(a) > 1 && strings.EqualFold(fmt.Sprint(a[0]), "evalsha") && slices.Contains(shas, fmt.Sprint(a[1]))
	}}
}
