package scripts_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// Script cache: NOSCRIPT recovery, LoadAll, pipelines

func TestNoScriptRecovery(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLockKeys(backends.UniqueName(t))

		flush(t, rdb)
		wantCached(t, rdb, false, generated.LockAcquireSHA1, generated.LockStatusSHA1)

		rec := &backends.Recorder{Scripter: rdb}
		wantZero(t, "acquire after SCRIPT FLUSH")(acquire(rec, l, "c1:1", 1, leaseMS))
		backends.WantHash(t, rdb, l.name, map[string]string{"c1:1": "1"})
		// EVALSHA (NOSCRIPT), SCRIPT LOAD, EVALSHA; the source never goes
		// out with EVAL.
		wantCalls(t, rec, map[string]int{"evalsha": 2, "script load": 1})
		wantCached(t, rdb, true, generated.LockAcquireSHA1) // on every master
		wantCached(t, rdb, false, generated.LockStatusSHA1)

		// The same for a read-only script, with EVALSHA_RO.
		rec = &backends.Recorder{Scripter: rdb}
		got, err := generated.LockStatus(ctx, rec, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"})
		if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 1 {
			t.Fatalf("status after SCRIPT FLUSH = %v, %v; want [1 1 pttl]", got, err)
		}
		wantCalls(t, rec, map[string]int{"evalsha_ro": 2, "script load": 1})
		wantCached(t, rdb, true, generated.LockStatusSHA1)

		// Loaded now: a single EVALSHA.
		rec = &backends.Recorder{Scripter: rdb}
		if got := wantInt(t, "release")(release(rec, l, "c1:1", "req-1", leaseMS, "publish")); got != 1 {
			t.Fatalf("release = %d, want 1", got)
		}
		rec2 := &backends.Recorder{Scripter: rdb}
		wantZero(t, "acquire again")(acquire(rec2, l, "c1:1", 1, leaseMS))
		wantCalls(t, rec2, map[string]int{"evalsha": 1})
		if err := rdb.Del(ctx, l.name).Err(); err != nil {
			t.Fatal(err)
		}
		wantNoKeysLeft(t, rdb, l.name)
	})
}

func TestLoadAll(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		flush(t, rdb)
		wantCached(t, rdb, false, allSHAs()...)

		rec := &backends.Recorder{Scripter: rdb}
		if err := generated.LoadAll(ctx, rec); err != nil {
			t.Fatalf("LoadAll: %v", err)
		}
		wantCalls(t, rec, map[string]int{"script load": len(generated.Scripts)})
		wantCached(t, rdb, true, allSHAs()...) // every script on every master

		// Loading again is harmless.
		if err := generated.LoadAll(ctx, rdb); err != nil {
			t.Fatalf("LoadAll again: %v", err)
		}

		// Load checks the SHA1 Redis reports against the generated one.
		bad := *generated.LockStatusScript
		bad.Name = "lock_status_tampered"
		bad.SHA1 = strings.Repeat("0", 40)
		err := bad.Load(ctx, rdb)
		wantScriptErr(t, "load with a wrong SHA1", err, "lock_status_tampered", "want "+bad.SHA1)
	})
}

// TestRing: the wrappers on a redis.Ring of two servers. A Ring sends
// SCRIPT LOAD to one shard and EVALSHA to the shard of the first key, so
// NOSCRIPT recovery and LoadAll must load on every shard.
func TestRing(t *testing.T) {
	ctx := context.Background()
	a, b := harness.StartStandalone(t), harness.StartStandalone(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	shards := []*redis.Client{a.Client(), b.Client()}
	for _, c := range shards {
		t.Cleanup(func() { _ = c.Close() })
	}
	onShard := func(sha string) []bool {
		var got []bool
		for _, c := range shards {
			ok, err := c.ScriptExists(ctx, sha).Result()
			if err != nil {
				t.Fatalf("SCRIPT EXISTS: %v", err)
			}
			got = append(got, ok[0])
		}
		return got
	}

	// NOSCRIPT recovery, with keys on both shards.
	used := map[string]bool{}
	for i := range 20 {
		name := fmt.Sprintf("ring-%d", i)
		wait, err := generated.LockAcquire(ctx, ring, generated.LockAcquireKeys{Lock: name},
			generated.LockAcquireArgs{LeaseMS: 10_000, Field: "c:1", Holds: 1})
		if err != nil || wait != 0 {
			t.Fatalf("LockAcquire %s on a Ring = %d, %v; want 0", name, wait, err)
		}
		for j, c := range shards {
			if c.Exists(ctx, name).Val() == 1 {
				used[fmt.Sprint(j)] = true
			}
		}
	}
	if len(used) != 2 {
		t.Fatalf("the 20 locks landed on shards %v, want both", used)
	}
	if got := onShard(generated.LockAcquireSHA1); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("lock_acquire cached on shards %v after NOSCRIPT recovery, want both", got)
	}

	for _, c := range shards {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	}
	if err := generated.LoadAll(ctx, ring); err != nil {
		t.Fatalf("LoadAll on a Ring: %v", err)
	}
	for _, sc := range generated.Scripts {
		if got := onShard(sc.SHA1); !slices.Equal(got, []bool{true, true}) {
			t.Errorf("%s cached on shards %v after LoadAll, want both", sc.Name, got)
		}
	}
}

