package e2e

// This file is compiled with the package that luagen generates from
// testdata/e2e_functions/lua with Config.Library "e2e" (see
// TestFunctionsEndToEnd): every script is a function of one Redis
// Functions library. It runs against the redis-server of
// LUAGEN_E2E_ADDR.

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/luart"
)

// TestLibrary calls the typed wrappers: the first call finds no function,
// loads the library (FUNCTION LOAD REPLACE) and runs it; the read-only
// script runs with FCALL_RO; after FUNCTION FLUSH the next call loads the
// library again; LoadAll loads it on demand.
func TestLibrary(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("LUAGEN_E2E_ADDR")})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := Peek(ctx, c, PeekKeys{Counter: "e2e:c"}); err != nil || v != nil {
		t.Fatalf("Peek before any write: %v, %v; want nil, nil", v, err)
	}
	if n, err := Incr(ctx, c, IncrKeys{Counter: "e2e:c"}, IncrArgs{By: 3}); err != nil || n != 3 {
		t.Fatalf("Incr: %d, %v", n, err)
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: LibraryName}).Result()
	if err != nil || len(libs) != 1 || len(libs[0].Functions) != 3 {
		t.Fatalf("FUNCTION LIST: %+v, %v", libs, err)
	}
	for _, f := range libs[0].Functions {
		ro := len(f.Flags) == 1 && f.Flags[0] == "no-writes"
		if ro != (f.Name == "peek") {
			t.Errorf("function %s has flags %v", f.Name, f.Flags)
		}
	}
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := Peek(ctx, c, PeekKeys{Counter: "e2e:c"}); err != nil || v == nil || *v != 3 {
		t.Fatalf("Peek after FUNCTION FLUSH: %v, %v; want 3", v, err)
	}
	if err := LoadAll(ctx, c); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
}

// TestKeyPrefix runs a script whose prefix arg is declared in
// keyPrefixArgs: a prefix with the keys' hash tag runs (the derived key is
// in their slot); one without a hash tag, or with another, fails with
// luart.ErrKeyPrefix and sends nothing.
func TestKeyPrefix(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("LUAGEN_E2E_ADDR")})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := Enqueue(ctx, c, EnqueueKeys{Queues: "{q}:queues"}, EnqueueArgs{Prefix: "{q}:", Job: "j1"}); err != nil || n != 1 {
		t.Fatalf("Enqueue with the keys' hash tag: %d, %v", n, err)
	}
	for _, prefix := range []string{"q:", "{other}:"} {
		_, err := Enqueue(ctx, c, EnqueueKeys{Queues: "{q}:queues"}, EnqueueArgs{Prefix: prefix, Job: "j2"})
		if !errors.Is(err, luart.ErrKeyPrefix) {
			t.Errorf("Enqueue with prefix %q: %v, want luart.ErrKeyPrefix", prefix, err)
		}
		if n, err := c.Exists(ctx, prefix+"wait").Result(); err != nil || n != 0 {
			t.Errorf("prefix %q: %swait exists (%d, %v): the script ran", prefix, prefix, n, err)
		}
	}
}
