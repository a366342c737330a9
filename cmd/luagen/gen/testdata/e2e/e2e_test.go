package e2e

// This test runs the package luagen generates from testdata/e2e/lua. gen's
// TestEndToEnd (gen/e2e_test.go) generates the package into a temporary
// folder of the module, adds this file, builds the test binary and runs it
// twice: against miniredis, and against a real redis-server whose address
// it passes in LUAGEN_E2E_ADDR.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/luart"
)

var keySeq atomic.Int64

// key returns a key no other test uses.
func key(t *testing.T) string {
	return fmt.Sprintf("luagen-e2e:%s:%d", t.Name(), keySeq.Add(1))
}

// client connects to the Redis of LUAGEN_E2E_ADDR, or to a new miniredis,
// with the script cache flushed, so the first call of each script meets
// NOSCRIPT.
func client(t *testing.T) *redis.Client {
	t.Helper()
	addr := os.Getenv("LUAGEN_E2E_ADDR")
	if addr == "" {
		addr = miniredis.RunT(t).Addr()
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	return c
}

// TestArgEncoding checks how each @arg type reaches Lua: go-redis writes a
// string as is, an int in decimal, a float in the shortest decimal form
// without exponent (strconv 'f', -1), a bool as "1" or "0", and bytes as
// they are.
func TestArgEncoding(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	for _, tt := range []struct {
		args EchoArgsArgs
		want []string
	}{
		{EchoArgsArgs{Text: "héllo", Count: -42, Ratio: 1.5, On: true, Raw: []byte{0, 0xff, 'a', '\r', '\n'}},
			[]string{"héllo", "-42", "1.5", "1", "\x00\xffa\r\n", "3.000000"}},
		{EchoArgsArgs{Text: "", Count: 9007199254740993, Ratio: 1e15, On: false, Raw: nil},
			[]string{"", "9007199254740993", "1000000000000000", "0", "", "2000000000000000.000000"}},
		{EchoArgsArgs{Text: " x ", Count: 0, Ratio: -0.000001, On: false, Raw: []byte("x")},
			[]string{" x ", "0", "-0.000001", "0", "x", "-0.000002"}},
		{EchoArgsArgs{Count: 1, Ratio: 0.1},
			[]string{"", "1", "0.1", "0", "", "0.200000"}},
	} {
		got, err := EchoArgs(ctx, c, EchoArgsKeys{}, tt.args)
		if err != nil {
			t.Fatalf("EchoArgs(%+v): %v", tt.args, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("EchoArgs(%+v) = %q, want %q", tt.args, got, tt.want)
		}
	}
	for _, on := range []bool{true, false} {
		if got, err := EchoBool(ctx, c, EchoBoolKeys{}, EchoBoolArgs{On: on}); got != on || err != nil {
			t.Errorf("EchoBool(%v) = %v, %v", on, got, err)
		}
	}
}

// TestReturnTypes checks the conversion of string, string?, status, any and
// []string? replies.
func TestReturnTypes(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	k := key(t)

	if got, err := SetGet(ctx, c, SetGetKeys{Key: k}, SetGetArgs{Value: []byte("v\x00w")}); got != "v\x00w" || err != nil {
		t.Errorf("SetGet = %q, %v", got, err)
	}
	if got, err := GetNullable(ctx, c, GetNullableKeys{Key: k}); got == nil || *got != "v\x00w" || err != nil {
		t.Errorf("GetNullable(set) = %v, %v", got, err)
	}
	if got, err := GetNullable(ctx, c, GetNullableKeys{Key: k + ":missing"}); got != nil || err != nil {
		t.Errorf("GetNullable(missing) = %v, %v; want nil, nil", got, err)
	}
	if got, err := SetStatus(ctx, c, SetStatusKeys{Key: k}, SetStatusArgs{Value: "x"}); got != "OK" || err != nil {
		t.Errorf("SetStatus = %q, %v", got, err)
	}
	if got, err := SetStatus(ctx, c, SetStatusKeys{Key: k}, SetStatusArgs{Value: ""}); got != "EMPTY" || err != nil {
		t.Errorf("SetStatus(empty) = %q, %v", got, err)
	}

	for _, tt := range []struct {
		shape string
		want  any
	}{
		{"nil", nil},
		{"false", nil},
		{"int", int64(7)},
		{"string", "seven"},
		{"status", "FINE"},
		{"array", []any{int64(1), "two", []any{int64(3)}}},
	} {
		got, err := ReplyAny(ctx, c, ReplyAnyKeys{}, ReplyAnyArgs{Shape: tt.shape})
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ReplyAny(%s) = %#v, %v; want %#v", tt.shape, got, err, tt.want)
		}
	}
	_, err := ReplyAny(ctx, c, ReplyAnyKeys{}, ReplyAnyArgs{Shape: "bogus"})
	var se *luart.Error
	if !errors.As(err, &se) || se.Script != "reply_any" || !strings.Contains(err.Error(), "ERR unknown shape bogus") {
		t.Errorf("ReplyAny(bogus): %v, want a *luart.Error of reply_any with Redis's error", err)
	}

	if err := c.Set(ctx, k+":2", "second", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := HelperKey(ctx, c, HelperKeyKeys{First: k + ":missing", Second: k + ":2"})
	if err != nil || len(got) != 2 || got[0] != nil || got[1] == nil || *got[1] != "second" {
		t.Errorf("HelperKey = %v, %v; want [nil second]", got, err)
	}
}

// TestPipeline checks that the run functions refuse a pipeline instead of
// returning a zero value with no error, and that the Cmd and Result pair
// works in one after LoadAll.
func TestPipeline(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	k := key(t)

	for name, p := range map[string]redis.Pipeliner{"Pipeline": c.Pipeline(), "TxPipeline": c.TxPipeline()} {
		got, err := SetStatus(ctx, p, SetStatusKeys{Key: k}, SetStatusArgs{Value: "x"})
		// A pipeline under a retry policy is still a pipeline.
		if _, err := SetStatus(ctx, luart.WithRetry(p, luart.Retry{Attempts: 1}), SetStatusKeys{Key: k}, SetStatusArgs{Value: "x"}); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s under WithRetry: SetStatus = %v, want an error wrapping ErrPipeline", name, err)
		}
		if !errors.Is(err, luart.ErrPipeline) || got != "" {
			t.Errorf("%s: SetStatus = %q, %v; want an error wrapping luart.ErrPipeline", name, got, err)
		}
		if want := "lua script set_status: " + luart.ErrPipeline.Error(); err == nil || err.Error() != want {
			t.Errorf("%s: error %q, want %q", name, err, want)
		}
		if _, err := SetStatusScript.Run(ctx, p, []string{k}, "x"); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: Script.Run: %v, want luart.ErrPipeline", name, err)
		}
		if err := SetStatusScript.Load(ctx, p); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: Script.Load: %v, want luart.ErrPipeline", name, err)
		}
		if err := LoadAll(ctx, p); !errors.Is(err, luart.ErrPipeline) {
			t.Errorf("%s: LoadAll: %v, want luart.ErrPipeline", name, err)
		}
		if n := p.Len(); n != 0 {
			t.Errorf("%s: %d commands queued, want none", name, n)
		}
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		_, err := GetNullable(ctx, p, GetNullableKeys{Key: k})
		return err
	})
	if !errors.Is(err, luart.ErrPipeline) {
		t.Errorf("GetNullable in Pipelined: %v, want luart.ErrPipeline", err)
	}
	if n, err := c.Exists(ctx, k).Result(); n != 0 || err != nil {
		t.Errorf("EXISTS %s = %d, %v: a refused call wrote", k, n, err)
	}

	// The supported way: LoadAll on the client, then Cmd and Result.
	if err := LoadAll(ctx, c); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	p := c.Pipeline()
	set := SetStatusCmd(ctx, p, SetStatusKeys{Key: k}, SetStatusArgs{Value: "v"})
	get := GetNullableCmd(ctx, p, GetNullableKeys{Key: k})
	missing := GetNullableCmd(ctx, p, GetNullableKeys{Key: k + ":missing"})
	echo := EchoArgsCmd(ctx, p, EchoArgsKeys{}, EchoArgsArgs{Ratio: 2.5, On: true})
	if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
		t.Fatalf("Exec: %v", err)
	}
	if got, err := SetStatusResult(set); got != "OK" || err != nil {
		t.Errorf("SetStatusResult = %q, %v", got, err)
	}
	if got, err := GetNullableResult(get); got == nil || *got != "v" || err != nil {
		t.Errorf("GetNullableResult = %v, %v", got, err)
	}
	if got, err := GetNullableResult(missing); got != nil || err != nil {
		t.Errorf("GetNullableResult(missing) = %v, %v", got, err)
	}
	if got, err := EchoArgsResult(echo); err != nil || len(got) != 6 || got[2] != "2.5" || got[3] != "1" {
		t.Errorf("EchoArgsResult = %q, %v", got, err)
	}
}

