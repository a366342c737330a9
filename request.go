package lualock

import (
	crand "crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/lualock/lualock/internal/keys"
)

// The unlock latches of the semaphores' and the count-down latch's calls: each call
// sends a request id, under which Redis keeps the first send's reply for
// Options.UnlockLatch, so that a resend after a lost reply replays it.

// newRequest returns a new unlock latch of a call on name: the request id is
// 32 hex characters, as Redisson's.
func newRequest(name string) (key, id string) {
	var b [16]byte
	_, _ = crand.Read(b[:])
	id = hex.EncodeToString(b[:])
	return keys.Tag(keys.RequestLatchPrefix, name) + ":" + id, id
}

// dropLatch has the sweeper delete the unlock latch req once its call
// got Redis's reply (err is nil or Redis's error): nothing resends it any
// more. Left alone it would live Options.UnlockLatch.
func (c *Client) dropLatch(err error, req string) {
	if err == nil || isRedisError(err) {
		c.latches.drop(req)
	}
}

// checkCount returns ErrInvalid unless n is at least min.
func checkCount(what string, n, min int64) error {
	if n < min {
		return fmt.Errorf("%w: %s %d, want at least %d", ErrInvalid, what, n, min)
	}
	return nil
}
