package luart_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/luart"
)

// redisErr is an error reply as go-redis returns it (redis.Error).
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestTransient: the errors worth sending the call again, and those
// returned at once. It is the union of what lualock's runtime and the
// generated packages retried before luart.
func TestTransient(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), false},
		{&luart.Error{Script: "x", Err: context.Canceled}, false},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{&luart.Error{Script: "x", Err: io.EOF}, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{syscall.EPIPE, true},
		// redis.ErrPoolTimeout and redis.ErrPoolExhausted (go-redis
		// v9.10.0 and later; lualock's TestTransientPoolErrors checks
		// those values), and go-redis's internal errors of that text.
		{errors.New("redis: connection pool timeout"), true},
		{fmt.Errorf("get conn: %w", errors.New("redis: connection pool exhausted")), true},
		{errors.New("redis: connection pool timeout!"), false},
		{&net.DNSError{Err: "no such host", Name: "redsi", IsNotFound: true}, false},
		{&net.DNSError{Err: "server misbehaving", Name: "redis", IsTemporary: true}, true},
		{redisErr("LOADING Redis is loading the dataset in memory"), true},
		{redisErr("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{redisErr("CLUSTERDOWN The cluster is down"), true},
		{redisErr("READONLY You can't write against a read only replica."), true},
		{redisErr("MASTERDOWN Link with MASTER is down"), true},
		{redisErr("BUSY Redis is busy running a script."), true},
		{redisErr("NOREPLICAS Not enough good replicas to write."), true},
		{redisErr("ERR max number of clients reached"), true},
		{redisErr("NOSCRIPT No matching script."), false},
		{redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{redisErr("ERR lualock: lease_ms must be a positive integer"), false},
		{redis.Nil, false},
		{errors.New("something else"), false},
	}
	for _, c := range cases {
		if got := luart.Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestBackoff: each pause is in [d/2, d], d doubling from min up to max.
func TestBackoff(t *testing.T) {
	for trial := 0; trial < 200; trial++ {
		b := luart.NewBackoff(8*time.Millisecond, 100*time.Millisecond)
		for i, d := range []time.Duration{8, 16, 32, 64, 100, 100} {
			d *= time.Millisecond
			if got := b.Next(); got < d/2 || got > d {
				t.Fatalf("pause %d = %v, want within [%v, %v]", i+1, got, d/2, d)
			}
		}
	}
	// A min of 0 or less is 1 ms; a max below min is min.
	b := luart.NewBackoff(0, 0)
	for i := 0; i < 3; i++ {
		if got := b.Next(); got < time.Millisecond/2 || got > time.Millisecond {
			t.Fatalf("NewBackoff(0, 0) pause %v, want within [0.5ms, 1ms]", got)
		}
	}
	b = luart.NewBackoff(10*time.Millisecond, time.Millisecond)
	for i := 0; i < 3; i++ {
		if got := b.Next(); got < 5*time.Millisecond || got > 10*time.Millisecond {
			t.Fatalf("NewBackoff(10ms, 1ms) pause %v, want within [5ms, 10ms]", got)
		}
	}
}

// TestDefaultRetry: today's policy of luagen's packages, a fresh value each
// call (there is no global to change).
func TestDefaultRetry(t *testing.T) {
	want := luart.Retry{Attempts: 3, Backoff: 8 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	r := luart.DefaultRetry()
	if r != want {
		t.Fatalf("DefaultRetry() = %+v, want %+v", r, want)
	}
	r.Attempts = 9
	if got := luart.DefaultRetry(); got != want {
		t.Fatalf("DefaultRetry() after changing a copy = %+v, want %+v", got, want)
	}
}

// TestWithRetry: the policy bound to a client, seen by RetryOf; binding
// again replaces it rather than stacking wrappers.
func TestWithRetry(t *testing.T) {
	f := &fake{}
	if got := luart.RetryOf(f); got != luart.DefaultRetry() {
		t.Errorf("RetryOf(unbound) = %+v, want DefaultRetry", got)
	}
	one := luart.Retry{Attempts: 1}
	c := luart.WithRetry(f, one)
	if got := luart.RetryOf(c); got != one {
		t.Errorf("RetryOf(WithRetry(c, %+v)) = %+v", one, got)
	}
	five := luart.Retry{Attempts: 5, Backoff: time.Millisecond}
	c2 := luart.WithRetry(c, five)
	if got := luart.RetryOf(c2); got != five {
		t.Errorf("RetryOf after binding again = %+v, want %+v", got, five)
	}
	// Rebinding does not nest: one call reaches f per EVALSHA.
	f.fail(io.EOF, 100)
	if _, err := idempotent.Run(context.Background(), luart.WithRetry(c2, one), nil); !errors.Is(err, io.EOF) {
		t.Errorf("Run: %v, want io.EOF", err)
	}
	if got := f.take(); len(got) != 1 {
		t.Errorf("Run with Attempts 1 over Attempts 5 sent %v, want one EVALSHA", got)
	}
}

// TestRun_retry: an idempotent script is sent Attempts times in all on
// transient errors; a script that is not idempotent, a non-transient error,
// a nil reply and a script's own error reply are sent once.
func TestRun_retry(t *testing.T) {
	ctx := context.Background()
	fast := luart.Retry{Attempts: 4, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	for _, c := range []struct {
		name  string
		s     *luart.Script
		c     func(*fake) redis.Scripter
		err   error
		fails int
		calls int
		ok    bool
	}{
		{"default policy: 3 calls, then the error", idempotent, func(f *fake) redis.Scripter { return f }, io.EOF, 5, 3, false},
		{"default policy: passes on the third", idempotent, func(f *fake) redis.Scripter { return f }, io.EOF, 2, 3, true},
		{"bound policy: 4 calls", idempotent, func(f *fake) redis.Scripter { return luart.WithRetry(f, fast) }, io.EOF, 9, 4, false},
		{"Attempts 1: once", idempotent, func(f *fake) redis.Scripter { return luart.WithRetry(f, luart.Retry{Attempts: 1}) }, io.EOF, 9, 1, false},
		{"Attempts 0: once", idempotent, func(f *fake) redis.Scripter { return luart.WithRetry(f, luart.Retry{}) }, io.EOF, 9, 1, false},
		{"not idempotent: once", notIdempotent, func(f *fake) redis.Scripter { return luart.WithRetry(f, fast) }, io.EOF, 9, 1, false},
		{"not transient: once", idempotent, func(f *fake) redis.Scripter { return f }, redisErr("ERR boom"), 9, 1, false},
		{"script error reply: once", idempotent, func(f *fake) redis.Scripter { return f }, redisErr("LOST the lock"), 9, 1, false},
		{"LOADING: retried", idempotent, func(f *fake) redis.Scripter { return f }, redisErr("LOADING Redis is loading"), 2, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{}
			f.fail(c.err, c.fails)
			v, err := c.s.Run(ctx, c.c(f), []string{"k"}, "a")
			if c.ok && (err != nil || v != "ok") {
				t.Errorf("Run = %v, %v; want ok", v, err)
			}
			if !c.ok && !errors.Is(err, c.err) {
				t.Errorf("Run = %v, %v; want %v", v, err, c.err)
			}
			if got := f.take(); len(got) != c.calls {
				t.Errorf("Run sent %v, want %d EVALSHAs", got, c.calls)
			}
		})
	}
}

// TestRun_deadline: a retry never waits past ctx's deadline (it returns
// the last error at once when the pause would end after it), and a ctx
// ended during the pause ends the call.
func TestRun_deadline(t *testing.T) {
	slow := luart.Retry{Attempts: 5, Backoff: 10 * time.Second, MaxBackoff: 10 * time.Second}
	f := &fake{}
	f.fail(io.EOF, 9)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := idempotent.Run(ctx, luart.WithRetry(f, luart.Retry{Attempts: 5, Backoff: 4 * time.Minute, MaxBackoff: 4 * time.Minute}), nil)
	if !errors.Is(err, io.EOF) || time.Since(start) > 5*time.Second {
		t.Errorf("Run with a pause past the deadline = %v after %v, want io.EOF at once", err, time.Since(start))
	}
	if got := f.take(); len(got) != 1 {
		t.Errorf("sent %v, want one EVALSHA", got)
	}

	cctx, ccancel := context.WithCancel(context.Background())
	f.fail(io.EOF, 9)
	t.Cleanup(ccancel)
	time.AfterFunc(20*time.Millisecond, ccancel)
	start = time.Now()
	_, err = idempotent.Run(cctx, luart.WithRetry(f, slow), nil)
	if !errors.Is(err, io.EOF) || time.Since(start) > 5*time.Second {
		t.Errorf("Run cancelled during the pause = %v after %v, want io.EOF at once", err, time.Since(start))
	}
	if got := f.take(); len(got) != 1 {
		t.Errorf("sent %v, want one EVALSHA", got)
	}
}
