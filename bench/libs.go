package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/extra/lualockrueidis"
)

// Library labels. The family is the first word.
const (
	libLualock      = "lualock"
	libLualockFair  = "lualock (fair)"
	libLualockAP    = "lualock (tuned: Scripter AutoPipeline)"
	libLualockRue   = "lualock (tuned: Scripter rueidis)"
	libLualockPlain = "lualock (Scripter rdb: a call per connection)"
	libLualockRead  = "lualock (read lock)"
	libLualockWrite = "lualock (write lock)"
	libLualockFence = "lualock (fenced)"
	libRedislock    = "redislock (example: LinearBackoff 100ms)"
	libRedislockT   = "redislock (tuned: LinearBackoff 1ms)"
	libRedsync      = "redsync (defaults)"
	libRedsyncT     = "redsync (tuned: WithRetryDelay 1ms, WithTries max)"
	libRueidis      = "rueidislock (defaults)"
	libRueidisT     = "rueidislock (tuned: KeyMajority 1, NoLoopTracking)"
	libPing         = "go-redis PING (ceiling)"
	libMutex        = "sync.Mutex (ideal, in-process)"
	libRedislockEm  = "redislock (emulated: Refresh per lock)"
	libRedsyncEm    = "redsync (emulated: Extend per lock)"
	libRedislockDoc = "redislock"
	libRedsyncDoc   = "redsync"
)

// variant is one library with one setting: a row of a table.
type variant struct {
	name string
	peer bool // a library lualock is compared with (not lualock, not a ceiling)
	open func(e *env, o openOpts) (instance, error)
}

// openOpts are the per-workload settings of an instance.
type openOpts struct {
	name    string        // CLIENT SETNAME of every connection (mustOpen picks one when empty)
	ttl     time.Duration // lease of locks that have no auto-renewal (redislock, redsync)
	wdLease time.Duration // lualock WatchdogLease; rueidislock KeyValidity; 0: library default
}

// instance is one library client, made fresh for every run.
type instance interface {
	newMutex(key string) mutex
	calls() int64 // requests sent to Redis so far, counted on the client side
	close()
}

// mutex is a lock handle of one key for one goroutine.
type mutex interface {
	lock(ctx context.Context) error
	tryLock(ctx context.Context) (bool, error)
	unlock(ctx context.Context) error
	// renew extends a held lock by hand (libraries without auto-renewal);
	// errNoRenew for those that renew by themselves.
	renew(ctx context.Context) error
	// lost reports a hold the library knows it lost.
	lost() bool
}

var errNoRenew = errors.New("renews by itself")

// giveUps counts Lock calls that returned an error other than the caller's
// context ending (redsync's "tries exhausted"): the adapter calls again.
type giveUps struct{ n atomic.Int64 }

// ---- go-redis with a request counter ----

// countHook counts the requests a go-redis client sends, and by command
// name (as INFO commandstats spells it) when byName is set.
type countHook struct {
	n      *atomic.Int64
	byName *nameCounts
}

func (h countHook) count(cmd redis.Cmder) {
	h.n.Add(1)
	if h.byName != nil {
		h.byName.add(statName(cmd.Args()))
	}
}

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// nameCounts counts commands by name.
type nameCounts struct {
	mu sync.Mutex
	m  map[string]int64
}

func (c *nameCounts) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int64{}
	}
	c.m[name]++
}

func (c *nameCounts) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// containerCommands are the commands whose subcommand INFO commandstats
// counts separately, as "client|list".
var containerCommands = map[string]bool{
	"acl": true, "client": true, "cluster": true, "command": true, "config": true, "function": true,
	"latency": true, "memory": true, "module": true, "object": true, "pubsub": true, "script": true,
	"slowlog": true, "xinfo": true,
}

// statName is the name INFO commandstats counts a command under.
func statName(args []any) string {
	if len(args) == 0 {
		return ""
	}
	name := strings.ToLower(fmt.Sprint(args[0]))
	if containerCommands[name] && len(args) > 1 {
		name += "|" + strings.ToLower(fmt.Sprint(args[1]))
	}
	return name
}

// goRedis returns a go-redis client with the library defaults (pool of
// 10 × GOMAXPROCS connections), a client name and a request counter.
func goRedis(addr, name string) (*redis.Client, *atomic.Int64) {
	n := new(atomic.Int64)
	c := redis.NewClient(&redis.Options{Addr: addr, ClientName: name})
	c.AddHook(countHook{n: n})
	return c, n
}

// ---- lualock ----