func TestPipeline(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend, rdb redis.UniversalClient) {
		ctx := context.Background()
		if err := generated.LoadAll(ctx, rdb); err != nil {
			t.Fatalf("LoadAll: %v", err)
		}

		type pipeFunc func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error)
		for _, p := range []struct {
			name string
			run  pipeFunc
		}{
			{"Pipelined", rdb.Pipelined},
			// MULTI/EXEC; on the cluster all keys of one lock share a slot.
			{"TxPipelined", rdb.TxPipelined},
		} {
			t.Run(p.name, func(t *testing.T) {
				l := newLockKeys(backends.UniqueName(t))
				var acq1, acq2, acq3, status, renew, rel1, rel2, force *redis.Cmd
				_, err := p.run(ctx, func(pipe redis.Pipeliner) error {
					acq1 = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", Holds: 1})
					acq2 = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c2:1", Holds: 1})
					acq3 = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", Holds: 2})
					status = generated.LockStatusCmd(ctx, pipe, generated.LockStatusKeys{Lock: l.name}, generated.LockStatusArgs{Field: "c1:1"})
					renew = generated.LockRenewCmd(ctx, pipe, generated.LockRenewKeys{Locks: []string{l.name}}, generated.LockRenewArgs{LeaseMS: leaseMS, Fields: []string{"c1:1"}})
					rel1 = generated.LockReleaseCmd(ctx, pipe, l.releaseKeys("req-1"), generated.LockReleaseArgs{LeaseMS: leaseMS, Field: "c1:1", LatchMS: latchMS, Publish: "publish"})
					rel2 = generated.LockReleaseCmd(ctx, pipe, l.releaseKeys("req-2"), generated.LockReleaseArgs{LeaseMS: leaseMS, Field: "c1:1", LatchMS: latchMS, Publish: "publish"})
					force = generated.LockForceReleaseCmd(ctx, pipe, l.forceKeys(), generated.LockForceReleaseArgs{LatchMS: latchMS, Publish: "publish"})
					return nil
				})
				// Exec reports the first failed command, and go-redis counts a
				// nil reply (Lua false, here force release's) as redis.Nil.
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Fatalf("%s: %v", p.name, err)
				}
				wantZero(t, "acquire")(generated.LockAcquireResult(acq1))
				if got := wantOK(t, "other owner")(generated.LockAcquireResult(acq2)); got <= 0 || got > leaseMS {
					t.Fatalf("other owner = %d, want the PTTL", got)
				}
				wantZero(t, "re-enter")(generated.LockAcquireResult(acq3))
				st, err := generated.LockStatusResult(status)
				if err != nil || len(st) != 3 || st[0] != 1 || st[1] != 2 || st[2] <= 0 {
					t.Fatalf("status = %v, %v; want [1 2 pttl]", st, err)
				}
				rn, err := generated.LockRenewResult(renew)
				if err != nil || !slices.Equal(rn, []int64{1}) {
					t.Fatalf("renew = %v, %v; want [1]", rn, err)
				}
				if got := wantInt(t, "partial release")(generated.LockReleaseResult(rel1)); got != 0 {
					t.Fatalf("partial release = %d, want 0", got)
				}
				if got := wantInt(t, "full release")(generated.LockReleaseResult(rel2)); got != 1 {
					t.Fatalf("full release = %d, want 1", got)
				}
				if ok, err := generated.LockForceReleaseResult(force); err != nil || ok {
					t.Fatalf("force release = %v, %v; want false", ok, err)
				}
				wantNoKeysLeft(t, rdb, l.name)

				// The fair scripts in a pipeline.
				f := newLockKeys(backends.UniqueName(t) + "-fair")
				var fa1, fa2, fl2, fr1, ff *redis.Cmd
				_, err = p.run(ctx, func(pipe redis.Pipeliner) error {
					fa1 = generated.FairAcquireCmd(ctx, pipe, f.fairKeys(), generated.FairAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", WaitMS: waitMS, Holds: 1, Publish: "publish"})
					fa2 = generated.FairAcquireCmd(ctx, pipe, f.fairKeys(), generated.FairAcquireArgs{LeaseMS: leaseMS, Field: "c2:1", WaitMS: waitMS, Holds: 1, Publish: "publish"})
					fl2 = generated.FairLeaveCmd(ctx, pipe, generated.FairLeaveKeys(f.fairKeys()), generated.FairLeaveArgs{Field: "c2:1", WaitMS: waitMS, Publish: "publish"})
					fr1 = generated.FairReleaseCmd(ctx, pipe, f.fairReleaseKeys("req-1"), generated.FairReleaseArgs{LeaseMS: leaseMS, Field: "c1:1", LatchMS: latchMS, WaitMS: waitMS, Publish: "publish"})
					ff = generated.FairForceReleaseCmd(ctx, pipe, f.fairForceKeys(), generated.FairForceReleaseArgs{LatchMS: latchMS, WaitMS: waitMS, Publish: "publish"})
					return nil
				})
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Fatalf("%s (fair): %v", p.name, err)
				}
				wantZero(t, "fair acquire")(generated.FairAcquireResult(fa1))
				if got := wantOK(t, "fair queue")(generated.FairAcquireResult(fa2)); got <= 0 {
					t.Fatalf("fair queue = %d, want > 0", got)
				}
				if ok, err := generated.FairLeaveResult(fl2); err != nil || !ok {
					t.Fatalf("fair leave = %v, %v; want true", ok, err)
				}
				if got := wantInt(t, "fair release")(generated.FairReleaseResult(fr1)); got != 1 {
					t.Fatalf("fair release = %d, want 1", got)
				}
				if ok, err := generated.FairForceReleaseResult(ff); err != nil || ok {
					t.Fatalf("fair force release = %v, %v; want false", ok, err)
				}
				wantNoKeysLeft(t, rdb, f.name)
			})
		}

		// Why LoadAll exists: a pipeline cannot recover from NOSCRIPT, since
		// XCmd only queues one EVALSHA.
		t.Run("NoScriptWithoutLoadAll", func(t *testing.T) {
			l := newLockKeys(backends.UniqueName(t))
			flush(t, rdb)
			var acq *redis.Cmd
			_, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				acq = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", Holds: 1})
				return nil
			})
			if !redis.HasErrorPrefix(err, "NOSCRIPT") {
				t.Fatalf("pipeline after SCRIPT FLUSH: %v, want NOSCRIPT", err)
			}
			_, err = generated.LockAcquireResult(acq)
			wantScriptErr(t, "result after SCRIPT FLUSH", err, "lock_acquire", "NOSCRIPT")
			if !redis.HasErrorPrefix(err, "NOSCRIPT") {
				t.Fatalf("result: %v does not start with NOSCRIPT", err)
			}
			backends.WantGone(t, rdb, l.name)
			wantCached(t, rdb, false, generated.LockAcquireSHA1) // nothing loaded it

			if err := generated.LoadAll(ctx, rdb); err != nil {
				t.Fatalf("LoadAll: %v", err)
			}
			_, err = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				acq = generated.LockAcquireCmd(ctx, pipe, l.acquireKeys(), generated.LockAcquireArgs{LeaseMS: leaseMS, Field: "c1:1", Holds: 1})
				return nil
			})
			if err != nil {
				t.Fatalf("pipeline after LoadAll: %v", err)
			}
			wantZero(t, "acquire after LoadAll")(generated.LockAcquireResult(acq))
			if err := rdb.Del(ctx, l.name).Err(); err != nil {
				t.Fatal(err)
			}
		})
	})
}
