package lualock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// redisErr is a reply error as go-redis returns it (redis.Error).
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestTransient: the errors worth a retry during acquisition, and those
// returned at once. A white-box test: the classification has no exported
// surface but decides whether Lock retries or fails.
func TestTransient(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), false},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{syscall.EPIPE, true},
		{redis.ErrPoolTimeout, true},
		{redis.ErrPoolExhausted, true},
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
		{errors.New("lualock: something else"), false},
	}
	for _, c := range cases {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
