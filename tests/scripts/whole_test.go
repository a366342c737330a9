package scripts_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/luart"
	"github.com/lualock/lualock/tests/internal/backends"
)

// TestWholeNumberArguments checks the arguments the scripts hand on to
// PEXPIRE, SET PX, INCRBY or DECRBY as sent (include/whole.lua): anything
// but the digits of a positive integer below 10^15, written as Redis
// writes it, is refused with the argument's error before any write; the
// same call with the canonical values writes what it should (the values
// and TTLs checked), so each refusal below is one that would otherwise
// have written.
func TestWholeNumberArguments(t *testing.T) {
	bad := []string{"", "0", "-1", "+30000", "030000", "3e4", "30000.0", " 30000", "30000 ", "0x7530", "1000000000000000", "x"}
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		u := "{" + backends.UniqueName(t) + "}"
		held := func(lock string, kv ...any) func() {
			return func() {
				if err := rdb.HSet(ctx, lock, kv...).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rdb.Do(ctx, "pexpire", lock, 60_000_000_000).Err(); err != nil { // 694 days: a lease given shortens it
					t.Fatal(err)
				}
			}
		}
		count := func(sem, v string) func() {
			return func() {
				if err := rdb.Set(ctx, sem, v, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// field checks a hash field's value, and that the key's TTL is at
		// most maxMS (and set); str the same of a string key (maxMS -1:
		// no TTL).
		ttlAtMost := func(key string, maxMS int64) {
			ms, err := rdb.Do(ctx, "pttl", key).Int64()
			if err != nil || (maxMS < 0 && ms != -1) || (maxMS >= 0 && (ms <= 0 || ms > maxMS)) {
				t.Fatalf("PTTL %s = %d, %v; want up to %d ms", key, ms, err, maxMS)
			}
		}
		field := func(key, f, want string, maxMS int64) func() {
			return func() {
				if v, err := rdb.HGet(ctx, key, f).Result(); err != nil || v != want {
					t.Fatalf("HGET %s %s = %q, %v; want %q", key, f, v, err, want)
				}
				ttlAtMost(key, maxMS)
			}
		}
		str := func(key, want string, maxMS int64) func() {
			return func() {
				if v, err := rdb.Get(ctx, key).Result(); err != nil || v != want {
					t.Fatalf("GET %s = %q, %v; want %q", key, v, err, want)
				}
				ttlAtMost(key, maxMS)
			}
		}
		both := func(f, g func()) func() { return func() { f(); g() } }
		for _, c := range []struct {
			script *luart.Script
			setup  func()
			keys   []string
			args   []string
			pos    []int // indexes into args of the whole-number arguments
			names  []string
			after  func() // checks what the canonical call wrote
		}{
			{generated.LockAcquireScript, nil, []string{u + "a"}, []string{"30000", "c1:1", "1"}, []int{0}, []string{"lease_ms"}, field(u+"a", "c1:1", "1", 30_000)},
			{generated.LockReleaseScript, held(u+"b", "c1:1", "2"), []string{u + "b", u + "b-ch", u + "b-latch"}, []string{"30000", "c1:1", "10000", "publish", "2"}, []int{0, 2}, []string{"lease_ms", "latch_ms"}, field(u+"b", "c1:1", "1", 30_000)},
			{generated.LockReleaseScript, held(u+"c", "c1:1", "1"), []string{u + "c", u + "c-ch", u + "c-latch"}, []string{"30000", "c1:1", "10000", "publish", "1"}, []int{2}, []string{"latch_ms"}, str(u+"c-latch", "1", 10_000)},
			{generated.LockRenewScript, held(u+"d", "c1:1", "1"), []string{u + "d"}, []string{"30000", "0", "c1:1"}, []int{0}, []string{"lease_ms"}, field(u+"d", "c1:1", "1", 30_000)},
			{generated.FencedAcquireScript, nil, []string{u + "e", u + "e-token"}, []string{"30000", "c1:1", "1"}, []int{0}, []string{"lease_ms"}, field(u+"e", "c1:1", "1", 30_000)},
			{generated.FairAcquireScript, nil, []string{u + "f", u + "f-queue", u + "f-timeouts", u + "f-ch"}, []string{"30000", "c1:1", "60000", "1", "publish"}, []int{0}, []string{"lease_ms"}, field(u+"f", "c1:1", "1", 30_000)},
			{generated.FairReleaseScript, held(u+"g", "c1:1", "2"), []string{u + "g", u + "g-queue", u + "g-timeouts", u + "g-ch", u + "g-latch"}, []string{"30000", "c1:1", "10000", "60000", "publish", "2"}, []int{0, 2}, []string{"lease_ms", "latch_ms"}, field(u+"g", "c1:1", "1", 30_000)},
			{generated.RwlockReadAcquireScript, nil, []string{u + "h", u + "h"}, []string{"30000", "c1:1", "1"}, []int{0}, []string{"lease_ms"}, field(u+"h", "c1:1", "1", 30_000)},
			{generated.RwlockWriteAcquireScript, nil, []string{u + "i"}, []string{"30000", "c1:1", "1"}, []int{0}, []string{"lease_ms"}, field(u+"i", "c1:1:write", "1", 30_000)},
			{generated.RwlockReadReleaseScript, held(u+"j", "mode", "read", "c1:1", "1"), []string{u + "j", u + "j", u + "j-ch", u + "j-latch"}, []string{"c1:1", "10000", "publish", "1"}, []int{1}, []string{"latch_ms"}, str(u+"j-latch", "1", 10_000)},
			{generated.RwlockWriteReleaseScript, held(u+"k", "mode", "write", "c1:1:write", "2"), []string{u + "k", u + "k-ch", u + "k-latch"}, []string{"30000", "c1:1", "10000", "publish", "2"}, []int{0, 2}, []string{"lease_ms", "latch_ms"}, field(u+"k", "c1:1:write", "1", 60_000_000_000)},
			{generated.SemaphoreAcquireScript, count(u+"l", "5"), []string{u + "l", u + "l-req", u + "l-claim"}, []string{"2", "10000", "", "0"}, []int{0, 1}, []string{"permits", "latch_ms"}, both(str(u+"l", "3", -1), str(u+"l-req", "1", 10_000))},
			{generated.SemaphoreReleaseScript, count(u+"m", "5"), []string{u + "m", u + "m-ch", u + "m-req"}, []string{"2", "10000", "publish"}, []int{0, 1}, []string{"permits", "latch_ms"}, both(str(u+"m", "7", -1), str(u+"m-req", "7", 10_000))},
		} {
			if c.setup != nil {
				c.setup()
			}
			before := tagState(t, rdb, u)
			for i, p := range c.pos {
				for _, v := range bad {
					args := slices.Clone(c.args)
					args[p] = v
					err := rdb.Eval(ctx, c.script.Source, c.keys, strArgs(args)...).Err()
					want := c.names[i] + " must be a positive integer"
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("%s with %s %q: %v, want an error with %q", c.script.Name, c.names[i], v, err, want)
					}
					if got := tagState(t, rdb, u); !slices.Equal(got, before) {
						t.Fatalf("%s with %s %q changed the keys:\n%q\nwere\n%q", c.script.Name, c.names[i], v, got, before)
					}
				}
			}
			// The canonical values: the call writes.
			if err := rdb.Eval(ctx, c.script.Source, c.keys, strArgs(c.args)...).Err(); err != nil && err != redis.Nil {
				t.Fatalf("%s: %v", c.script.Name, err)
			}
			if got := tagState(t, rdb, u); slices.Equal(got, before) {
				t.Fatalf("%s changed nothing with its canonical arguments: the refusals prove nothing", c.script.Name)
			}
			c.after()
		}
		// The largest value taken: 10^15 - 1 ms, as PEXPIRE sets it
		// (miniredis keeps a TTL as a Duration, which overflows there).
		if b.Mini() {
			return
		}
		big := u + "big"
		if err := rdb.Eval(ctx, generated.LockAcquireScript.Source, []string{big}, "999999999999999", "c1:1", "1").Err(); err != nil {
			t.Fatalf("lock_acquire with lease_ms 999999999999999: %v", err)
		}
		if ms, err := rdb.Do(ctx, "pttl", big).Int64(); err != nil || ms < 999_999_000_000_000 {
			t.Fatalf("PTTL after a lease of 999999999999999 ms = %d, %v", ms, err)
		}
	})
}

