package lualock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options tunes a Client. The zero value means every default; each field
// says its own.
type Options struct {
	// WatchdogLease is the lease of locks taken without one (Lock, TryLock):
	// the watchdog renews it every WatchdogLease/3 while the lock is held.
	// When renewals fail, the hold is reported lost 1% of the lease plus
	// 2ms before its last renewed lease runs out (see the package doc,
	// Losing a lock). Default 30s, as Redisson's lockWatchdogTimeout.
	WatchdogLease time.Duration

	// FairWait is the fair lock's wait budget per waiter: how long a queued
	// waiter may go without asking again before the others purge it from
	// the queue, and how long a dead waiter can hold the queue up. Live
	// waiters ask again at least every FairWait/2. Default 5m, as Redisson;
	// at least 500ms. NewFairLockWait sets it for one lock. Every client of
	// one fair lock, Redisson's included (its threadWaitTime), must use the
	// same budget: a Redisson handoff takes its budget off every waiter's
	// deadline, and lualock's waiters count theirs.
	FairWait time.Duration

	// MaxWaitTimer caps the fallback timer of a reentrant lock's waiters: a
	// waiter that hears no release message retries after the lock's
	// remaining lease or after this, whichever comes first, so a lost
	// message never hangs it. (A fair waiter's timer is capped by FairWait/2
	// instead; see NewFairLock.) Default 10s.
	MaxWaitTimer time.Duration

	// UnlockLatch is how long Redis keeps the outcome of a last hold's
	// release under its request id, so that the release sent again after a
	// lost reply replays "released" instead of "held nothing" (any other
	// release names the hold count it releases from, which replays it
	// without a latch). The latch is deleted as soon as the release's reply
	// arrives (in the background, batched, off the caller's path), so only
	// the latches of releases whose reply was lost live this long. Past the
	// latch the resend of a last hold's release (the next Unlock or Lock of
	// the handle, or a retry within one Unlock that lasted past the latch)
	// finds the lock gone and cannot tell whether its first send
	// released it or the lock was lost before: it reports ErrNotHeld, and
	// the hold's Context ends with ErrNotHeld. Keep it above the time go-redis may take to resend a
	// command (ReadTimeout x (MaxRetries+1), 12s with go-redis's defaults at
	// worst) and above the time a caller may take to call Unlock again
	// after an error. Default 10s.
	UnlockLatch time.Duration

	// RetryMin and RetryMax bound the jittered exponential backoff between
	// acquisition attempts after a transient Redis error (luart.Transient:
	// connection reset, pool timeout, LOADING, TRYAGAIN, CLUSTERDOWN,
	// READONLY, BUSY, ...); that loop is the only retry of an acquisition.
	// Unlock, ForceUnlock and Status send their script up to 3 times on
	// such errors (luart.DefaultRetry). Defaults 10ms and 1s.
	RetryMin, RetryMax time.Duration

	// SubscriptionLinger is how long a channel stays subscribed after its
	// last waiter got the lock, so that an owner that contends again soon
	// does not pay SUBSCRIBE and UNSUBSCRIBE on every acquisition. A waiter
	// that gives up unsubscribes at once. Default 500ms; negative: never
	// linger.
	SubscriptionLinger time.Duration

	// RenewBatch is the most locks the watchdog renews in one script call.
	// Default 500.
	RenewBatch int

	// PubSub chooses how releases are published and how waiters listen for
	// them: PUBLISH/SUBSCRIBE, SPUBLISH/SSUBSCRIBE (Redis 7 sharded pub/sub)
	// or both. The two kinds never hear each other, so every client of one
	// lock, Redisson's included, must publish on a kind the others listen
	// to. Default PubSubAuto: what Redisson 3.22 and later (4.x included)
	// do with their default settings, sharded on a Redis Cluster
	// (*redis.ClusterClient), plain on a standalone or failover Redis
	// (NewFailoverClusterClient included). Use
	// PubSubPlain on a cluster shared with Redisson before 3.22 only, and
	// PubSubBoth on a cluster shared with Redisson of both kinds (a fleet
	// in the middle of an upgrade). See PubSubMode.
	PubSub PubSubMode

	// Scripter runs the lock scripts (acquire, release, leave, force
	// release, status). Default nil: on a *redis.Client (a failover client
	// included), a pipelined connection of the Client's own, set up from
	// the client's options, whose calls still pass through the hooks
	// added to it before New; on a *redis.ClusterClient, that client
	// itself (a cluster pipeline waits for its slowest node); on another
	// kind, Batched. Set it to the redis client itself to send each call
	// on a pooled connection, or to another scripter on the same
	// deployment: Batched, go-redis's rdb.AutoPipeline() (which does not
	// honour a queued command's context) or a rueidis client through
	// github.com/lualock/lualock/extra/lualockrueidis. Every script is
	// safe to resend. It must not be a pipeline (redis.Pipeliner); the
	// Client does not close it. See docs/GUIDE.md, Many goroutines.
	Scripter redis.Scripter

	// ReplySpin is how long a script call that waits for its reply alone,
	// on the Client's pipelined connection (the default Scripter on a
	// *redis.Client), polls the socket before it sleeps: a reply that comes
	// within it spares the caller the scheduler's wake-up, most of the
	// time of a round trip to a nearby Redis. It is tried only while calls
	// come one at a time, with more than one CPU and GOMAXPROCS, on a
	// plain TCP or Unix socket, and ever more seldom while it finds no
	// reply. Default 50µs; negative: never; at most 1ms. See docs/GUIDE.md,
	// Many goroutines.
	ReplySpin time.Duration

	// NoHoldTracking turns off the hold tracker. By default every hold (a
	// lock's, write or read, and a permit) on a *redis.Client, a failover
	// client or a *redis.ClusterClient is watched through Redis's
	// client-side caching on a connection of the client's own per Redis
	// node: any change that ends the hold in Redis (a delete, an expiry, a
	// force unlock by anyone, FLUSHALL, an overwrite, a restart that lost
	// it) ends its Context with ErrLockLost within milliseconds (see
	// docs/GUIDE.md, Losing a lock). Without it a loss is noticed at the
	// next renewal (WatchdogLease/3 later; for a fixed lease, when it runs
	// out), and a waiting reader sees a downgrade that publishes nothing
	// (Redisson's) only at its fallback timer. Default false.
	NoHoldTracking bool

	// ClientID is the client id C of the owner fields C:H. Default: a random
	// UUID v4. Set it only to recognise a process's holds from outside; two
	// live clients must never share one.
	ClientID string

	// Logger, when set, receives what happens away from the caller's
	// calls: renewal failures and losses (Warn), pub/sub reconnects and
	// holds and permits that Close stopped renewing (Info), and
	// acquisitions that gave up (Info when their wait ran out, Warn when
	// Redis did not answer), each with the object's kind, name and owner.
	// Nothing is logged on the way of an acquisition or a release that
	// succeeds. Some records are written while
	// the client holds internal locks: its handler must not call the Client
	// or its locks, and should not block. Default nil: silent.
	Logger *slog.Logger

	// ReplicaAck makes every acquisition (each lock kind, re-entries, read
	// and write holds, fenced tokens, semaphore permits, the multi-lock's
	// members) wait until the replicas of the primary that took it have it
	// (WAIT on the connection that ran the acquire script), so that a
	// failover promoting one of them keeps the hold. When no replica
	// confirms within ReplicaAckTimeout the acquisition is given back and
	// the call fails with ErrNotReplicated. A primary without replicas
	// costs nothing (its count is read with INFO replication and cached,
	// see docs/GUIDE.md, Failover); a replicated one costs one round trip
	// per acquisition. Releases and renewals do not wait. It applies to a
	// *redis.Client (failover clients included) and a *redis.ClusterClient;
	// on a replicated primary the acquire script runs on a connection of
	// that client, not on Options.Scripter. Default ReplicaAckOne.
	ReplicaAck ReplicaAck

	// ReplicaAckTimeout is how long an acquisition waits for the replicas'
	// acknowledgement (ReplicaAck). Default 1s, as Redisson's
	// slavesSyncTimeout.
	ReplicaAckTimeout time.Duration

	// Observer receives the client's events (acquisitions, holds that end,
	// renewals) for metrics and traces; see Observer and the module
	// github.com/lualock/lualock/extra/lualockotel. Default: no funcs, no
	// cost.
	Observer Observer
}

