package backends

import (
	"context"
	"maps"
	"testing"

	"github.com/redis/go-redis/v9"
)

// WantHash fails the test unless key is the hash want, field for field.
func WantHash(t *testing.T, rdb redis.UniversalClient, key string, want map[string]string) {
	t.Helper()
	got, err := rdb.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("HGETALL %s = %v, want %v", key, got, want)
	}
}

// PTTL returns the PTTL of key in ms: -2 when there is no key, -1 when it
// has no expiry.
func PTTL(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	if d < 0 {
		return int64(d) // go-redis returns -1 and -2 unscaled
	}
	return d.Milliseconds()
}

// WantPTTL fails the test unless lo < PTTL(key) <= hi; it returns the
// PTTL.
func WantPTTL(t *testing.T, rdb redis.UniversalClient, key string, lo, hi int64) int64 {
	t.Helper()
	p := PTTL(t, rdb, key)
	if p <= lo || p > hi {
		t.Fatalf("PTTL %s = %d, want in (%d, %d]", key, p, lo, hi)
	}
	return p
}

// WantGone fails the test when one of keys exists.
func WantGone(t *testing.T, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if n, err := rdb.Exists(context.Background(), k).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS %s = %d, %v; want no key", k, n, err)
		}
	}
}
