package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lualock/lualock/internal/pipe"
	"github.com/lualock/lualock/tests/harness"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// server starts a redis-server of the test's own.
func server(t testing.TB) (*harness.Server, *redis.Client) {
	t.Helper()
	s := harness.StartStandalone(t)
	rdb := s.Client()
	t.Cleanup(func() { rdb.Close() })
	return s, rdb
}

// newPipe returns a pipe to addr, closed at the test's end. Its reads
// spin as lualock's do by default (50µs), so that the tests that make one
// call at a time run the spinning read too.
func newPipe(t testing.TB, addr string, edit func(*pipe.Config)) *pipe.Pipe {
	t.Helper()
	cfg := pipe.Config{
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		Name:         "pipe-test",
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
		Spin:         50 * time.Microsecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	p := pipe.New(cfg)
	t.Cleanup(p.Close)
	return p
}

// do sends args on p.
func do(ctx context.Context, p *pipe.Pipe, args ...string) (any, bool, error) {
	return p.Do(ctx, func(b []byte) []byte {
		b = pipe.AppendArrayLen(b, len(args))
		for _, a := range args {
			b = pipe.AppendString(b, a)
		}
		return b
	})
}

// mustDo is do, failing the test on a connection error.
func mustDo(t testing.TB, p *pipe.Pipe, args ...string) any {
	t.Helper()
	v, _, err := do(context.Background(), p, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// clientID is the id of the pipe's connection.
func clientID(t testing.TB, p *pipe.Pipe) int64 {
	t.Helper()
	id, ok := mustDo(t, p, "CLIENT", "ID").(int64)
	if !ok {
		t.Fatal("CLIENT ID: not an integer")
	}
	return id
}

// TestDo_replies checks that each kind of reply reads as go-redis reads
// it, in RESP2 and RESP3, on a connection set up with its database.
func TestDo_replies(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	script := `return {1, 'two', false, {3}, redis.error_reply('BAD thing'), true}`
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("resp", proto), func(t *testing.T) {
			p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.Protocol, c.DB = proto, 3 })
			other := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Protocol: proto, DB: 3})
			defer other.Close()
			if err := other.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			cases := [][]string{
				{"GET", "k"},       // a bulk string, in database 3
				{"GET", "missing"}, // null
				{"STRLEN", "k"},    // an integer
				{"PING"},           // a simple string
				{"INCR", "k"},      // an error reply
				{"HGETALL", "k"},   // an error reply: WRONGTYPE
				{"EVAL", script, "0"},
				{"EVAL", "return redis.status_reply('FINE')", "0"},
				{"EVAL", "return true", "0"},
				{"EVAL", "return false", "0"},
				{"EVAL", "return {}", "0"},
				{"CONFIG", "GET", "maxmemory"}, // a map in RESP3
			}
			for _, c := range cases {
				v, isNil, err := do(ctx, p, c...)
				if err != nil {
					t.Fatalf("%v: %v", c, err)
				}
				args := make([]any, len(c))
				for i, a := range c {
					args[i] = a
				}
				want, werr := other.Do(ctx, args...).Result()
				switch {
				case errors.Is(werr, redis.Nil):
					if !isNil {
						t.Errorf("%v: %#v, want nil", c, v)
					}
				case werr != nil:
					rerr, ok := v.(pipe.ReplyError)
					if !ok || rerr.Error() != werr.Error() {
						t.Errorf("%v: %#v, want the error %q", c, v, werr)
					}
					var re redis.Error
					if !errors.As(error(rerr), &re) {
						t.Errorf("%v: %q is not a redis.Error", c, rerr)
					}
				default:
					if isNil || !reflect.DeepEqual(norm(v), norm(want)) {
						t.Errorf("%v: %#v (nil %v), want %#v", c, v, isNil, want)
					}
				}
			}
		})
	}
}

// norm turns go-redis's error elements into their text, as the pipe's.
func norm(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = norm(e)
		}
		return out
	case error:
		return v.Error()
	}
	return v
}

