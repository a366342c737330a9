package luart

import (
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Retry is how many times, and how far apart, an idempotent script is sent
// again after a transient error (see Transient). Scripts that are not
// idempotent are sent once whatever the policy. Its zero value sends every
// script once.
type Retry struct {
	// Attempts is the number of calls in all, the first included: 0 and 1
	// mean no retry.
	Attempts int
	// Backoff is the pause before the second call, jittered to
	// [Backoff/2, Backoff]; each later pause doubles, up to MaxBackoff.
	// Below 1 ms it is 1 ms.
	Backoff time.Duration
	// MaxBackoff caps the pause; below Backoff it is Backoff.
	MaxBackoff time.Duration
}

// DefaultRetry returns the policy of a client with none bound by
// WithRetry: 3 calls in all, pauses of 8 ms then 16 ms (jittered), at most
// 100 ms, as luagen's generated packages have always retried. A retry never
// waits past the context's deadline: when the pause would end after it, the
// call returns the last error at once.
func DefaultRetry() Retry {
	return Retry{Attempts: 3, Backoff: 8 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
}

// WithRetry returns c with the policy r bound to it: Script.Run, and so
// every generated wrapper, retries under r the scripts it runs through the
// returned value, instead of under DefaultRetry. The result runs every
// command as c does (it embeds c); luart sees through it, so a pipeline, a
// *redis.Ring or a *redis.ClusterClient wrapped by WithRetry is still
// treated as one. Given a value WithRetry returned, it replaces that
// value's policy. lualock's runtime binds Retry{Attempts: 1} to the
// scripter of its acquisitions: its own loop retries them.
func WithRetry(c redis.Scripter, r Retry) redis.Scripter {
	if b, ok := c.(*bound); ok {
		c = b.Scripter
	}
	return &bound{Scripter: c, retry: r}
}

// RetryOf returns the policy Run applies to scripts sent through c: the one
// WithRetry bound to it, DefaultRetry otherwise.
func RetryOf(c redis.Scripter) Retry {
	_, r := unwrap(c)
	return r
}

// bound is a Scripter with a retry policy.
type bound struct {
	redis.Scripter
	retry Retry
}

// unwrap returns the scripter under a WithRetry value and its policy.
func unwrap(c redis.Scripter) (redis.Scripter, Retry) {
	if b, ok := c.(*bound); ok {
		return b.Scripter, b.retry
	}
	return c, DefaultRetry()
}

// Transient reports whether err may pass if the same call is sent again:
// network failures (connection reset or refused, EOF, timeouts), a full
// connection pool (redis.ErrPoolTimeout, redis.ErrPoolExhausted), a host
// name that fails to resolve for another reason than not existing, and the
// replies of a server loading its data, busy with a script, short of
// replicas or clients, or of a cluster or failover in progress (LOADING,
// TRYAGAIN, CLUSTERDOWN, READONLY, MASTERDOWN, BUSY, NOREPLICAS, "max
// number of clients reached"). Context errors are not transient, nor is a
// host name that does not exist (a typo would otherwise be retried
// forever), nor nil.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		poolFull(err) {
		return true
	}
	if dns := (*net.DNSError)(nil); errors.As(err, &dns) {
		return !dns.IsNotFound
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	for _, p := range transientPrefixes {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// poolFull reports whether err is, or wraps, go-redis's "connection pool
// timeout" or "connection pool exhausted" error. They are matched by their
// text: go-redis exports them as redis.ErrPoolTimeout and
// redis.ErrPoolExhausted only from v9.10.0 (the same values as its internal
// ones, with that text), and luart supports go-redis from v9.0.0.
func poolFull(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		switch err.Error() {
		case "redis: connection pool timeout", "redis: connection pool exhausted":
			return true
		}
	}
	return false
}

// transientPrefixes are the error replies (after an optional "ERR ") that
// may pass when the call is sent again.
var transientPrefixes = [...]string{"LOADING", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "MASTERDOWN", "BUSY", "NOREPLICAS", "max number of clients"}

// Backoff is a capped, jittered exponential backoff: each pause is a random
// time in [d/2, d], d starting at the minimum and doubling up to the
// maximum. Its zero value is not usable: make one with NewBackoff. It is
// not safe for concurrent use.
type Backoff struct {
	next, max time.Duration
}

// NewBackoff returns a Backoff from min to max. A min of 0 or less is 1 ms,
// and a max below min is min.
func NewBackoff(min, max time.Duration) Backoff {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	return Backoff{next: min, max: max}
}

// Next returns the next pause.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = 2 * b.next
	if b.next > b.max {
		b.next = b.max
	}
	// math/rand's functions are safe for concurrent use (math/rand/v2
	// would raise the module's Go floor to 1.22).
	return d/2 + time.Duration(rand.Int63n(int64(d/2)+1))
}

// run runs call under the policy r (Attempts calls at most while the
// error is transient), pausing by a Backoff between calls, and never waits
// past ctx's deadline.
func (r Retry) run(ctx context.Context, call func() (any, error)) (any, error) {
	attempts := r.Attempts
	if attempts < 1 {
		attempts = 1
	}
	backoff := r.Backoff
	if backoff < time.Millisecond {
		backoff = time.Millisecond
	}
	bo := NewBackoff(backoff, r.MaxBackoff)
	for try := 1; ; try++ {
		v, err := call()
		if err == nil || try >= attempts || !Transient(err) || ctx.Err() != nil {
			return v, err
		}
		wait := bo.Next()
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}
