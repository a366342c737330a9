package family

// The generated wrappers of the read-write, fenced and spin locks' scripts,
// called with the keys and arguments docs/PROTOCOL-PRIMITIVES.md gives.

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
)

func readAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) (int64, error) {
	return generated.RwlockReadAcquire(context.Background(), rdb,
		generated.RwlockReadAcquireKeys{Lock: n.name, Prefix: n.prefix},
		generated.RwlockReadAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func readRelease(rdb redis.Scripter, n names, latch, field string, before int64, publish string) (*int64, error) {
	return generated.RwlockReadRelease(context.Background(), rdb,
		generated.RwlockReadReleaseKeys{Lock: n.name, Prefix: n.prefix, Channel: n.rwlock, Latch: latch},
		generated.RwlockReadReleaseArgs{Field: field, LatchMS: latchMS, Publish: publish, Holds: before})
}

func writeAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) (int64, error) {
	return generated.RwlockWriteAcquire(context.Background(), rdb,
		generated.RwlockWriteAcquireKeys{Lock: n.name},
		generated.RwlockWriteAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func writeRelease(rdb redis.Scripter, n names, latch, field string, before, lease int64, publish string) (*int64, error) {
	return generated.RwlockWriteRelease(context.Background(), rdb,
		generated.RwlockWriteReleaseKeys{Lock: n.name, Channel: n.rwlock, Latch: latch},
		generated.RwlockWriteReleaseArgs{LeaseMS: lease, Field: field, LatchMS: latchMS, Publish: publish, Holds: before})
}

func forceRelease(rdb redis.Scripter, n names, latch, mode, publish string) (bool, error) {
	return generated.RwlockForceRelease(context.Background(), rdb,
		generated.RwlockForceReleaseKeys{Lock: n.name, Channel: n.rwlock, Latch: latch},
		generated.RwlockForceReleaseArgs{Mode: mode, LatchMS: latchMS, Publish: publish})
}

func readRenew(rdb redis.Scripter, lease int64, locks []names, fields ...string) ([]int64, error) {
	var keys []string
	for _, n := range locks {
		keys = append(keys, n.name, n.prefix)
	}
	return generated.RwlockReadRenew(context.Background(), rdb,
		generated.RwlockReadRenewKeys{Keys: keys}, generated.RwlockReadRenewArgs{LeaseMS: lease, Fields: fields})
}

func rwStatus(rdb redis.Scripter, n names, field string) ([]int64, error) {
	return generated.RwlockStatus(context.Background(), rdb,
		generated.RwlockStatusKeys{Lock: n.name}, generated.RwlockStatusArgs{Field: field})
}

func fencedAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) ([]int64, error) {
	return generated.FencedAcquire(context.Background(), rdb,
		generated.FencedAcquireKeys{Lock: n.name, Token: n.token},
		generated.FencedAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func lockAcquire(rdb redis.Scripter, n names, field string, holds, lease int64) (int64, error) {
	return generated.LockAcquire(context.Background(), rdb,
		generated.LockAcquireKeys{Lock: n.name},
		generated.LockAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func lockRelease(rdb redis.Scripter, n names, latch, field string, before, lease int64, publish string) (*int64, error) {
	return generated.LockRelease(context.Background(), rdb,
		generated.LockReleaseKeys{Lock: n.name, Channel: n.channel, Latch: latch},
		generated.LockReleaseArgs{LeaseMS: lease, Field: field, LatchMS: latchMS, Publish: publish, Holds: before})
}

func lockForceRelease(rdb redis.Scripter, n names, latch, publish string) (bool, error) {
	return generated.LockForceRelease(context.Background(), rdb,
		generated.LockForceReleaseKeys{Lock: n.name, Channel: n.channel, Latch: latch},
		generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: publish})
}

func readRenewRaw(rdb redis.Scripter, keys []string, lease int64, fields ...string) ([]int64, error) {
	return generated.RwlockReadRenew(context.Background(), rdb,
		generated.RwlockReadRenewKeys{Keys: keys}, generated.RwlockReadRenewArgs{LeaseMS: lease, Fields: fields})
}
