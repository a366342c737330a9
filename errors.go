package lualock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The errors of this package. Compare with errors.Is: the errors returned
// wrap these with detail (the object's name, the Redis error behind them).
// They are worded for every primitive: a lock, a semaphore's permits, a
// count-down latch, a multi-lock.
var (
	// ErrNotObtained is returned by a call that waits with a bound (TryLock,
	// TryAcquire and their lease variants) when the wait passed and what it
	// asked for (the lock, the permits) was still taken. When Redis errors
	// were met while waiting, the last one is wrapped too (for errors.Is and
	// errors.As).
	ErrNotObtained = errors.New("lualock: not obtained")

	// ErrUnavailable is returned by a call that waits with a bound when the
	// wait passed without a single answer from Redis (unreachable, or too
	// slow): whether it would have been obtained is unknown. The last Redis
	// error, if one came back in time, is wrapped too.
	ErrUnavailable = errors.New("lualock: Redis did not answer")

	// ErrNotHeld is returned by Unlock or Release when the handle holds
	// nothing: it never took it, gave it back already, or its lease ran
	// out. It is also the cause (see context.Cause) of a hold's or a
	// permit's Context after a normal Unlock or Release.
	ErrNotHeld = errors.New("lualock: not held")

	// ErrLockLost says that something the handle held (a lock's hold, a
	// permit) is gone without an Unlock or Release: a renewal found it
	// deleted or expired, Redis lost it (restart without persistence,
	// failover), or renewals failed for a whole lease. The hold's or the
	// permit's Context is cancelled with it as the cause, and later calls on
	// it (Unlock, Release, re-entry) return it.
	ErrLockLost = errors.New("lualock: lost")

	// ErrNotLocked is returned by RemainingLease when nobody holds the lock.
	ErrNotLocked = errors.New("lualock: held by nobody")

	// ErrClosed is returned by every call after Client.Close, and by waits
	// that Close interrupted. Holds and permits whose renewal Close stopped
	// have their Context cancelled with it as the cause.
	ErrClosed = errors.New("lualock: client closed")

	// ErrInvalid is returned for bad arguments (a nil context, an empty name
	// or one over 64 KiB, a lease that is not positive, a negative wait, a
	// count or a permit number out of range, a malformed permit id, a nil
	// client). Nothing is sent to Redis.
	ErrInvalid = errors.New("lualock: invalid argument")

	// ErrUpgrade is returned by the write lock of a ReadWriteLock whose
	// owner holds read holds: a read hold cannot be upgraded (it would wait
	// for itself forever, as Redisson's does). Release the read holds first.
	// Nothing is changed in Redis.
	ErrUpgrade = errors.New("lualock: no upgrade from a read hold to the write lock")

	// ErrNotReplicated is returned by an acquisition (a lock of any kind,
	// a read or write hold, a fenced token, semaphore permits) that Redis
	// granted but no replica of its primary confirmed within
	// Options.ReplicaAckTimeout (with ReplicaAckAll: not every connected
	// replica): a failover could lose it, so it was given back and nothing
	// is held. See Options.ReplicaAck.
	ErrNotReplicated = errors.New("lualock: not acknowledged by the replicas")

	// ErrWrongType is returned by a call that deletes or resets an object
	// whoever holds it (ForceUnlock, DrainPermits) when its key holds
	// something else: another Redis type, or a hash or string not shaped as
	// that object (docs/GUIDE.md, "Force unlock"). Nothing is changed in
	// Redis; the error says what the key is.
	ErrWrongType = errors.New("lualock: not this kind of object")
)

// Error is the shape of every error a call of this package returns on a
// named object (a lock, a semaphore, a permit, a count-down latch, a
// multi-lock): the operation (see the op list below), the object's name
// and the cause. The cause wraps the sentinel above that applies, if any, and the
// Redis or context error behind it, so that errors.Is and errors.As see
// through an *Error to both. It prints as
//
//	lualock: OP "NAME": cause
type Error struct {
	Op   string // the operation that failed
	Name string // the object's name: its key in Redis
	Err  error  // the cause
}

// Error returns "lualock: OP "NAME": cause", the cause without its own
// "lualock: " prefix.
func (e *Error) Error() string {
	return "lualock: " + e.Op + " " + strconv.Quote(e.Name) + ": " + strings.TrimPrefix(e.Err.Error(), "lualock: ")
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Operations named by an Error: the Op of every call that returns one.
const (
	// The locks (Lock, the read and write locks, the fenced and spin locks,
	// MultiLock).
	verbLock        = "lock"
	verbUnlock      = "unlock"
	verbForceUnlock = "force unlock"
	verbStatus      = "status"
	// The semaphores and their permits.
	verbAcquire     = "acquire"
	verbRelease     = "release"
	verbSetPermits  = "set permits"
	verbAddPermits  = "add permits"
	verbDrain       = "drain permits"
	verbAvailable   = "available permits"
	verbUpdateLease = "update lease"
	// The count-down latch.
	verbSetCount  = "set count"
	verbCountDown = "count down"
	verbCount     = "count"
	verbAwait     = "await"
)

// wrongType turns the WRONGTYPE error of a script that found its key
// holding something else into one that wraps ErrWrongType.
func wrongType(err error) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), "WRONGTYPE ") {
		return err
	}
	return fmt.Errorf("%w: %s", ErrWrongType, strings.TrimPrefix(strings.TrimPrefix(rerr.Error(), "WRONGTYPE "), "lualock: "))
}

// wrapErr returns err as the *Error of op on lock name: the one place where
// a call's error takes its shape. Internal functions return bare causes.
func wrapErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok && e.Op == op && e.Name == name {
		return err
	}
	return &Error{Op: op, Name: name, Err: err}
}
