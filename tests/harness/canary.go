package harness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Canary measures what the machine's load costs a test in the same run: a
// goroutine sleeps period after period and records how much later than
// asked each sleep ended and, with a Redis client, how long a PING took
// after each sleep. A test whose bound covers wake-ups (a timer, a reply
// read by a goroutine) and round trips to Redis widens the bound by those
// measures, instead of by a constant that a busy machine exceeds. On an
// idle machine both are a millisecond or two, so the bound stays as tight
// as it was.
type Canary struct {
	period time.Duration
	rdb    redis.UniversalClient
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	late   time.Duration
	rtt    time.Duration
}

// StartCanary starts a canary that wakes every period until the test ends,
// and pings Redis through rdb after each wake-up when rdb is not nil.
func StartCanary(t testing.TB, period time.Duration, rdb redis.UniversalClient) *Canary {
	c := &Canary{period: period, rdb: rdb, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	t.Cleanup(c.Stop)
	return c
}

// Stop stops the canary (at the latest when the test ends); its measures
// stay.
func (c *Canary) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

func (c *Canary) run() {
	defer close(c.done)
	tm := time.NewTimer(c.period)
	defer tm.Stop()
	for {
		due := time.Now().Add(c.period)
		tm.Reset(c.period)
		select {
		case <-c.stop:
			return
		case <-tm.C:
		}
		late := time.Since(due)
		var rtt time.Duration
		if c.rdb != nil {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if c.rdb.Ping(ctx).Err() == nil {
				rtt = time.Since(start)
			}
			cancel()
		}
		c.mu.Lock()
		c.late, c.rtt = max(c.late, late), max(c.rtt, rtt)
		c.mu.Unlock()
	}
}

// Late returns the most any of the canary's wake-ups so far was late.
func (c *Canary) Late() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.late
}

// RoundTrip returns the longest PING so far (0 without a Redis client).
func (c *Canary) RoundTrip() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rtt
}

// Allowance is what wakeups wake-ups and trips round trips to Redis cost
// at worst so far, by the canary's measures: the widening of a bound that
// covers that many of each.
func (c *Canary) Allowance(wakeups, trips int) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(wakeups)*c.late + time.Duration(trips)*c.rtt
}

// String reports the canary's measures for a test's log.
func (c *Canary) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("canary: wake-ups up to %v late, PING up to %v", c.late.Round(time.Microsecond), c.rtt.Round(time.Microsecond))
}