// TestDo_auth checks HELLO's AUTH: the connection is the user's.
func TestDo_auth(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "alice", "on", ">secret", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []int{2, 3} {
		p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) {
			c.Protocol = proto
			c.Auth = func(context.Context) (string, string, error) { return "alice", "secret", nil }
		})
		if who := mustDo(t, p, "ACL", "WHOAMI"); who != "alice" {
			t.Fatalf("resp%d: ACL WHOAMI %v, want alice", proto, who)
		}
		bad := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) {
			c.Protocol = proto
			c.Auth = func(context.Context) (string, string, error) { return "alice", "wrong", nil }
		})
		if _, _, err := do(ctx, bad, "PING"); err == nil || !redis.HasErrorPrefix(errors.Unwrap(err), "WRONGPASS") {
			t.Fatalf("resp%d: a wrong password: %v, want WRONGPASS", proto, err)
		}
	}
}

// TestDo_order checks that concurrent calls each get their own reply.
func TestDo_order(t *testing.T) {
	_, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				want := fmt.Sprintf("%d:%d", g, i)
				v, _, err := do(context.Background(), p, "ECHO", want)
				if err == nil && v != want {
					err = fmt.Errorf("ECHO %s: %v", want, v)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := harness.CommandCalls(t, rdb, "echo"); n != 64*300 {
		t.Errorf("%d ECHO ran, want %d", n, 64*300)
	}
}

// TestDo_contextEnds checks that a caller leaves when its context ends,
// and that the reply of its call, when it comes, goes to no one else.
func TestDo_contextEnds(t *testing.T) {
	_, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, nil)
	id := clientID(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, _, err := do(ctx, p, "BLPOP", "list", "0")
		res <- err
	}()
	waitBlocked(t, rdb, 1)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("BLPOP: %v, want context.Canceled", err)
	}
	if err := rdb.LPush(context.Background(), "list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if v := mustDo(t, p, "ECHO", "after"); v != "after" {
		t.Fatalf("ECHO after: %v", v)
	}
	if got := clientID(t, p); got != id {
		t.Fatalf("the connection changed: %d, was %d", got, id)
	}
	if _, _, err := do(ctx, p, "ECHO", "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call on an ended context: %v", err)
	}
	// A deadline: the lead's read wakes at it, with no goroutine of its
	// own; a second caller waits behind it and leaves at its own.
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer dcancel()
	go func() {
		_, _, err := do(dctx, p, "BLPOP", "list", "0")
		res <- err
	}()
	waitBlocked(t, rdb, 1)
	if _, _, err := do(dctx, p, "ECHO", "behind"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call behind the BLPOP: %v, want context.DeadlineExceeded", err)
	}
	if err := <-res; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("BLPOP with a deadline: %v, want context.DeadlineExceeded", err)
	}
	if err := rdb.LPush(context.Background(), "list", "y").Err(); err != nil {
		t.Fatal(err)
	}
	if v := mustDo(t, p, "ECHO", "after deadline"); v != "after deadline" {
		t.Fatalf("ECHO after the deadline: %v", v)
	}
	if got := clientID(t, p); got != id {
		t.Fatalf("the connection changed: %d, was %d", got, id)
	}
}

// waitBlocked waits until n clients are blocked on the server.
func waitBlocked(t testing.TB, rdb *redis.Client, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		info, err := rdb.Info(context.Background(), "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		if harnessField(info, "blocked_clients") == fmt.Sprint(n) {
			return
		}
	}
	t.Fatalf("%d clients never blocked", n)
}

func harnessField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// TestDo_broken checks that the calls under way on a connection the
// server closes end with its error, and that the next call dials again.
func TestDo_broken(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	p := newPipe(t, rdb.Options().Addr, nil)
	id := clientID(t, p)
	res := make(chan error, 1)
	go func() {
		_, _, err := do(ctx, p, "BLPOP", "list", "0")
		res <- err
	}()
	waitBlocked(t, rdb, 1)
	if err := rdb.ClientKillByFilter(ctx, "ID", fmt.Sprint(id)).Err(); err != nil {
		t.Fatal(err)
	}
	err := <-res
	var rerr pipe.ReplyError
	if err == nil || errors.As(err, &rerr) {
		t.Fatalf("BLPOP on a killed connection: %v, want the connection's error", err)
	}
	if got := clientID(t, p); got == id {
		t.Fatalf("still on the killed connection %d", id)
	}
}