type lualockInst struct {
	rdb  *redis.Client
	rc   rueidis.Client // the Scripter's client (openLualockRueidis), closed after c
	c    *lualock.Client
	n    *atomic.Int64
	fair bool
	kind string // "": NewLock or NewFairLock (fair); "read", "write": a read-write lock's side; "fenced"
}

// openLualockKind opens lualock with its defaults, whose mutexes are the
// read or the write lock of a read-write lock, or a fenced lock.
func openLualockKind(kind string) func(*env, openOpts) (instance, error) {
	return func(e *env, o openOpts) (instance, error) {
		i, err := openLualock(false, false)(e, o)
		if err != nil {
			return nil, err
		}
		i.(*lualockInst).kind = kind
		return i, nil
	}
}

// openLualock opens lualock with its defaults; with autoPipeline, its
// scripts go through go-redis's auto-pipeliner (Options.Scripter), which
// belongs to rdb and stops when close closes rdb.
func openLualock(fair, autoPipeline bool) func(*env, openOpts) (instance, error) {
	return func(e *env, o openOpts) (instance, error) {
		rdb, n := goRedis(e.cfg.addr, o.name)
		opts := lualock.Options{WatchdogLease: o.wdLease, ReplicaAck: e.cfg.ack}
		if autoPipeline {
			ap, err := rdb.AutoPipeline()
			if err != nil {
				rdb.Close()
				return nil, err
			}
			opts.Scripter = ap
		}
		c, err := lualock.New(rdb, opts)
		if err != nil {
			rdb.Close()
			return nil, err
		}
		return &lualockInst{rdb: rdb, c: c, n: n, fair: fair}, nil
	}
}

// openLualockPlain opens lualock with its scripts sent by its go-redis
// client itself (Options.Scripter = rdb): one call per pooled
// connection, as before the default pipelined them.
func openLualockPlain(e *env, o openOpts) (instance, error) {
	rdb, n := goRedis(e.cfg.addr, o.name)
	opts := lualock.Options{WatchdogLease: o.wdLease, ReplicaAck: e.cfg.ack, Scripter: rdb}
	c, err := lualock.New(rdb, opts)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &lualockInst{rdb: rdb, c: c, n: n}, nil
}

// openLualockRueidis opens lualock with its scripts sent by a rueidis
// client (extra/lualockrueidis) on the same Redis, with rueidis's defaults;
// the requests of both clients are counted together.
func openLualockRueidis(e *env, o openOpts) (instance, error) {
	rdb, n := goRedis(e.cfg.addr, o.name)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{e.cfg.addr}, ClientName: o.name})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	opts := lualock.Options{WatchdogLease: o.wdLease, ReplicaAck: e.cfg.ack,
		Scripter: lualockrueidis.Scripter(countingRueidis{Client: rc, n: n})}
	c, err := lualock.New(rdb, opts)
	if err != nil {
		rc.Close()
		rdb.Close()
		return nil, err
	}
	return &lualockInst{rdb: rdb, rc: rc, c: c, n: n}, nil
}

func (i *lualockInst) newMutex(key string) mutex {
	switch i.kind {
	case "read":
		return &lualockMutex{l: i.c.NewReadWriteLock(key).ReadLock()}
	case "write":
		return &lualockMutex{l: i.c.NewReadWriteLock(key).WriteLock()}
	case "fenced":
		return &lualockMutex{l: i.c.NewFencedLock(key).Handle()}
	}
	if i.fair {
		return &lualockMutex{l: i.c.NewFairLock(key)}
	}
	return &lualockMutex{l: i.c.NewLock(key)}
}
func (i *lualockInst) calls() int64 { return i.n.Load() }

// exclusionProber is implemented by an instance whose holds admit other
// holders of the same kind (read locks): newProbe returns a mutex that
// the holds must exclude.
type exclusionProber interface{ newProbe(key string) mutex }

// newProbe: a read hold excludes a writer; every other kind, itself.
func (i *lualockInst) newProbe(key string) mutex {
	if i.kind == "read" {
		return &lualockMutex{l: i.c.NewReadWriteLock(key).WriteLock()}
	}
	return i.newMutex(key)
}
func (i *lualockInst) close() {
	_ = i.c.Close()
	if i.rc != nil {
		i.rc.Close()
	}
	_ = i.rdb.Close()
}

type lualockMutex struct{ l *lualock.Lock }

