package backends

import (
	"context"
	"testing"
	"time"

	"github.com/lualock/lualock/tests/harness"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// NewClient returns a lualock client on rdb, closed by the test's cleanup.
func NewClient(t *testing.T, rdb redis.UniversalClient, o lualock.Options) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// UnlockLater unlocks l in the test's cleanup if it still holds it, under
// a fresh context (the test's own is cancelled by then).
func UnlockLater(t *testing.T, l *lualock.Lock) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for range 8 {
			if l.Unlock(ctx) != nil {
				return
			}
		}
	})
}

// Holds reads the hold count of l in Redis, failing the test on error.
func Holds(t *testing.T, ctx context.Context, l *lualock.Lock) int {
	t.Helper()
	n, err := l.HoldCount(ctx)
	if err != nil {
		t.Fatalf("HoldCount: %v", err)
	}
	return n
}

// Hooked returns a new client on the same Redis as rdb, with hook.
func Hooked(t *testing.T, rdb redis.UniversalClient, hook redis.Hook) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch r := rdb.(type) {
	case *redis.Client:
		c = redis.NewClient(&redis.Options{Addr: r.Options().Addr, MaintNotificationsConfig: harness.NoMaintNotifications()})
	case *redis.ClusterClient:
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Options().Addrs, MaintNotificationsConfig: harness.NoMaintNotifications()})
	default:
		t.Fatalf("unexpected client %T", rdb)
	}
	c.AddHook(hook)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// AutoPipeliner returns rdb's auto-pipeliner (go-redis 9.22 or later), for
// Options.Scripter. It belongs to rdb, which stops it when the test's
// cleanup closes rdb.
func AutoPipeliner(t testing.TB, rdb redis.UniversalClient) redis.Scripter {
	t.Helper()
	c, ok := rdb.(interface {
		AutoPipeline() (*redis.AutoPipeliner, error)
	})
	if !ok {
		t.Fatalf("no auto-pipeliner for %T", rdb)
	}
	ap, err := c.AutoPipeline()
	if err != nil {
		t.Fatalf("AutoPipeline: %v", err)
	}
	return ap
}
