package lualockrueidis_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/extra/lualockrueidis"
)

// TestScripter_repliesAsGoRedis runs the same scripts through go-redis and
// through the Scripter and compares what each returns: the value with its
// Go types, whether the error is a redis.Error, and its text.
func TestScripter_repliesAsGoRedis(t *testing.T) {
	onEach(t, func(t *testing.T, d deployment) {
		ctx := t.Context()
		s := lualockrueidis.Scripter(d.rc)
		key := uniqueName(t)
		for _, c := range []struct {
			name, script string
			args         []any
		}{
			{"integer", "return 42", nil},
			{"bulk string", "return 'hello'", nil},
			{"status", "return redis.status_reply('OK')", nil},
			{"nil", "return nil", nil},
			{"false", "return false", nil},
			{"true", "return true", nil},
			{"number truncated", "return 3.7", nil},
			{"nested array", "return {1, 'two', {3, 'four'}, {}}", nil},
			{"array with an error", "return {1, redis.error_reply('BAD thing')}", nil},
			{"error reply", "return redis.error_reply('WRONGTYPE not a lock')", nil},
			{"error reply with ERR", "return redis.error_reply('ERR plain')", nil},
			{"runtime error", "error('boom')", nil},
			{"redis error inside", "redis.call('SET', KEYS[1], 'x'); return redis.call('HGET', KEYS[1], 'f')", nil},
			{"resp3 map", "redis.setresp(3); return {map={a=1, b='x'}}", nil},
			{"resp3 double", "redis.setresp(3); return {double=3.5}", nil},
			{"resp3 true", "redis.setresp(3); return true", nil},
			{"resp3 false", "redis.setresp(3); return false", nil},
			{"resp3 big number", "redis.setresp(3); return {big_number='123456789012345678901234567890'}", nil},
			{"arguments", "return ARGV", []any{"s", []byte("b"), 7, int64(-8), uint64(9), 1.5, float32(0.25), true, false, 1500 * time.Millisecond, time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), nil}},
			{"one slice argument", "return ARGV", []any{[]string{"a", "b"}}},
			{"one []any argument", "return ARGV", []any{[]any{"a", 2}}},
			{"key", "return KEYS[1]", nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				want, wantErr := d.rdb.Eval(ctx, c.script, []string{key}, c.args...).Result()
				got, gotErr := s.Eval(ctx, c.script, []string{key}, c.args...).Result()
				sameReply(t, got, gotErr, want, wantErr)
				// The same through EVALSHA, once the script is loaded.
				sha, err := s.ScriptLoad(ctx, c.script).Result()
				if err != nil {
					t.Fatalf("ScriptLoad: %v", err)
				}
				got, gotErr = s.EvalSha(ctx, sha, []string{key}, c.args...).Result()
				sameReply(t, got, gotErr, want, wantErr)
			})
		}
		// Read-only scripts, and an unknown SHA1: NOSCRIPT, as go-redis's
		// Eval family returns it.
		ro := "return redis.call('EXISTS', KEYS[1])"
		want, wantErr := d.rdb.EvalRO(ctx, ro, []string{key}).Result()
		got, gotErr := s.EvalRO(ctx, ro, []string{key}).Result()
		sameReply(t, got, gotErr, want, wantErr)
		sha, err := s.ScriptLoad(ctx, ro).Result()
		if err != nil {
			t.Fatalf("ScriptLoad: %v", err)
		}
		want, wantErr = d.rdb.EvalShaRO(ctx, sha, []string{key}).Result()
		got, gotErr = s.EvalShaRO(ctx, sha, []string{key}).Result()
		sameReply(t, got, gotErr, want, wantErr)
		unknown := "0000000000000000000000000000000000000000"
		want, wantErr = d.rdb.EvalSha(ctx, unknown, []string{key}).Result()
		got, gotErr = s.EvalSha(ctx, unknown, []string{key}).Result()
		sameReply(t, got, gotErr, want, wantErr)
		if !redis.HasErrorPrefix(gotErr, "NOSCRIPT") {
			t.Errorf("EvalSha of an unknown script: %v, want NOSCRIPT", gotErr)
		}
		if err := d.rdb.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	})
}

