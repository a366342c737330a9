package harness

import (
	"slices"
	"strings"
	"time"

	"go.uber.org/goleak"
)

// delayedSleep is the longest a known third-party goroutine sleeps before
// it sees that its client was closed and ends: go-redis's pool sleeps a
// second between the dial probes it starts after PoolSize dials in a row
// failed (the pool's tryDial), and a rueidis cluster client schedules a
// topology refresh at most a second after its last one when a connection
// drops or a command meets a network error (its singleflight's LazyDo); a
// client closed meanwhile keeps that sleeper until it runs.
const delayedSleep = time.Second

// delayed are the marks, in a goroutine's stack, of those sleepers.
var delayed = []string{"(*ConnPool).tryDial", "github.com/redis/rueidis.(*call).LazyDo"}

// FindLeaks reports the goroutines still running at the end of a suite
// (goleak.Find). While one of the known sleepers (delayed) is among them,
// FindLeaks looks again once its sleep has passed (three times at most: a
// loaded machine may run it late), and only what is still there then is a
// leak.
func FindLeaks() error {
	err := goleak.Find()
	for range 3 {
		if err == nil || !slices.ContainsFunc(delayed, func(m string) bool { return strings.Contains(err.Error(), m) }) {
			return err
		}
		time.Sleep(delayedSleep + delayedSleep/2)
		err = goleak.Find()
	}
	return err
}
