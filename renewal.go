package lualock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/keys"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/renew"
)

// lockRenewal is how the watchdog renews a reentrant or fair lock held
// without a lease: lua/lock_renew.lua, many locks of one slot per call.
var lockRenewal = &renew.Spec{
	Name:   "lock_renew",
	Script: generated.LockRenewScript,
	Cmd: func(ctx context.Context, p redis.Pipeliner, keys, fields []string, lease time.Duration, rearm bool) *redis.Cmd {
		return generated.LockRenewCmd(ctx, p, generated.LockRenewKeys{Locks: keys},
			generated.LockRenewArgs{LeaseMS: lease.Milliseconds(), Rearm: rearm, Fields: fields})
	},
	Result: generated.LockRenewResult,
}

// newWatchdog starts the client's watchdog: it renews the holds taken
// without a lease every WatchdogLease/3, in calls of up to RenewBatch locks
// (per slot on a cluster), on the hold tracker's connections when they are
// up (trackRelay, holdwatch.go): behind Sentinel only on a connection to the
// primary go-redis uses (primaryGate), never for a failover cluster client
// (relayable). The tracker is made first.
func newWatchdog(c *Client) *renew.Watchdog {
	cfg := renew.Config{Lease: c.cfg.WatchdogLease, Batch: c.cfg.RenewBatch}
	switch rdb, single := c.rdb.(*redis.Client); {
	case c.track == nil:
	case single && rdb.Options().Addr == failoverAddr:
		cfg.Relay = trackRelay{c.track, c.cfg.WatchdogLease, &primaryGate{rdb: rdb}}
	case relayable(c.rdb):
		cfg.Relay = trackRelay{c.track, c.cfg.WatchdogLease, nil}
	}
	if _, ok := c.rdb.(*redis.ClusterClient); ok {
		cfg.Slot = keys.Slot
	}
	if c.cfg.Observer.Renew != nil || c.cfg.Logger != nil {
		cfg.OnRenew = c.renewCalled
	}
	w, err := renew.New(c.rdb, cfg)
	if err != nil {
		panic(err) // normalize checked both: a positive lease, a positive batch
	}
	return w
}

// relayable reports whether the watchdog's renewals may take the hold
// tracker's connections as they are: not behind Sentinel. go-redis's
// failover clients drop their connections when Sentinel switches the
// primary; the tracker's connection may stay up to the old primary, where
// a renewal cut off from the new one would still answer 1 while the new
// primary's copy of the lock runs out, and the holder would never be
// told (a failover client's renewals are relayed through primaryGate,
// which checks the server's run_id first). A failover client is a
// redis.Client whose Addr is "FailoverClient" (go-redis's mark); a
// failover cluster client, a redis.ClusterClient whose slots come from
// ClusterSlots.
func relayable(rdb redis.UniversalClient) bool {
	switch rdb := rdb.(type) {
	case *redis.Client:
		return rdb.Options().Addr != failoverAddr
	case *redis.ClusterClient:
		return rdb.Options().ClusterSlots == nil
	}
	return true
}

// failoverAddr is the Addr go-redis gives the options of a failover
// (Sentinel) client.
const failoverAddr = "FailoverClient"

// renew puts hold gen, whose lease was set at start or later, under the
// watchdog with its protocol's renewal spec (holdEnv), with the handle's
// watchdog entry (one per handle, reused by its holds: no allocation per
// hold). It returns false when the client has closed. It runs under the op
// lock and h.mu.
func (l *Lock) renew(gen uint64, start time.Time) (watchdogEntry, bool) {
	if l.entryEnd == nil {
		l.entryEnd = l.entryEnded // once per handle
	}
	if !l.c.wd.Add(&l.entry, renew.Target{Spec: l.p.renewal, Key: l.name, Field: l.countField()}, gen, start, l.entryEnd) {
		return nil, false
	}
	return &l.entry, true
}

// entryEnded ends hold gen as its watchdog entry ended.
func (l *Lock) entryEnded(gen uint64, end renew.End) {
	switch end {
	case renew.Gone:
		l.h.lose(gen, fmt.Errorf("%w: %w", ErrLockLost, errLostGone))
	case renew.Expired:
		l.h.expire(gen, fmt.Errorf("%w: %w", ErrLockLost, errLostRenewalsFailed))
	case renew.Closed:
		l.h.end(gen, fmt.Errorf("%w: the watchdog stopped renewing the lock", ErrClosed))
	}
}