type config struct {
	Options
	publish string // the release scripts' publish argument: publish, spublish or both
	// afterFunc starts the timers of fixed leases (lifetime.expireAt):
	// time.AfterFunc, or a test's recorder.
	afterFunc func(time.Duration, func()) *time.Timer
}

func (o Options) normalize() (config, error) {
	if err := o.normalizeDurations(); err != nil {
		return config{}, err
	}
	switch {
	case o.RenewBatch == 0:
		o.RenewBatch = 500
	case o.RenewBatch < 0:
		return config{}, fmt.Errorf("%w: Options.RenewBatch is %d, want > 0", ErrInvalid, o.RenewBatch)
	}
	switch {
	case o.ReplySpin == 0:
		o.ReplySpin = 50 * time.Microsecond
	case o.ReplySpin < 0:
		o.ReplySpin = 0
	case o.ReplySpin > time.Millisecond:
		return config{}, fmt.Errorf("%w: Options.ReplySpin is %v, want at most 1ms (a longer spin burns the CPU a sleep would leave to others)", ErrInvalid, o.ReplySpin)
	}
	switch {
	case o.SubscriptionLinger == 0:
		o.SubscriptionLinger = 500 * time.Millisecond
	case o.SubscriptionLinger < 0:
		o.SubscriptionLinger = 0
	}
	if err := o.checkReplicaAck(); err != nil {
		return config{}, err
	}
	if o.PubSub < PubSubAuto || o.PubSub > PubSubBoth {
		return config{}, fmt.Errorf("%w: Options.PubSub is %d, want one of the PubSubMode constants", ErrInvalid, int(o.PubSub))
	}
	return config{Options: o, afterFunc: time.AfterFunc}, nil
}

