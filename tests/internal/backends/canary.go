package backends

import (
	"testing"
	"time"

	"github.com/lualock/lualock/tests/harness"
	"github.com/redis/go-redis/v9"
)

// Canary is harness.Canary: the suites measure a run's load with it.
type Canary = harness.Canary

// StartCanary is harness.StartCanary.
func StartCanary(t testing.TB, period time.Duration, rdb redis.UniversalClient) *Canary {
	return harness.StartCanary(t, period, rdb)
}
