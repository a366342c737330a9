package scripts

// The test of the consumer module that TestConsumerFloor builds: it runs
// the generated wrappers against the redis-server at LUAGEN_FLOOR_ADDR
// with the go-redis version the consumer pins.

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/lualock/lualock/luart"
	"github.com/redis/go-redis/v9"
)

func TestWrappers(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LUAGEN_FLOOR_ADDR")})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA again.
	if n, err := IncrBy(ctx, rdb, IncrByKeys{Counter: "c"}, IncrByArgs{By: 5}); n != 5 || err != nil {
		t.Fatalf("IncrBy = %d, %v", n, err)
	}
	if v, err := Peek(ctx, rdb, PeekKeys{Counter: "c"}); v == nil || *v != "5" || err != nil {
		t.Fatalf("Peek = %v, %v", v, err)
	}
	if v, err := Peek(ctx, rdb, PeekKeys{Counter: "none"}); v != nil || err != nil {
		t.Fatalf("Peek of a missing key = %v, %v", v, err)
	}
	if err := rdb.ZAdd(ctx, "sched", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 9, Member: "c"}).Err(); err != nil {
		t.Fatal(err)
	}
	moved, err := PopDue(ctx, rdb, PopDueKeys{Scheduled: "sched", Pending: "pending"}, PopDueArgs{Now: 5, Limit: 10})
	if err != nil || len(moved) != 2 || moved[0] != "a" || moved[1] != "b" {
		t.Fatalf("PopDue = %q, %v", moved, err)
	}
	// Pipelines: LoadAll, then Cmd and Result.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := LoadAll(ctx, rdb); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	pipe := rdb.Pipeline()
	cmd := IncrByCmd(ctx, pipe, IncrByKeys{Counter: "c"}, IncrByArgs{By: 2})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := IncrByResult(cmd); n != 7 || err != nil {
		t.Fatalf("IncrByResult = %d, %v", n, err)
	}
	// A script's error reply: a *luart.Error wrapping Redis's error.
	if err := rdb.Set(ctx, "s", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = IncrBy(ctx, rdb, IncrByKeys{Counter: "s"}, IncrByArgs{By: 1})
	var se *luart.Error
	if !errors.As(err, &se) || se.Script != "incr_by" {
		t.Fatalf("IncrBy on a string = %v, want a *luart.Error", err)
	}
	var re redis.Error
	if !errors.As(err, &re) {
		t.Fatalf("IncrBy on a string = %v, want a redis.Error inside", err)
	}
}