// normalizeDurations sets the durations' defaults and checks their bounds.
func (o *Options) normalizeDurations() error {
	for _, f := range []struct {
		p    *time.Duration
		v    time.Duration
		name string
	}{
		{&o.WatchdogLease, 30 * time.Second, "WatchdogLease"},
		{&o.FairWait, 5 * time.Minute, "FairWait"},
		{&o.MaxWaitTimer, 10 * time.Second, "MaxWaitTimer"},
		{&o.UnlockLatch, 10 * time.Second, "UnlockLatch"},
		{&o.RetryMin, 10 * time.Millisecond, "RetryMin"},
		{&o.RetryMax, time.Second, "RetryMax"},
		{&o.ReplicaAckTimeout, time.Second, "ReplicaAckTimeout"},
	} {
		switch {
		case *f.p == 0:
			*f.p = f.v
		case *f.p < 0:
			return fmt.Errorf("%w: Options.%s is %v, want > 0", ErrInvalid, f.name, *f.p)
		}
	}
	if o.UnlockLatch < time.Millisecond {
		return fmt.Errorf("%w: Options.UnlockLatch is %v, want at least 1ms", ErrInvalid, o.UnlockLatch)
	}
	if o.FairWait < 2*fairMinRetry {
		return fmt.Errorf("%w: Options.FairWait is %v, want at least %v", ErrInvalid, o.FairWait, 2*fairMinRetry)
	}
	if o.WatchdogLease < 3*time.Millisecond {
		return fmt.Errorf("%w: Options.WatchdogLease is %v, want at least 3ms", ErrInvalid, o.WatchdogLease)
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = o.RetryMin
	}
	return nil
}

// checkReplicaAck checks the replica acknowledgement's mode and timeout
// (after normalizeDurations set the timeout's default).
func (o *Options) checkReplicaAck() error {
	if o.ReplicaAck < ReplicaAckOne || o.ReplicaAck > ReplicaAckOff {
		return fmt.Errorf("%w: Options.ReplicaAck is %d, want one of the ReplicaAck constants", ErrInvalid, int(o.ReplicaAck))
	}
	if o.ReplicaAckTimeout < time.Millisecond {
		return fmt.Errorf("%w: Options.ReplicaAckTimeout is %v, want at least 1ms (WAIT counts milliseconds)", ErrInvalid, o.ReplicaAckTimeout)
	}
	return nil
}