// TestDo_timeout checks the reply timeout: a server that stops answering
// fails the calls under way once the oldest has waited the timeout, and
// a connection idle for longer than the timeout, or busy for longer with
// each reply in time, stays up.
func TestDo_timeout(t *testing.T) {
	s, rdb := server(t)
	ctx := context.Background()
	const timeout = 300 * time.Millisecond
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.ReadTimeout = timeout })
	id := clientID(t, p)
	time.Sleep(2 * timeout) // idle past the timeout
	if got := clientID(t, p); got != id {
		t.Fatalf("an idle connection was dropped: %d, was %d", got, id)
	}
	// Busy past the timeout: replies 50ms apart, never one late.
	for range 3 * int(timeout/(50*time.Millisecond)) {
		if v := mustDo(t, p, "EVAL", busy50ms, "0"); v != int64(1) {
			t.Fatalf("EVAL: %v", v)
		}
	}
	if got := clientID(t, p); got != id {
		t.Fatalf("a busy connection was dropped: %d, was %d", got, id)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = s.Resume()
		}
	}()
	_, _, err := do(ctx, p, "PING")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING to a paused server: %v, want a timeout", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if got := clientID(t, p); got == id {
		t.Fatalf("still on the timed-out connection %d", id)
	}
}

// busy50ms is a script that keeps the server busy for 50ms.
const busy50ms = `local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= 50000
return 1`

// TestDo_readonly checks that a READONLY reply (a failover demoted the
// server) drops the connection, so that the next call dials again.
func TestDo_readonly(t *testing.T) {
	_, rdb := server(t)
	_, primary := server(t)
	ctx := context.Background()
	p := newPipe(t, rdb.Options().Addr, nil)
	id := clientID(t, p)
	po := primary.Options()
	host, port, _ := net.SplitHostPort(po.Addr)
	if err := rdb.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	v := mustDo(t, p, "SET", "k", "v")
	if rerr, ok := v.(pipe.ReplyError); !ok || !redis.HasErrorPrefix(rerr, "READONLY") {
		t.Fatalf("SET on a replica: %#v, want READONLY", v)
	}
	if err := rdb.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if got := clientID(t, p); got == id {
		t.Fatalf("still on connection %d after READONLY", id)
	}
	if v := mustDo(t, p, "SET", "k", "v"); v != "OK" {
		t.Fatalf("SET on the primary again: %v", v)
	}
}

// TestClose checks that Close ends the calls under way, refuses new ones
// and stops the readers (goleak, in TestMain).
func TestClose(t *testing.T) {
	_, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, nil)
	res := make(chan error, 1)
	go func() {
		_, _, err := do(context.Background(), p, "BLPOP", "list", "0")
		res <- err
	}()
	waitBlocked(t, rdb, 1)
	p.Close()
	if err := <-res; !errors.Is(err, pipe.ErrClosed) {
		t.Fatalf("a call under way at Close: %v, want ErrClosed", err)
	}
	if _, _, err := do(context.Background(), p, "PING"); !errors.Is(err, pipe.ErrClosed) {
		t.Fatalf("a call after Close: %v, want ErrClosed", err)
	}
}

// TestDo_dialFails checks that a dial's error is the call's, and that
// the next call dials again.
func TestDo_dialFails(t *testing.T) {
	_, rdb := server(t)
	fail := true
	var mu sync.Mutex
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) {
		dial := c.Dial
		c.Dial = func(ctx context.Context) (net.Conn, error) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return nil, errors.New("no route")
			}
			return dial(ctx)
		}
	})
	if _, _, err := do(context.Background(), p, "PING"); err == nil || err.Error() != "no route" {
		t.Fatalf("PING with a failing dial: %v", err)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if v := mustDo(t, p, "PING"); v != "PONG" {
		t.Fatalf("PING: %v", v)
	}
}

// TestDo_idleClosed checks that a connection the server closed while it
// was idle (its idle timeout) costs the next call nothing: it is seen
// closed before the write, and the call goes on a new one.
func TestDo_idleClosed(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	p := newPipe(t, rdb.Options().Addr, nil)
	id := clientID(t, p)
	if err := rdb.ConfigSet(ctx, "timeout", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list, err := rdb.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(list, fmt.Sprintf("id=%d ", id)) {
			break // the server closed it
		}
		if time.Now().After(end) {
			t.Fatal("the server never closed the idle connection")
		}
	}
	if err := rdb.ConfigSet(ctx, "timeout", "0").Err(); err != nil {
		t.Fatal(err)
	}
	v, _, err := do(ctx, p, "ECHO", "again")
	if err != nil || v != "again" {
		t.Fatalf("ECHO after the idle timeout: %v, %v", v, err)
	}
	if got := clientID(t, p); got == id {
		t.Fatalf("still on the closed connection %d", id)
	}
}
