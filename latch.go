package lualock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
)

// CountDownLatch is a handle on Redisson's RCountDownLatch: a count under
// one name that callers count down, and that opens (its key is deleted)
// when it reaches zero, waking everyone in Await. It shares keys and
// messages with Redisson's clients (3.16 and 4.x).
//
// A latch that never reaches zero stays in Redis forever (no TTL, as
// Redisson's). On a Redis Cluster a name with a brace cannot work:
// Redisson's latch channel is "redisson_countdownlatch__channel__{" + name
// + "}", which for a name with its own hash tag falls in another slot than
// the name, and the cluster refuses the scripts (CROSSSLOT), Redisson's
// too; NewCountDownLatch refuses such names on a cluster client. A
// CountDownLatch's methods are safe for concurrent use.
type CountDownLatch struct {
	c       *Client
	name    string
	channel string
	invalid error
}

// NewCountDownLatch returns a handle on the latch name. Nothing is sent to
// Redis. A bad name (see CheckName), or on a *redis.ClusterClient a name
// with a brace, makes every call return ErrInvalid.
func (c *Client) NewCountDownLatch(name string) *CountDownLatch {
	l := &CountDownLatch{c: c, name: name, channel: keys.CountDownLatchChannelPrefix + "{" + name + "}", invalid: CheckName(name)}
	if _, cluster := c.rdb.(*redis.ClusterClient); cluster && l.invalid == nil && strings.ContainsAny(name, "{}") {
		l.invalid = fmt.Errorf("%w: latch name %q has a brace: on a cluster Redisson's latch channel would fall in another slot (CROSSSLOT)", ErrInvalid, name)
	}
	return l
}

// Name returns the latch's name, its key in Redis.
func (l *CountDownLatch) Name() string { return l.name }

func (l *CountDownLatch) usable(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	return l.invalid
}

// TrySetCount sets the count if the latch has none (it does not exist, or
// it opened) and reports whether it did. It returns ErrInvalid for a count
// under 1, ErrClosed, ctx's error or the Redis error.
func (l *CountDownLatch) TrySetCount(ctx context.Context, count int64) (bool, error) {
	if err := l.usable(ctx); err != nil {
		return false, wrapErr(verbSetCount, l.name, err)
	}
	if err := checkCount("count", count, 1); err != nil {
		return false, wrapErr(verbSetCount, l.name, err)
	}
	req, _ := newRequest(l.name)
	var v int64
	err := l.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = generated.LatchTrySetCount(ctx, l.c.env.calls,
			generated.LatchTrySetCountKeys{Latch: l.name, Channel: l.channel, Request: req},
			generated.LatchTrySetCountArgs{Count: count, LatchMS: l.c.env.latchMS, Publish: l.c.env.publish})
		return err
	})
	l.c.dropLatch(err, req)
	return v == 1, wrapErr(verbSetCount, l.name, err)
}

// CountDown decrements the count; at zero the latch opens and every Await
// returns. Counting down an open latch does nothing. A count down whose
// reply was lost is sent again under its unlock latch, so it counts once
// (Redisson never resends one for that reason). It returns ErrInvalid,
// ErrClosed, ctx's error or the Redis error.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := l.usable(ctx); err != nil {
		return wrapErr(verbCountDown, l.name, err)
	}
	req, _ := newRequest(l.name)
	err := l.c.call(ctx, func(ctx context.Context) error {
		_, err := generated.LatchCountDown(ctx, l.c.env.calls,
			generated.LatchCountDownKeys{Latch: l.name, Channel: l.channel, Request: req},
			generated.LatchCountDownArgs{LatchMS: l.c.env.latchMS, Publish: l.c.env.publish})
		return err
	})
	l.c.dropLatch(err, req)
	return wrapErr(verbCountDown, l.name, err)
}

// Count returns the count: 0 when the latch is open. It returns
// ErrInvalid, ErrClosed, ctx's error or the Redis error.
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if err := l.usable(ctx); err != nil {
		return 0, wrapErr(verbCount, l.name, err)
	}
	var v int64
	err := l.c.call(ctx, func(ctx context.Context) (err error) {
		v, err = l.count(ctx)
		return err
	})
	return v, wrapErr(verbCount, l.name, err)
}

func (l *CountDownLatch) count(ctx context.Context) (int64, error) {
	return generated.LatchCount(ctx, l.c.env.calls, generated.LatchCountKeys{Latch: l.name})
}

// Await blocks until the latch is open (its count is 0, or it was never
// set) or ctx ends; give ctx a deadline to bound the wait. It is woken by
// the message of the count down that opens the latch, whoever sends it,
// and re-checks on a fallback timer (Options.MaxWaitTimer) in case a
// message is missed. It returns ErrInvalid, ErrClosed, an error wrapping ctx's error,
// or a non-transient Redis error.
func (l *CountDownLatch) Await(ctx context.Context) (err error) {
	start := time.Now()
	defer func() { l.c.acquired(ctx, subject{kind: KindLatch, name: l.name}, start, -1, false, err) }()
	if err := l.usable(ctx); err != nil {
		return wrapErr(verbAwait, l.name, err)
	}
	_, err = l.c.acquire(ctx, &waitFuncs{
		ch:       l.channel,
		maxTimer: l.c.cfg.MaxWaitTimer,
		attempt: func(ctx context.Context) outcome {
			n, err := l.count(ctx)
			return outcome{acquired: err == nil && n <= 0, wait: -1, err: err}
		},
	}, -1, 0)
	return wrapErr(verbAwait, l.name, err)
}
