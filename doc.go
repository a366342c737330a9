// Package lualock provides distributed locks on Redis that share their data
// layout with Redisson's: a Go service and a Java service using Redisson can
// lock the same name safely. The layout is specified in docs/PROTOCOL.md
// (reentrant and fair locks) and docs/PROTOCOL-PRIMITIVES.md (the others).
//
// # Lock model
//
// A Client wraps a go-redis client (standalone, failover or cluster) and has
// a random client id C. Client.NewLock returns a *Lock: a handle with its own
// holder id H, which owns its holds under the field C:H of the lock's hash.
// Go has no thread ids, so the handle takes the place of Redisson's thread:
// re-entry goes through the same handle, and every other handle, in this
// process or elsewhere, is another owner. Client.NewFairLock returns a handle
// on a fair lock, which grants the lock in the order waiters first asked.
// Client.NewReadWriteLock returns a ReadWriteLock, whose ReadLock and
// WriteLock are handles of one owner (many readers or one writer; Redisson's
// RReadWriteLock); Client.NewFencedLock a FencedLock, whose acquisitions
// take fencing tokens (Redisson's RFencedLock); Client.NewSpinLock a handle
// whose waiters poll instead of subscribing (Redisson's RSpinLock).
//
// Beside the locks: Client.NewSemaphore returns a Semaphore (Redisson's
// RSemaphore: permits without an owner or a lease),
// Client.NewPermitExpirableSemaphore a PermitExpirableSemaphore, whose
// Acquire returns a *Permit held like a lock (an id, a lease renewed by the
// watchdog or fixed, a Context that ends when it is lost; Redisson's
// RPermitExpirableSemaphore), Client.NewCountDownLatch a CountDownLatch
// (Redisson's RCountDownLatch), and Client.NewMultiLock a MultiLock that
// takes several locks all or nothing (Redisson's RedissonMultiLock).
//
// Lock (Acquire, Await) blocks until the lock is held (the permits taken,
// the latch open) or the context ends, and TryLock (TryAcquire) gives up
// after a wait. Every call that reaches Redis runs one of the Lua scripts of
// the lua/ folder through the wrappers that luagen generated, so one round
// trip takes or releases a lock.
//
// # Waiting
//
// A waiter does not poll. It subscribes to the lock's release channel (the
// fair lock: to its own channel, so only the head of the queue is woken) over
// one pub/sub connection that all waiters of a Client share (with sharded
// pub/sub on a cluster, one per primary), and tries again when a release is
// announced. Options.PubSub chooses PUBLISH/SUBSCRIBE, SPUBLISH/SSUBSCRIBE or
// both; its default does what Redisson 3.22 and later do (sharded on a Redis
// Cluster), so that Go and Java clients hear each other's releases. Each channel also has a fallback timer, set
// from the lock's remaining lease and capped by Options.MaxWaitTimer (for
// the fair lock, by half of Options.FairWait), so a lost message delays a
// waiter but never hangs it. Transient Redis errors are retried with
// capped, jittered exponential backoff inside the caller's deadline.
//
// # Watchdog
//
// A lock taken without a lease (Lock, TryLock), and a Permit taken without
// one (Acquire, TryAcquire), is held for Options.WatchdogLease (30 s by
// default) and renewed every third of it by the client's watchdog, which
// renews all of the client's held locks and permits with one script call
// per batch (per cluster slot). LockLease, TryLockLease, AcquireLease and
// TryAcquireLease take a fixed lease instead, which is not renewed.
//
// # Losing a lock
//
// A held lock (or Permit) can be lost: its lease ran out, someone deleted
// it, Redis restarted without persistence or failed over, or renewals
// failed for a whole lease. A hold's Context (and Done), and a Permit's,
// ends when that is found, with ErrLockLost as its cause (see
// context.Cause); after a normal Unlock or Release the cause is ErrNotHeld.
// Do the protected work under Lock.Context to stop it when the lock is
// lost. A loss is found within milliseconds by the client's hold tracker,
// which Redis tells of every change of a held key (client-side caching),
// whatever made it; the watchdog's renewals (every WatchdogLease/3) and,
// for a fixed lease, its end are the fallback (see Options.NoHoldTracking).
//
// The end of a lease is signalled early, by a margin of 1% of the lease
// plus 2ms (Redlock's allowance; 302ms for the default 30s): a hold or a
// permit whose renewals fail is reported lost that long before its last
// lease would run out, and a fixed lease's Context, a lock's or a Permit's,
// ends that long before the lease does (cause ErrNotHeld). Leases are
// counted from the moment the call that set them was sent, not from its
// reply; a resend whose first send's reply was lost sets the lease again in
// Redis. The margin covers clock drift between
// the client and Redis, Redis's millisecond expiry and the signal's own
// timer, so a holder that stops at Done has stopped before Redis lets
// another owner in; a holder process paused or starved of CPU for longer
// than the margin signals late (see below).
//
// # Logs and metrics
//
// Options.Logger (a *slog.Logger) reports renewal failures, losses, pub/sub
// reconnects and waits that gave up, with the object's kind, name and
// owner. Options.Observer receives every primitive's acquisitions, the end
// of each hold and permit, and each renewal, for metrics; the module
// github.com/lualock/lualock/extra/lualockotel records them with
// OpenTelemetry. Both cost nothing when unset.
//
// # What a Redis lock cannot promise
//
// Mutual exclusion holds while one primary serves the lock's keys and each
// holder finishes inside its lease. Replication is asynchronous, so a
// failover can lose a lock that a replica had not received yet. A holder
// paused past its lease (a long GC, SIGSTOP, a VM migration) can run on for a
// moment believing it still holds the lock; the lost-lock signal comes after
// the fact. Where that matters, pair the lock with a fencing token that the
// protected resource checks.
package lualock
