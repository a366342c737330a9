package harness

import (
	"strings"
	"time"

	"go.uber.org/goleak"
)

// dialProbeSleep is how long go-redis's pool sleeps between the dial
// probes it starts after PoolSize dials in a row failed (the pool's
// tryDial): a probe of a pool closed during that sleep ends only after it.
const dialProbeSleep = time.Second

// FindLeaks reports the goroutines still running at the end of a suite
// (goleak.Find). A dial probe of a go-redis pool closed while its server
// was gone (a test that stopped a server) sleeps out its second before it
// sees the pool closed: when such a probe is among the goroutines found,
// FindLeaks looks again once that second has passed, and only what is
// still there then is a leak.
func FindLeaks() error {
	err := goleak.Find()
	if err == nil || !strings.Contains(err.Error(), "(*ConnPool).tryDial") {
		return err
	}
	time.Sleep(dialProbeSleep + dialProbeSleep/2)
	return goleak.Find()
}