func (m *lualockMutex) lock(ctx context.Context) error { return m.l.Lock(ctx) }
func (m *lualockMutex) tryLock(ctx context.Context) (bool, error) {
	err := m.l.TryLock(ctx, 0)
	if errors.Is(err, lualock.ErrNotObtained) {
		return false, nil
	}
	return err == nil, err
}
func (m *lualockMutex) unlock(ctx context.Context) error { return m.l.Unlock(ctx) }
func (m *lualockMutex) renew(context.Context) error      { return errNoRenew }
func (m *lualockMutex) lost() bool {
	select {
	case <-m.l.Done():
		return true
	default:
		return false
	}
}

// ---- bsm/redislock ----

type redislockInst struct {
	rdb   *redis.Client
	c     *redislock.Client
	n     *atomic.Int64
	retry func() redislock.RetryStrategy
	ttl   time.Duration
}

func openRedislock(retry func() redislock.RetryStrategy) func(*env, openOpts) (instance, error) {
	return func(e *env, o openOpts) (instance, error) {
		rdb, n := goRedis(e.cfg.addr, o.name)
		ttl := o.ttl
		if ttl == 0 {
			ttl = 30 * time.Second
		}
		return &redislockInst{rdb: rdb, c: redislock.New(rdb), n: n, retry: retry, ttl: ttl}, nil
	}
}

func (i *redislockInst) newMutex(key string) mutex { return &redislockMutex{i: i, key: key} }
func (i *redislockInst) calls() int64              { return i.n.Load() }
func (i *redislockInst) close()                    { _ = i.rdb.Close() }

type redislockMutex struct {
	i      *redislockInst
	key    string
	lk     *redislock.Lock
	failed atomic.Bool
}

func (m *redislockMutex) lock(ctx context.Context) error {
	// Obtain retries until ctx ends (callers pass a deadline; without one
	// redislock would stop after the TTL).
	lk, err := m.i.c.Obtain(ctx, m.key, m.i.ttl, &redislock.Options{RetryStrategy: m.i.retry()})
	if err != nil {
		return err
	}
	m.lk = lk
	m.failed.Store(false)
	return nil
}
func (m *redislockMutex) tryLock(ctx context.Context) (bool, error) {
	lk, err := m.i.c.Obtain(ctx, m.key, m.i.ttl, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.lk = lk
	return true, nil
}
func (m *redislockMutex) unlock(ctx context.Context) error {
	err := m.lk.Release(ctx)
	m.lk = nil
	return err
}
func (m *redislockMutex) renew(ctx context.Context) error {
	err := m.lk.Refresh(ctx, m.i.ttl, nil)
	if err != nil {
		m.failed.Store(true)
	}
	return err
}
func (m *redislockMutex) lost() bool { return m.failed.Load() }

// ---- go-redsync/redsync ----

type redsyncInst struct {
	rdb  *redis.Client
	rs   *redsync.Redsync
	n    *atomic.Int64
	opts []redsync.Option
	gu   *giveUps
}

func openRedsync(tuned bool) func(*env, openOpts) (instance, error) {
	return func(e *env, o openOpts) (instance, error) {
		rdb, n := goRedis(e.cfg.addr, o.name)
		var opts []redsync.Option
		if o.ttl > 0 {
			opts = append(opts, redsync.WithExpiry(o.ttl))
		}
		if tuned {
			opts = append(opts, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(math.MaxInt32))
		}
		return &redsyncInst{rdb: rdb, rs: redsync.New(redsyncgoredis.NewPool(rdb)), n: n, opts: opts, gu: &giveUps{}}, nil
	}
}

func (i *redsyncInst) newMutex(key string) mutex {
	return &redsyncMutex{m: i.rs.NewMutex(key, i.opts...), gu: i.gu}
}
func (i *redsyncInst) calls() int64 { return i.n.Load() }
func (i *redsyncInst) close()       { _ = i.rdb.Close() }

type redsyncMutex struct {
	m      *redsync.Mutex
	gu     *giveUps
	failed atomic.Bool
}

func (m *redsyncMutex) lock(ctx context.Context) error {
	for {
		err := m.m.LockContext(ctx)
		if err == nil {
			m.failed.Store(false)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Tries exhausted (32 by default, 50–250 ms apart): its README says
		// to call Lock again.
		m.gu.n.Add(1)
	}
}
func (m *redsyncMutex) tryLock(ctx context.Context) (bool, error) {
	err := m.m.TryLockContext(ctx)
	if err == nil {
		return true, nil
	}
	var taken *redsync.ErrTaken
	if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
		return false, nil
	}
	return false, err
}
func (m *redsyncMutex) unlock(ctx context.Context) error {
	ok, err := m.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock failed")
	}
	return err
}
func (m *redsyncMutex) renew(ctx context.Context) error {
	ok, err := m.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: extend failed")
	}
	if err != nil {
		m.failed.Store(true)
	}
	return err
}
func (m *redsyncMutex) lost() bool { return m.failed.Load() }

