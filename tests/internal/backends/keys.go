package backends

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// UniqueName returns a lock name no other test uses, with a hash tag or
// without one as the test name suggests.
func UniqueName(t *testing.T) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + fmt.Sprintf("_%d", time.Now().UnixNano())
}

// KeysLeft lists the keys of a lock name that are still in Redis: the lock,
// and the fair lock's queue and deadlines. Latches are named with a request
// id and expire on their own; pass withLatches to count them as well.
func KeysLeft(t *testing.T, rdb redis.UniversalClient, name string, withLatches bool) []string {
	t.Helper()
	ctx := context.Background()
	tagged := "{" + name + "}"
	if strings.Contains(name, "{") {
		tagged = name
	}
	var left []string
	for _, k := range []string{name, "redisson_lock_queue:" + tagged, "redisson_lock_timeout:" + tagged} {
		n, err := rdb.Exists(ctx, k).Result()
		if err != nil {
			t.Fatalf("EXISTS %s: %v", k, err)
		}
		if n > 0 {
			left = append(left, k)
		}
	}
	if withLatches {
		pattern := "redisson_unlock_latch:" + tagged + ":*"
		var keys []string
		var err error
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			var mu sync.Mutex
			err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				ks, err := c.Keys(ctx, pattern).Result()
				mu.Lock()
				keys = append(keys, ks...)
				mu.Unlock()
				return err
			})
		} else {
			keys, err = rdb.Keys(ctx, pattern).Result()
		}
		if err != nil {
			t.Fatalf("KEYS %s: %v", pattern, err)
		}
		left = append(left, keys...)
	}
	return left
}

// NoKeys fails the test when a key of name is left (latches excluded).
func NoKeys(t *testing.T, rdb redis.UniversalClient, name string) {
	t.Helper()
	if left := KeysLeft(t, rdb, name, false); len(left) > 0 {
		t.Errorf("keys left behind: %q", left)
	}
}
