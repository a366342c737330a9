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

// pubsubTimeout bounds each wait for a subscription's confirmation or a
// message.
const pubsubTimeout = 5 * time.Second

// Channel is the release channel of lock name (a name without braces).
func Channel(name string) string { return "redisson_lock__channel:{" + name + "}" }

// Glob escapes s for a Redis glob pattern.
func Glob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// Channels lists the pub/sub channels matching pattern that have a
// subscriber, plain (PUBSUB CHANNELS) or sharded (PUBSUB SHARDCHANNELS: the
// default on a cluster), on every master of a cluster.
func Channels(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := func(ctx context.Context, c redis.UniversalClient) ([]string, error) {
		chs, err := c.PubSubChannels(ctx, pattern).Result()
		if err != nil {
			return nil, err
		}
		shard, err := c.PubSubShardChannels(ctx, pattern).Result()
		if noShard(err) {
			return chs, nil
		}
		return append(chs, shard...), err
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var all []string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			chs, err := list(ctx, c)
			mu.Lock()
			all = append(all, chs...)
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatalf("PUBSUB CHANNELS %s: %v", pattern, err)
		}
		return all
	}
	chs, err := list(ctx, rdb)
	if err != nil {
		t.Fatalf("PUBSUB CHANNELS %s: %v", pattern, err)
	}
	return chs
}

// noShard reports whether err says that the server has no sharded pub/sub
// (miniredis): it then has no sharded subscribers either.
func noShard(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unknown subcommand")
}

// NumSub returns the number of subscribers of each channel, plain
// (PUBSUB NUMSUB) and sharded (PUBSUB SHARDNUMSUB, asked one channel at a
// time: the default on a cluster), summed over the masters of a cluster.
// Unlike harness.NumSub it works on miniredis too (plain only there).
func NumSub(t *testing.T, rdb redis.UniversalClient, channels []string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sum := map[string]int64{}
	add := func(ctx context.Context, c redis.UniversalClient) error {
		m, err := c.PubSubNumSub(ctx, channels...).Result()
		for k, v := range m {
			sum[k] += v
		}
		if err != nil {
			return err
		}
		for _, ch := range channels {
			m, err := c.PubSubShardNumSub(ctx, ch).Result()
			if noShard(err) {
				return nil
			}
			if err != nil {
				return err
			}
			sum[ch] += m[ch]
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return add(ctx, c)
		})
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		return sum
	}
	if err := add(ctx, rdb); err != nil {
		t.Fatalf("PUBSUB NUMSUB: %v", err)
	}
	return sum
}

// Subscribe subscribes to channels (SSUBSCRIBE when sharded) and waits
// for every confirmation; the test's cleanup closes it.
func Subscribe(t *testing.T, rdb redis.UniversalClient, sharded bool, channels ...string) *redis.PubSub {
	t.Helper()
	ctx := context.Background()
	var ps *redis.PubSub
	if sharded {
		ps = rdb.SSubscribe(ctx, channels...)
	} else {
		ps = rdb.Subscribe(ctx, channels...)
	}
	t.Cleanup(func() { _ = ps.Close() })
	for range channels {
		m, err := ps.ReceiveTimeout(ctx, pubsubTimeout)
		if err != nil {
			t.Fatalf("subscribe %q: %v", channels, err)
		}
		if _, ok := m.(*redis.Subscription); !ok {
			t.Fatalf("subscribe %q: got %T %v, want a confirmation", channels, m, m)
		}
	}
	return ps
}

// Messages returns every message ps received so far, as "channel=payload",
// in order. It publishes a barrier on barrier (a channel of the same slot
// as the script's, so it passes through the same node after them) and
// collects up to it, so no sleeping is needed to prove that nothing else
// was published.
func Messages(t *testing.T, rdb redis.UniversalClient, ps *redis.PubSub, sharded bool, barrier string) []string {
	t.Helper()
	ctx := context.Background()
	token := fmt.Sprintf("barrier-%d", time.Now().UnixNano())
	var err error
	if sharded {
		err = rdb.SPublish(ctx, barrier, token).Err()
	} else {
		err = rdb.Publish(ctx, barrier, token).Err()
	}
	if err != nil {
		t.Fatalf("publish barrier: %v", err)
	}
	var got []string
	for {
		m, err := ps.ReceiveTimeout(ctx, pubsubTimeout)
		if err != nil {
			t.Fatalf("waiting for messages (so far %q): %v", got, err)
		}
		switch m := m.(type) {
		case *redis.Message:
			if m.Channel == barrier && m.Payload == token {
				return got
			}
			got = append(got, m.Channel+"="+m.Payload)
		case *redis.Pong:
		default:
			t.Fatalf("unexpected pub/sub item %T %v", m, m)
		}
	}
}