// PubSubMode is the kind of pub/sub a Client uses for release messages
// (Options.PubSub). Redisson picks it by version and topology:
//
//   - Redisson before 3.22, on any Redis: PUBLISH/SUBSCRIBE.
//   - Redisson 3.22 and later (4.x included) on a Redis 7 cluster:
//     SPUBLISH/SSUBSCRIBE, sharded pub/sub (3.29 and later call it
//     shardedSubscriptionMode AUTO, the default; setting it OFF goes back to
//     PUBLISH/SUBSCRIBE).
//   - Redisson of any version on a standalone, master-replica or sentinel
//     Redis: PUBLISH/SUBSCRIBE.
//
// A waiter that listens on one kind does not hear releases published on the
// other: it wakes only at its fallback timer (the lock's remaining lease, at
// most Options.MaxWaitTimer), seconds instead of milliseconds.
type PubSubMode int

const (
	// PubSubAuto, the default, does what current Redisson does with its
	// defaults: PubSubSharded on a *redis.ClusterClient, PubSubPlain on
	// any other client, and on a ClusterClient whose options set
	// ClusterSlots, as redis.NewFailoverClusterClient does for a
	// sentinel-managed Redis (Redisson's sentinel mode uses plain pub/sub).
	PubSubAuto PubSubMode = iota
	// PubSubPlain publishes with PUBLISH and listens with SUBSCRIBE, as
	// Redisson before 3.22 does everywhere, and every Redisson version on
	// a standalone or failover Redis.
	PubSubPlain
	// PubSubSharded publishes with SPUBLISH and listens with SSUBSCRIBE
	// (Redis 7 sharded pub/sub), as Redisson 3.22 and later on a Redis 7
	// cluster. On a cluster it takes one pub/sub connection per primary
	// whose slots have waiters, rather than one per client.
	PubSubSharded
	// PubSubBoth publishes every release twice, with PUBLISH then
	// SPUBLISH, and makes each waiter listen on both kinds, so that it
	// serves Redisson clients older and newer than 3.22 at once on one
	// cluster. A lualock waiter then hears each release twice; the second
	// message costs at most one extra acquisition attempt.
	PubSubBoth
)

var pubSubNames = [...]string{PubSubAuto: "auto", PubSubPlain: "plain", PubSubSharded: "sharded", PubSubBoth: "both"}

// String returns the mode's name: auto, plain, sharded or both.
func (m PubSubMode) String() string {
	if m >= 0 && int(m) < len(pubSubNames) {
		return pubSubNames[m]
	}
	return fmt.Sprintf("PubSubMode(%d)", int(m))
}

// MarshalText returns the mode's name, as String.
func (m PubSubMode) MarshalText() ([]byte, error) {
	if m < 0 || int(m) >= len(pubSubNames) {
		return nil, fmt.Errorf("%w: unknown PubSubMode %d", ErrInvalid, int(m))
	}
	return []byte(pubSubNames[m]), nil
}

// UnmarshalText sets m from a name: auto, plain, sharded or both (ASCII
// case ignored). Any other text is ErrInvalid.
func (m *PubSubMode) UnmarshalText(text []byte) error {
	for i, n := range pubSubNames {
		if strings.EqualFold(string(text), n) {
			*m = PubSubMode(i)
			return nil
		}
	}
	return fmt.Errorf("%w: pub/sub mode %q, want auto, plain, sharded or both", ErrInvalid, text)
}

// publishArg is the release scripts' publish argument for a resolved mode.
func (m PubSubMode) publishArg() string {
	switch m {
	case PubSubSharded:
		return "spublish"
	case PubSubBoth:
		return "both"
	default:
		return "publish"
	}
}

// resolve returns the mode that Auto stands for on rdb.
func (m PubSubMode) resolve(rdb redis.UniversalClient) PubSubMode {
	if m != PubSubAuto {
		return m
	}
	// A ClusterClient with its own ClusterSlots is no Redis Cluster as
	// Redisson sees one: NewFailoverClusterClient makes such a client for a
	// sentinel-managed Redis, where Redisson uses plain pub/sub.
	if cc, cluster := rdb.(*redis.ClusterClient); cluster && cc.Options().ClusterSlots == nil {
		return PubSubSharded
	}
	return PubSubPlain
}
