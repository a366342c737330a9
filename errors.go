package lualock

import (
	"errors"
	"strconv"
	"strings"
)

// The errors of this package. Compare with errors.Is: the errors returned
// wrap these with detail (the lock's name, the Redis error behind them).
var (
	// ErrNotObtained is returned by TryLock and TryLockLease when the wait
	// time passed and the lock was still held by another owner. When Redis
	// errors were met while waiting, the last one is wrapped too (for
	// errors.Is and errors.As).
	ErrNotObtained = errors.New("lualock: lock not obtained")

	// ErrUnavailable is returned by TryLock and TryLockLease when the wait
	// time passed without a single answer from Redis (unreachable, or too
	// slow): whether the lock is held is unknown. The last Redis error, if
	// one came back in time, is wrapped too.
	ErrUnavailable = errors.New("lualock: Redis did not answer")

	// ErrNotHeld is returned by Unlock when this handle holds no lock: it
	// never locked, already unlocked, or its lease ran out. It is also the
	// cause (see context.Cause) of a hold's Context after a normal Unlock.
	ErrNotHeld = errors.New("lualock: lock not held")

	// ErrLockLost says that a lock this handle held is gone without an
	// Unlock: a renewal found it deleted or expired, Redis lost it (restart
	// without persistence, failover), or renewals failed for a whole lease.
	// A hold's Context is cancelled with it as the cause, and later calls on
	// that hold (Unlock, re-entry) return it.
	ErrLockLost = errors.New("lualock: lock lost")

	// ErrNotLocked is returned by RemainingLease when nobody holds the lock.
	ErrNotLocked = errors.New("lualock: lock does not exist")

	// ErrClosed is returned by every call after Client.Close, and by waits
	// that Close interrupted. Holds whose renewal Close stopped have their
	// Context cancelled with it as the cause.
	ErrClosed = errors.New("lualock: client closed")

	// ErrInvalid is returned for bad arguments (a nil context, an empty name
	// or one over 64 KiB, a lease that is not positive, a negative wait, a
	// nil client).
	// Nothing is sent to Redis.
	ErrInvalid = errors.New("lualock: invalid argument")

	// ErrUpgrade is returned by the write lock of a ReadWriteLock whose
	// owner holds read holds: a read hold cannot be upgraded (it would wait
	// for itself forever, as Redisson's does). Release the read holds first.
	// Nothing is changed in Redis.
	ErrUpgrade = errors.New("lualock: read lock held by the same owner: no upgrade to the write lock")

	// ErrNotReplicated is returned by an acquisition (any lock, read or
	// write hold, fenced lock, semaphore permits) that Redis granted but no
	// replica of its primary confirmed within Options.ReplicaAckTimeout
	// (with ReplicaAckAll: not every connected replica): a failover could
	// lose it, so it was given back. Nothing is held. See Options.ReplicaAck.
	ErrNotReplicated = errors.New("lualock: acquisition not acknowledged by the replicas")
)

// Error is the shape of every error a Lock's call returns: the operation
// ("lock", "unlock", "force unlock", "status"), the lock's name and the
// cause. The cause wraps the sentinel above that applies, if any, and the
// Redis or context error behind it, so that errors.Is and errors.As see
// through an *Error to both. It prints as
//
//	lualock: OP "NAME": cause
type Error struct {
	Op   string // the operation that failed
	Lock string // the lock's name
	Err  error  // the cause
}

// Error returns "lualock: OP "NAME": cause", the cause without its own
// "lualock: " prefix.
func (e *Error) Error() string {
	return "lualock: " + e.Op + " " + strconv.Quote(e.Lock) + ": " + strings.TrimPrefix(e.Err.Error(), "lualock: ")
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Operations named by an Error.
const (
	verbLock        = "lock"
	verbUnlock      = "unlock"
	verbForceUnlock = "force unlock"
	verbStatus      = "status"
)

// wrapErr returns err as the *Error of op on lock name: the one place where
// a call's error takes its shape. Internal functions return bare causes.
func wrapErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok && e.Op == op && e.Lock == name {
		return err
	}
	return &Error{Op: op, Lock: name, Err: err}
}