// ---- redis/rueidis/rueidislock ----

// countingRueidis counts the requests rueidislock sends through its client.
type countingRueidis struct {
	rueidis.Client
	n *atomic.Int64
}

func (c countingRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}
func (c countingRueidis) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(int64(len(multi)))
	return c.Client.DoMulti(ctx, multi...)
}
func (c countingRueidis) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoCache(ctx, cmd, ttl)
}
func (c countingRueidis) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.n.Add(int64(len(multi)))
	return c.Client.DoMultiCache(ctx, multi...)
}

type rueidisInst struct {
	l rueidislock.Locker
	n *atomic.Int64
}

func openRueidis(tuned bool) func(*env, openOpts) (instance, error) {
	return func(e *env, o openOpts) (instance, error) {
		n := new(atomic.Int64)
		opt := rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{e.cfg.addr}, ClientName: o.name},
			KeyValidity:  o.wdLease,
			ClientBuilder: func(co rueidis.ClientOption) (rueidis.Client, error) {
				c, err := rueidis.NewClient(co)
				if err != nil {
					return nil, err
				}
				return countingRueidis{Client: c, n: n}, nil
			},
		}
		if tuned {
			opt.KeyMajority = 1
			// NOLOOP needs Redis 7.0.5 or later (rueidislock's doc).
			if versionAtLeast(e.redisVersion, 7, 0, 5) {
				opt.NoLoopTracking = true
			} else {
				e.note("setup", "%s: Redis %s is older than 7.0.5, NoLoopTracking left off", libRueidisT, e.redisVersion)
			}
		}
		l, err := rueidislock.NewLocker(opt)
		if err != nil {
			return nil, err
		}
		return &rueidisInst{l: l, n: n}, nil
	}
}

func (i *rueidisInst) newMutex(key string) mutex { return &rueidisMutex{i: i, key: key} }
func (i *rueidisInst) calls() int64              { return i.n.Load() }
func (i *rueidisInst) close()                    { i.l.Close() }

type rueidisMutex struct {
	i      *rueidisInst
	key    string
	ctx    context.Context
	cancel context.CancelFunc
}

// lock takes the lock; it lives until unlock or until ctx ends (rueidislock
// derives the hold's context from the waiting one: the bench's per-call
// contexts are only cancelled when a call overruns, see calls.do).
func (m *rueidisMutex) lock(ctx context.Context) error {
	lctx, cancel, err := m.i.l.WithContext(ctx, m.key)
	if err != nil {
		return err
	}
	m.ctx, m.cancel = lctx, cancel
	return nil
}
func (m *rueidisMutex) tryLock(ctx context.Context) (bool, error) {
	lctx, cancel, err := m.i.l.TryWithContext(ctx, m.key)
	if errors.Is(err, rueidislock.ErrNotLocked) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.ctx, m.cancel = lctx, cancel
	return true, nil
}
func (m *rueidisMutex) unlock(context.Context) error {
	if m.cancel == nil {
		return errors.New("rueidislock: not held")
	}
	m.cancel() // returns once every key is released
	m.cancel = nil
	return nil
}
func (m *rueidisMutex) renew(context.Context) error { return errNoRenew }
func (m *rueidisMutex) lost() bool                  { return m.ctx != nil && m.ctx.Err() != nil }

// ---- sync.Mutex, the in-process ideal ----

type mutexInst struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

func openMutex(*env, openOpts) (instance, error) { return &mutexInst{m: map[string]*sync.Mutex{}}, nil }

func (i *mutexInst) newMutex(key string) mutex {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.m[key] == nil {
		i.m[key] = new(sync.Mutex)
	}
	return syncMutex{i.m[key]}
}
func (i *mutexInst) calls() int64 { return 0 }
func (i *mutexInst) close()       {}

type syncMutex struct{ m *sync.Mutex }

func (m syncMutex) lock(context.Context) error            { m.m.Lock(); return nil }
func (m syncMutex) tryLock(context.Context) (bool, error) { return m.m.TryLock(), nil }
func (m syncMutex) unlock(context.Context) error          { m.m.Unlock(); return nil }
func (m syncMutex) renew(context.Context) error           { return errNoRenew }
func (m syncMutex) lost() bool                            { return false }