func strArgs(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}

// tagState lists every key whose name contains tag, each with its type,
// its value and its TTL in whole hours, sorted: two calls return equal
// slices when nothing under the tag was written in between.
func tagState(t *testing.T, rdb redis.UniversalClient, tag string) []string {
	t.Helper()
	ctx := context.Background()
	pattern := "*" + strings.NewReplacer("{", `\{`, "}", `\}`).Replace(tag) + "*"
	var names []string
	var mu sync.Mutex
	masters(t, rdb, func(c redis.Cmdable) error {
		ks, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		names = append(names, ks...)
		mu.Unlock()
		return err
	})
	var out []string
	for _, k := range names {
		typ := rdb.Type(ctx, k).Val()
		var v any
		switch typ {
		case "string":
			v = rdb.Get(ctx, k).Val()
		case "hash":
			v = rdb.HGetAll(ctx, k).Val()
		case "list":
			v = rdb.LRange(ctx, k, 0, -1).Val()
		case "zset":
			v = rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
		}
		pttl, _ := rdb.Do(ctx, "pttl", k).Int64() // ms: a Duration overflows past 292 years
		out = append(out, fmt.Sprintf("%s %s %v ttl:%dh", k, typ, v, pttl/3_600_000))
	}
	slices.Sort(out)
	return out
}