// sameReply fails unless the Scripter's reply is go-redis's.
func sameReply(t *testing.T, got any, gotErr error, want any, wantErr error) {
	t.Helper()
	if !reflect.DeepEqual(comparable(got), comparable(want)) {
		t.Errorf("value %#v, go-redis's %#v", got, want)
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("error %v, go-redis's %v", gotErr, wantErr)
	}
	if gotErr == nil {
		return
	}
	if gotErr.Error() != wantErr.Error() {
		t.Errorf("error text %q, go-redis's %q", gotErr, wantErr)
	}
	var g, w redis.Error
	if errors.As(gotErr, &g) != errors.As(wantErr, &w) {
		t.Errorf("error %v is a redis.Error: %t, go-redis's: %t", gotErr, g != nil, w != nil)
	}
	if errors.Is(gotErr, redis.Nil) != errors.Is(wantErr, redis.Nil) {
		t.Errorf("error %v is redis.Nil: %t, go-redis's %v: %t", gotErr, errors.Is(gotErr, redis.Nil), wantErr, errors.Is(wantErr, redis.Nil))
	}
}

// replyErr is an error element of an array reply, to compare: go-redis's
// type for it is internal.
type replyErr struct {
	redis bool // a redis.Error
	text  string
}

// comparable returns v with its error elements as replyErr.
func comparable(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = comparable(e)
		}
		return out
	case error:
		var rerr redis.Error
		return replyErr{redis: errors.As(v, &rerr), text: v.Error()}
	}
	return v
}

// TestScripter_scriptCache: SCRIPT LOAD reaches every master of a cluster
// (each has a script cache of its own) and SCRIPT EXISTS answers for all.
func TestScripter_scriptCache(t *testing.T) {
	onEach(t, func(t *testing.T, d deployment) {
		ctx := t.Context()
		s := lualockrueidis.Scripter(d.rc)
		script := "return '" + uniqueName(t) + "'"
		sha, err := s.ScriptLoad(ctx, script).Result()
		if err != nil {
			t.Fatalf("ScriptLoad: %v", err)
		}
		if want := d.rdb.ScriptLoad(ctx, script).Val(); sha != want {
			t.Errorf("ScriptLoad = %s, go-redis's %s", sha, want)
		}
		exists, err := s.ScriptExists(ctx, sha, "0000000000000000000000000000000000000000").Result()
		if err != nil || !reflect.DeepEqual(exists, []bool{true, false}) {
			t.Errorf("ScriptExists = %v, %v; want [true false]", exists, err)
		}
		// Each master has it: go-redis's ScriptExists on a cluster asks
		// every shard.
		if ok, err := d.rdb.ScriptExists(ctx, sha).Result(); err != nil || !ok[0] {
			t.Errorf("go-redis ScriptExists after the Scripter's load = %v, %v", ok, err)
		}
	})
}

// TestScripter_crossSlot: on a cluster, keys of different slots get Redis's
// CROSSSLOT error (a redis.Error), as with go-redis, not rueidis's panic.
func TestScripter_crossSlot(t *testing.T) {
	onEach(t, func(t *testing.T, d deployment) {
		if d.name != "cluster" {
			t.Skip("slots are a cluster's")
		}
		ctx := t.Context()
		keys := []string{"lualockrueidis_a", "lualockrueidis_b"} // two slots
		_, err := lualockrueidis.Scripter(d.rc).Eval(ctx, "return 1", keys).Result()
		_, want := d.rdb.Eval(ctx, "return 1", keys).Result()
		if !redis.HasErrorPrefix(err, "CROSSSLOT") || !redis.HasErrorPrefix(want, "CROSSSLOT") {
			t.Errorf("Eval on keys of two slots = %v (go-redis: %v), want CROSSSLOT from both", err, want)
		}
	})
}

// TestScripter_badInput: a nil client, and an argument go-redis cannot
// write, fail with an error and send nothing.
func TestScripter_badInput(t *testing.T) {
	ctx := context.Background()
	s := lualockrueidis.Scripter(nil)
	if err := s.EvalSha(ctx, "x", nil).Err(); err == nil {
		t.Error("EvalSha on a nil client: no error")
	}
	if err := s.ScriptLoad(ctx, "return 1").Err(); err == nil {
		t.Error("ScriptLoad on a nil client: no error")
	}
	if err := s.ScriptExists(ctx, "x").Err(); err == nil {
		t.Error("ScriptExists on a nil client: no error")
	}
	onEach(t, func(t *testing.T, d deployment) {
		c := &counting{Client: d.rc}
		err := lualockrueidis.Scripter(c).Eval(ctx, "return 1", nil, struct{}{}, 1).Err()
		want := d.rdb.Eval(ctx, "return 1", nil, struct{}{}, 1).Err()
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("Eval with a struct argument = %v, go-redis's %v", err, want)
		}
		if n := c.count("eval"); n != 0 {
			t.Errorf("%d EVAL sent for a bad argument, want 0", n)
		}
	})
}
