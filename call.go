package lualock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// call runs f, resending it after a transient error (f's unlock latch
// replays a first send that took effect) with the client's backoff until
// ctx ends. When ctx ends with f's outcome unknown, f is sent once more
// under a short context of its own, so that a resend after a lost reply
// still happens within the latch's lifetime.
func (c *Client) call(ctx context.Context, f func(ctx context.Context) error) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if c.closed() {
		return ErrClosed
	}
	bo := c.newBackoff()
	for {
		err := f(ctx)
		if err == nil || !transient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return err
		}
		if ctx.Err() != nil {
			dctx, cancel := detached(ctx)
			if err2 := f(dctx); err2 == nil {
				cancel()
				return nil
			}
			cancel()
			return ctxErr(ctx, err)
		}
		t := time.NewTimer(bo.step())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		case <-c.closing:
			t.Stop()
			return ErrClosed
		}
	}
}

// isRedisError reports whether err is Redis's reply (the script ran, or
// was refused): its outcome is known.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
