package lualock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/harness"
)

// echoScript returns what it was given, and the reply kinds the scripts
// use: integers, strings, nil, nested arrays, an error reply.
const echoScript = `
if ARGV[1] == 'fail' then return redis.error_reply('LOST the lock') end
if ARGV[1] == 'nil' then return nil end
if ARGV[1] == 'bool' then return {true, false} end
return {#KEYS, KEYS, ARGV, 7, {'nested', 8}}`

// hookLog records the commands a redis client's hooks see.
type hookLog struct {
	mu   sync.Mutex
	cmds []string
}

func (h *hookLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hookLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		h.cmds = append(h.cmds, fmt.Sprint(cmd.Args()))
		h.mu.Unlock()
		return err
	}
}

func (h *hookLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *hookLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.cmds
	h.cmds = nil
	return out
}

// TestPipeScripter_sameAsGoRedis checks that a script call on the pipe
// gives what go-redis gives for it, reply and error, in RESP2 and RESP3,
// for each kind of argument the scripts pass and the spread forms; that
// a call with an argument the pipe does not write goes through go-redis;
// and that a hook added before New sees each call once.
func TestPipeScripter_sameAsGoRedis(t *testing.T) {
	srv := harness.StartStandalone(t)
	ctx := t.Context()
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("resp", proto), func(t *testing.T) {
			rdb := srv.Client(func(o *redis.Options) { o.Protocol = proto })
			defer rdb.Close()
			log := &hookLog{}
			rdb.AddHook(log)
			s := newPipeScripter(rdb, 50*time.Microsecond)
			defer s.close()
			sha, err := rdb.ScriptLoad(ctx, echoScript).Result()
			if err != nil {
				t.Fatal(err)
			}
			log.take() // the handshake's and the load's
			keys := []string{"{k}1", "{k}2"}
			calls := [][]any{
				{"x", 30000, int64(-5), int32(7), uint(8), uint64(9), uint32(10), true, false, 1.5, []byte("raw")},
				{[]string{"spread", "strings"}},
				{[]any{"spread", 1}},
				{nil},
				{},
				{"fail"},
				{"nil"},
				{"bool"},
				{"dur", 1500 * time.Millisecond}, // not written by the pipe: go-redis's path
			}
			for _, args := range calls {
				for _, ro := range []bool{false, true} {
					got := evalSha(ctx, s, ro, sha, keys, args)
					want := evalSha(ctx, rdb, ro, sha, keys, args)
					gv, gerr := got.Result()
					wv, werr := want.Result()
					if !reflect.DeepEqual(gv, wv) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
						t.Errorf("%v (ro %v): pipe %#v, %v; go-redis %#v, %v", args, ro, gv, gerr, wv, werr)
					}
					if errors.Is(werr, redis.Nil) != errors.Is(gerr, redis.Nil) {
						t.Errorf("%v: redis.Nil %v, want %v", args, errors.Is(gerr, redis.Nil), errors.Is(werr, redis.Nil))
					}
					if werr != nil && !errors.Is(werr, redis.Nil) && (!isRedisError(gerr) || !redis.HasErrorPrefix(gerr, "LOST")) {
						t.Errorf("%v: error %v is not the redis.Error LOST", args, gerr)
					}
					seen := log.take()
					if len(seen) != 2 || seen[0] != seen[1] {
						t.Errorf("%v: the hook saw %q, want the same command twice", args, seen)
					}
				}
			}
			// NOSCRIPT is a redis.Error, as luart needs it to load the
			// script and send it again.
			err = s.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err()
			if !redis.HasErrorPrefix(err, "NOSCRIPT") {
				t.Errorf("unknown script: %v, want NOSCRIPT", err)
			}
			if n := harness.CommandCalls(t, rdb, "evalsha"); n < 2*int64(len(calls)) {
				t.Errorf("%d EVALSHA ran, want at least %d", n, 2*len(calls))
			}
		})
	}
}

// TestPipeScripter_hookPerClient checks that a hook added to rdb between
// two Clients' New sees the second's calls and not the first's, and that
// each Client's calls go on its own pipe.
func TestPipeScripter_hookPerClient(t *testing.T) {
	srv := harness.StartStandalone(t)
	ctx := t.Context()
	rdb := srv.Client()
	defer rdb.Close()
	a := newPipeScripter(rdb, 50*time.Microsecond)
	defer a.close()
	log := &hookLog{}
	rdb.AddHook(log)
	b := newPipeScripter(rdb, 50*time.Microsecond)
	defer b.close()
	sha, err := rdb.ScriptLoad(ctx, echoScript).Result()
	if err != nil {
		t.Fatal(err)
	}
	log.take()
	if err := a.EvalSha(ctx, sha, []string{"a"}, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.EvalSha(ctx, sha, []string{"b"}, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if seen := log.take(); len(seen) != 1 || !strings.Contains(seen[0], " b ") {
		t.Fatalf("the hook added between the two saw %q, want the second's call only", seen)
	}
	if a.p.Pending() != 0 || b.p.Pending() != 0 {
		t.Fatal("calls left pending")
	}
}

// TestPipeScripter_afterClose checks that a script call made after the
// Client's Close goes through rdb, as it did before the pipe, and that a
// call under way at Close ends with ErrClosed.
func TestPipeScripter_afterClose(t *testing.T) {
	srv := harness.StartStandalone(t)
	ctx := t.Context()
	rdb := srv.Client()
	defer rdb.Close()
	s := newPipeScripter(rdb, 50*time.Microsecond)
	echo, err := rdb.ScriptLoad(ctx, echoScript).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EvalSha(ctx, echo, []string{"k"}, "x").Err(); err != nil {
		t.Fatal(err) // the pipe's connection is up
	}
	// A call under way: the server is paused, so its reply does not come.
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- s.EvalSha(ctx, echo, []string{"k"}, "x").Err() }()
	for end := time.Now().Add(10 * time.Second); s.p.Pending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the call never went out")
		}
	}
	s.close()
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Fatalf("a call under way at Close: %v, want ErrClosed", err)
	}
	if err := s.EvalSha(ctx, echo, []string{"k"}, "x").Err(); err != nil {
		t.Fatalf("a call after Close: %v, want it sent through rdb", err)
	}
}