// ---- go-redis PING, the uncontended ceiling ----

type pingInst struct {
	rdb *redis.Client
	n   *atomic.Int64
}

func openPing(e *env, o openOpts) (instance, error) {
	rdb, n := goRedis(e.cfg.addr, o.name)
	return &pingInst{rdb: rdb, n: n}, nil
}

func (i *pingInst) newMutex(string) mutex { return pingMutex{i.rdb} }
func (i *pingInst) calls() int64          { return i.n.Load() }
func (i *pingInst) close()                { _ = i.rdb.Close() }

// pingMutex's lock is one PING and its unlock nothing: one op is one round trip.
type pingMutex struct{ rdb *redis.Client }

func (m pingMutex) lock(ctx context.Context) error            { return m.rdb.Ping(ctx).Err() }
func (m pingMutex) tryLock(ctx context.Context) (bool, error) { return true, m.lock(ctx) }
func (m pingMutex) unlock(context.Context) error              { return nil }
func (m pingMutex) renew(context.Context) error               { return errNoRenew }
func (m pingMutex) lost() bool                                { return false }

// ---- the rows of each workload ----

var (
	vLualock     = variant{libLualock, false, openLualock(false, false)}
	vLualockFair = variant{libLualockFair, false, openLualock(true, false)}
	vLualockAP   = variant{libLualockAP, false, openLualock(false, true)}
	vLualockRue  = variant{libLualockRue, false, openLualockRueidis}
	vLualockPln  = variant{libLualockPlain, false, openLualockPlain}
	vLualockRead = variant{libLualockRead, false, openLualockKind("read")}
	vLualockWrt  = variant{libLualockWrite, false, openLualockKind("write")}
	vLualockFnc  = variant{libLualockFence, false, openLualockKind("fenced")}
	vRedislock   = variant{libRedislock, true, openRedislock(func() redislock.RetryStrategy { return redislock.LinearBackoff(100 * time.Millisecond) })}
	vRedislockT  = variant{libRedislockT, true, openRedislock(func() redislock.RetryStrategy { return redislock.LinearBackoff(time.Millisecond) })}
	vRedsync     = variant{libRedsync, true, openRedsync(false)}
	vRedsyncT    = variant{libRedsyncT, true, openRedsync(true)}
	vRueidis     = variant{libRueidis, true, openRueidis(false)}
	vRueidisT    = variant{libRueidisT, true, openRueidis(true)}
	vPing        = variant{libPing, false, openPing}
	vMutex       = variant{libMutex, false, openMutex}
	vRedislockU  = variant{libRedislockDoc, true, vRedislock.open}
	vRedsyncU    = variant{libRedsyncDoc, true, vRedsync.open}
	vRedislockEm = variant{libRedislockEm, true, vRedislock.open}
	vRedsyncEm   = variant{libRedsyncEm, true, vRedsync.open}
)

// Uncontended locks never retry, so the retry settings do not matter there;
// rueidislock's KeyMajority does (3 keys by default, 1 tuned).
func uncontendedVariants() []variant {
	return []variant{vPing, vLualock, vLualockAP, vLualockRue, vLualockPln, vLualockFair, vLualockRead, vLualockWrt, vLualockFnc, vLualockSem, vRedislockU, vRedsyncU, vRueidis, vRueidisT}
}

func contendedVariants() []variant {
	return []variant{vMutex, vLualock, vLualockAP, vLualockPln, vLualockFair, vLualockSem, vRedislock, vRedislockT, vRedsync, vRedsyncT, vRueidis, vRueidisT}
}

func waitingVariants() []variant {
	return []variant{vLualock, vLualockFair, vRedislock, vRedsync, vRueidis}
}

func watchdogVariants() []variant {
	return []variant{vLualock, vRueidis, vRueidisT, vRedislockEm, vRedsyncEm}
}

// mustOpen opens a fresh client of v; its connections are named o.name, or
// a name of the bench's own when o.name is empty.
func (v variant) mustOpen(e *env, o openOpts) instance {
	if o.name == "" {
		o.name = e.clientName()
	}
	i, err := v.open(e, o)
	if err != nil {
		fatalf("open %s: %v", v.name, err)
	}
	return i
}

// versionAtLeast compares a "major.minor.patch" version.
func versionAtLeast(v string, want ...int) bool {
	parts := strings.Split(v, ".")
	for i, w := range want {
		if i >= len(parts) {
			return false
		}
		n, _ := strconv.Atoi(parts[i])
		if n != w {
			return n > w
		}
	}
	return true
}
