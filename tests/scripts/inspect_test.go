package scripts_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/internal/backends"
)

// ---- inspection ------------------------------------------------------------

func mapEq[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func list(t *testing.T, rdb redis.UniversalClient, key string) []string {
	t.Helper()
	l, err := rdb.LRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", key, err)
	}
	return l
}

func wantList(t *testing.T, rdb redis.UniversalClient, key string, want ...string) {
	t.Helper()
	if got := list(t, rdb, key); !slices.Equal(got, want) {
		t.Fatalf("LRANGE %s = %q, want %q", key, got, want)
	}
}

func zset(t *testing.T, rdb redis.UniversalClient, key string) map[string]int64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE %s WITHSCORES: %v", key, err)
	}
	m := make(map[string]int64, len(zs))
	for _, z := range zs {
		m[z.Member.(string)] = int64(z.Score)
	}
	return m
}

func get(t *testing.T, rdb redis.UniversalClient, key string) (string, bool) {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v, true
}

// wantLatch checks the latch's value and that it expires within latch_ms.
func wantLatch(t *testing.T, rdb redis.UniversalClient, key, want string) {
	t.Helper()
	v, ok := get(t, rdb, key)
	if !ok || v != want {
		t.Fatalf("GET %s = %q (exists %v), want %q", key, v, ok, want)
	}
	backends.WantPTTL(t, rdb, key, 0, latchMS)
}

func wantNoKeysLeft(t *testing.T, rdb redis.UniversalClient, name string) {
	t.Helper()
	if left := backends.KeysLeft(t, rdb, name, false); len(left) > 0 {
		t.Fatalf("keys left behind: %q", left)
	}
}

// serverMS is Redis's clock (TIME) in ms since the epoch.
func serverMS(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now.UnixMilli()
}

// lockExpiry is the expiry of key (ms since the epoch) as the fair scripts
// compute it: TIME + PTTL, read in one script call on key's node.
func lockExpiry(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	const src = `local t = redis.call('time')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + math.max(redis.call('pttl', KEYS[1]), 0)`
	e, err := rdb.Eval(context.Background(), src, []string{key}).Int64()
	if err != nil {
		t.Fatalf("expiry of %s: %v", key, err)
	}
	return e
}

// ---- script cache ----------------------------------------------------------

// masters runs f on every master of a cluster, or on the one server.
func masters(t *testing.T, rdb redis.UniversalClient, f func(c redis.Cmdable) error) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return f(c) })
	} else {
		err = f(rdb)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// flush runs SCRIPT FLUSH on every master.
func flush(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	masters(t, rdb, func(c redis.Cmdable) error { return c.ScriptFlush(context.Background()).Err() })
}

// cached reports, for every master, whether each sha is in its script cache.
func cached(t *testing.T, rdb redis.UniversalClient, shas ...string) [][]bool {
	t.Helper()
	var mu sync.Mutex
	var out [][]bool
	masters(t, rdb, func(c redis.Cmdable) error {
		ex, err := c.ScriptExists(context.Background(), shas...).Result()
		mu.Lock()
		out = append(out, ex)
		mu.Unlock()
		return err
	})
	return out
}

func wantCached(t *testing.T, rdb redis.UniversalClient, want bool, shas ...string) {
	t.Helper()
	masters := cached(t, rdb, shas...)
	if len(masters) == 0 {
		t.Fatal("no master answered SCRIPT EXISTS")
	}
	for i, ex := range masters {
		for j, e := range ex {
			if e != want {
				t.Fatalf("master %d: SCRIPT EXISTS %s = %v, want %v", i, shas[j], e, want)
			}
		}
	}
}

func allSHAs() []string {
	var shas []string
	for _, s := range generated.Scripts {
		shas = append(shas, s.SHA1)
	}
	return shas
}

// wantCalls compares the recorded calls with want (missing names: 0).
func wantCalls(t *testing.T, s *backends.Recorder, want map[string]int) {
	t.Helper()
	if got := s.Calls(); !mapEq(got, backends.NonZero(want)) {
		t.Fatalf("script commands sent = %v, want %v", got, want)
	}
}

// wantMessages fails the test unless backends.Messages returns want.
func wantMessages(t *testing.T, rdb redis.UniversalClient, ps *redis.PubSub, sharded bool, barrier string, want ...string) {
	t.Helper()
	if got := backends.Messages(t, rdb, ps, sharded, barrier); !slices.Equal(got, want) {
		t.Fatalf("messages = %q, want %q", got, want)
	}
}
