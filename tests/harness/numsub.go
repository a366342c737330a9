package harness

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// NumSub returns how many clients subscribe to channel with SUBSCRIBE
// (plain) and with SSUBSCRIBE (sharded), summed over the masters of a
// cluster. It needs Redis 7 (miniredis has no PUBSUB SHARDNUMSUB).
func NumSub(ctx context.Context, rdb redis.UniversalClient, channel string) (plain, sharded int64, err error) {
	count := func(c redis.UniversalClient) (int64, int64, error) {
		p, err := c.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			return 0, 0, err
		}
		s, err := c.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			return 0, 0, err
		}
		return p[channel], s[channel], nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return count(rdb)
	}
	var mu sync.Mutex
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		p, s, err := count(c)
		mu.Lock()
		defer mu.Unlock()
		plain += p
		sharded += s
		return err
	})
	return plain, sharded, err
}
