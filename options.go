package lualock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options tunes a Client. The zero value means every default; each field
// says its own.
type Options struct {
	// WatchdogLease is the lease of locks taken without one (Lock, TryLock):
	// the watchdog renews it every WatchdogLease/3 while the lock is held.
	// Default 30s, as Redisson's lockWatchdogTimeout.
	WatchdogLease time.Duration

	// FairWait is the fair lock's wait budget per waiter: how long a queued
	// waiter may go without asking again before the others purge it from
	// the queue, and how long a dead waiter can hold the queue up. Live
	// waiters ask again at least every FairWait/2. Default 5m, as Redisson;
	// at least 500ms. NewFairLockWait sets it for one lock. Every client of
	// one fair lock, Redisson's included (its threadWaitTime), must use the
	// same budget: a handoff takes one budget, the caller's, off every
	// waiter's deadline.
	FairWait time.Duration

	// MaxWaitTimer caps the fallback timer of a reentrant lock's waiters: a
	// waiter that hears no release message retries after the lock's
	// remaining lease or after this, whichever comes first, so a lost
	// message never hangs it. (A fair waiter's timer is capped by FairWait/2
	// instead; see NewFairLock.) Default 10s.
	MaxWaitTimer time.Duration

	// UnlockLatch is how long Redis keeps the outcome of a release under its
	// request id, so that a release sent again after a lost reply replays it
	// instead of releasing twice. Past the latch the release still is not
	// applied twice (it names the hold count it releases from), but the
	// resend of a last hold's release then reports ErrNotHeld. Keep it above
	// the time go-redis may take to resend a command (ReadTimeout x
	// (MaxRetries+1), 12s with go-redis's defaults at worst). Default 10s.
	UnlockLatch time.Duration

	// RetryMin and RetryMax bound the jittered exponential backoff between
	// attempts after a transient Redis error (connection reset, LOADING,
	// TRYAGAIN, CLUSTERDOWN, READONLY). Defaults 10ms and 1s.
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

	// ShardedPubSub makes releases SPUBLISH and waiters SSUBSCRIBE (Redis 7
	// sharded pub/sub), for clusters where Redisson is set up the same way.
	// On a cluster it needs one pub/sub connection per primary whose slots
	// have waiters, rather than one per client. Default false: PUBLISH and
	// SUBSCRIBE.
	ShardedPubSub bool

	// Scripter, when set, runs the lock scripts (acquire, release, leave,
	// force release, status) in place of the redis client given to New. It
	// is meant for a client-side auto-pipeliner such as go-redis's
	// rdb.AutoPipeline() (go-redis 9.22 or later, experimental there),
	// which sends the calls of concurrent goroutines to Redis together:
	// with 32 goroutines locking their own locks it raised throughput 1.2
	// to 1.7 times in this project's benchmarks, while with one goroutine,
	// and when a lock is handed over between waiters, it was slower (see
	// the README, Benchmarks). It must reach the same Redis deployment as
	// that client, and must not be a pipeline (redis.Pipeliner).
	//
	// go-redis's auto-pipeliner does not honour a command's context once
	// the command is queued: with it, a call waits for Redis's answer up to
	// the client's ReadTimeout (times its retries) whatever the context or
	// TryLock's wait say, ContextTimeoutEnabled or not. The lost-lock
	// signal does not depend on it: the watchdog's renewals, like pub/sub,
	// still go through the redis client. Every script is safe to send
	// twice (a release is latched by request id, an acquisition names the
	// hold count it leaves), so a Scripter that resends a batch after a
	// lost reply does not release or count a hold twice. The Client does
	// not close it. Default nil: the redis client runs them.
	Scripter redis.Scripter

	// ClientID is the client id C of the owner fields C:H. Default: a random
	// UUID v4. Set it only to recognise a process's holds from outside; two
	// live clients must never share one.
	ClientID string

	// Logger, when set, receives what happens away from the caller's
	// calls: renewal failures and lost locks (Warn), pub/sub reconnects and
	// holds that Close stopped renewing (Info), and acquisitions that gave
	// up (Info when their wait ran out, Warn when Redis did not answer),
	// each with the lock's name and owner field. Nothing is logged on the
	// way of a lock or unlock that succeeds. Default nil: silent.
	Logger *slog.Logger

	// Observer receives the client's events (acquisitions, holds that end,
	// renewals) for metrics and traces; see Observer and the module
	// github.com/lualock/lualock/extra/lualockotel. Default: no funcs, no
	// cost.
	Observer Observer
}

type config struct {
	Options
	renewEvery time.Duration
	publish    string
}

func (o Options) normalize() (config, error) {
	def := func(d *time.Duration, v time.Duration, name string) error {
		switch {
		case *d == 0:
			*d = v
		case *d < 0:
			return fmt.Errorf("%w: Options.%s is %v, want > 0", ErrInvalid, name, *d)
		}
		return nil
	}
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
	} {
		if err := def(f.p, f.v, f.name); err != nil {
			return config{}, err
		}
	}
	if o.UnlockLatch < time.Millisecond {
		return config{}, fmt.Errorf("%w: Options.UnlockLatch is %v, want at least 1ms", ErrInvalid, o.UnlockLatch)
	}
	if o.FairWait < 2*fairMinRetry {
		return config{}, fmt.Errorf("%w: Options.FairWait is %v, want at least %v", ErrInvalid, o.FairWait, 2*fairMinRetry)
	}
	if o.WatchdogLease < 3*time.Millisecond {
		return config{}, fmt.Errorf("%w: Options.WatchdogLease is %v, want at least 3ms", ErrInvalid, o.WatchdogLease)
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = o.RetryMin
	}
	switch {
	case o.RenewBatch == 0:
		o.RenewBatch = 500
	case o.RenewBatch < 0:
		return config{}, fmt.Errorf("%w: Options.RenewBatch is %d, want > 0", ErrInvalid, o.RenewBatch)
	}
	switch {
	case o.SubscriptionLinger == 0:
		o.SubscriptionLinger = 500 * time.Millisecond
	case o.SubscriptionLinger < 0:
		o.SubscriptionLinger = 0
	}
	c := config{Options: o, renewEvery: o.WatchdogLease / 3, publish: "publish"}
	if o.ShardedPubSub {
		c.publish = "spublish"
	}
	return c, nil
}