// failingLoad is a client whose SCRIPT LOAD fails.
type failingLoad struct{ redis.Scripter }

func (failingLoad) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, "script", "load")
	cmd.SetErr(errors.New("load refused"))
	return cmd
}

// TestLoadErrorNamesScriptOnce: a failed SCRIPT LOAD after NOSCRIPT names
// the script once, whether it comes through a wrapper, Script.Run or Load.
func TestLoadErrorNamesScriptOnce(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	f := failingLoad{c}
	want := "lua script set_status: script load: load refused"
	_, err := SetStatus(ctx, f, SetStatusKeys{Key: key(t)}, SetStatusArgs{Value: "x"})
	if err == nil || err.Error() != want {
		t.Errorf("SetStatus: %v, want %q", err, want)
	}
	var se *luart.Error
	if !errors.As(err, &se) || errors.As(se.Err, new(*luart.Error)) {
		t.Errorf("SetStatus: %#v, want one *luart.Error", err)
	}
	if _, err := SetStatusScript.Run(ctx, f, []string{key(t)}, "x"); err == nil || err.Error() != want {
		t.Errorf("Script.Run: %v, want %q", err, want)
	}
	if err := SetStatusScript.Load(ctx, f); err == nil || err.Error() != want {
		t.Errorf("Script.Load: %v, want %q", err, want)
	}
}
