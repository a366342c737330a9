package scripts_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/luart"
)

const (
	leaseMS int64 = 30_000 // lease of most calls, ms
	shortMS int64 = 2_000  // a lease that a later call visibly refreshes
	latchMS int64 = 10_000 // unlock latch lifetime, ms
	waitMS  int64 = 60_000 // fair wait budget, ms
)

// tag is the protocol's tag(prefix, N).
func tag(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// lockKeys holds the protocol's key names of one lock name.
type lockKeys struct {
	name, channel, queue, timeouts string
}

func newLockKeys(name string) lockKeys {
	return lockKeys{
		name:     name,
		channel:  tag("redisson_lock__channel", name),
		queue:    tag("redisson_lock_queue", name),
		timeouts: tag("redisson_lock_timeout", name),
	}
}

func (l lockKeys) latch(req string) string {
	return tag("redisson_unlock_latch", l.name) + ":" + req
}

func (l lockKeys) waiterChannel(field string) string { return l.channel + ":" + field }

func (l lockKeys) acquireKeys() generated.LockAcquireKeys {
	return generated.LockAcquireKeys{Lock: l.name}
}

func (l lockKeys) releaseKeys(req string) generated.LockReleaseKeys {
	return generated.LockReleaseKeys{Lock: l.name, Channel: l.channel, Latch: l.latch(req)}
}

// forceKeys names a new force-release request (a fresh latch) each call.
func (l lockKeys) forceKeys() generated.LockForceReleaseKeys {
	return generated.LockForceReleaseKeys{Lock: l.name, Channel: l.channel, Latch: l.latch("force-" + strconv.FormatInt(forceReqs.Add(1), 10))}
}

// fairForceKeys is forceKeys for the fair lock.
func (l lockKeys) fairForceKeys() generated.FairForceReleaseKeys {
	k := l.fairKeys()
	return generated.FairForceReleaseKeys{Lock: k.Lock, Queue: k.Queue, Timeouts: k.Timeouts, Channel: k.Channel,
		Latch: l.latch("force-" + strconv.FormatInt(forceReqs.Add(1), 10))}
}

var forceReqs atomic.Int64

func (l lockKeys) fairKeys() generated.FairAcquireKeys {
	return generated.FairAcquireKeys{Lock: l.name, Queue: l.queue, Timeouts: l.timeouts, Channel: l.channel}
}

func (l lockKeys) fairReleaseKeys(req string) generated.FairReleaseKeys {
	return generated.FairReleaseKeys{Lock: l.name, Queue: l.queue, Timeouts: l.timeouts, Channel: l.channel, Latch: l.latch(req)}
}

// ---- calls -----------------------------------------------------------------

func acquire(rdb redis.Scripter, l lockKeys, field string, holds, lease int64) (int64, error) {
	return generated.LockAcquire(context.Background(), rdb, l.acquireKeys(),
		generated.LockAcquireArgs{LeaseMS: lease, Field: field, Holds: holds})
}

func release(rdb redis.Scripter, l lockKeys, field, req string, lease int64, publish string) (*int64, error) {
	return generated.LockRelease(context.Background(), rdb, l.releaseKeys(req),
		generated.LockReleaseArgs{LeaseMS: lease, Field: field, LatchMS: latchMS, Publish: publish})
}

func fairAcquire(rdb redis.Scripter, l lockKeys, field string, holds int64) (int64, error) {
	return generated.FairAcquire(context.Background(), rdb, l.fairKeys(),
		generated.FairAcquireArgs{LeaseMS: leaseMS, Field: field, WaitMS: waitMS, Holds: holds, Publish: "publish"})
}

func fairLeave(rdb redis.Scripter, l lockKeys, field string) (bool, error) {
	return generated.FairLeave(context.Background(), rdb, generated.FairLeaveKeys(l.fairKeys()),
		generated.FairLeaveArgs{Field: field, WaitMS: waitMS, Publish: "publish"})
}

func fairRelease(rdb redis.Scripter, l lockKeys, field, req string) (*int64, error) {
	return generated.FairRelease(context.Background(), rdb, l.fairReleaseKeys(req),
		generated.FairReleaseArgs{LeaseMS: leaseMS, Field: field, LatchMS: latchMS, WaitMS: waitMS, Publish: "publish"})
}

func fairForce(rdb redis.Scripter, l lockKeys) (bool, error) {
	return generated.FairForceRelease(context.Background(), rdb, l.fairForceKeys(),
		generated.FairForceReleaseArgs{LatchMS: latchMS, WaitMS: waitMS, Publish: "publish"})
}

// wantNil returns a check that a call returned a nil *int64 and no error:
// wantNil(t, "what")(call()).
func wantNil(t *testing.T, what string) func(*int64, error) {
	return func(got *int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		if got != nil {
			t.Fatalf("%s = %d, want nil", what, *got)
		}
	}
}

// wantInt returns a check that a call returned a non-nil *int64 and no
// error, which it returns: wantInt(t, "what")(call()).
func wantInt(t *testing.T, what string) func(*int64, error) int64 {
	return func(got *int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		if got == nil {
			t.Fatalf("%s = nil, want an integer", what)
		}
		return *got
	}
}

// wantZero returns a check that an acquisition returned 0 (acquired) and no
// error: wantZero(t, "what")(call()).
func wantZero(t *testing.T, what string) func(int64, error) {
	return func(got int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		if got != 0 {
			t.Fatalf("%s = %d, want 0 (acquired)", what, got)
		}
	}
}

// wantOK returns a check that a call returned no error; it returns the reply.
func wantOK(t *testing.T, what string) func(int64, error) int64 {
	return func(got int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return got
	}
}

// wantScriptErr fails unless err is a *luart.Error naming script whose
// text contains want; it returns the error.
func wantScriptErr(t *testing.T, what string, err error, script, want string) *luart.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one containing %q", what, want)
	}
	var se *luart.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v (%T) is not a *luart.Error", what, err, err)
	}
	if se.Script != script {
		t.Fatalf("%s: error names script %q, want %q", what, se.Script, script)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: error %q does not contain %q", what, err, want)
	}
	return se
}
