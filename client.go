package lualock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/renew"
	"github.com/lualock/lualock/internal/track"
	"github.com/lualock/lualock/internal/wake"
	"github.com/lualock/lualock/luart"
)

// Client makes locks on one Redis deployment. It owns the watchdog that
// renews held locks, the wake-up hub whose pub/sub connections (one, or
// with sharded pub/sub on a cluster one per primary with waiters) wake
// waiters, each with its reader and a sender of subscriptions while some
// are queued, and the background clean-ups. Close stops them all.
//
// A Client is safe for concurrent use. Create one per process (or per Redis
// deployment) and share it: its id is part of every owner field.
type Client struct {
	rdb     redis.UniversalClient
	env     *scriptEnv // the scripters every protocol runs its scripts on, and their settings
	cfg     config
	id      string
	holders atomic.Int64  // last holder id handed out
	reqs    atomic.Uint64 // last unlock request number
	closing chan struct{} // closed by Close
	done    chan struct{} // closed when Close has stopped everything
	once    sync.Once
	wd      *renew.Watchdog
	ctx     context.Context // cancelled by Close: ends background calls in flight
	cancel  context.CancelFunc
	hub     *wake.Hub      // wakes waiters (pub/sub)
	track   *track.Tracker // watches the holds (nil: Options.NoHoldTracking)
	ack     *replicaAck    // replica acknowledgement; nil when off
	latches *latchSweeper  // deletes the latches of releases that got their reply
	batch   *batcher       // sends the scripts on a UniversalClient of another kind
	piped   *pipeScripter  // sends the scripts on a *redis.Client, unless Options.Scripter is set
	kw      keyWatches     // change watches of waiters' keys (holdwatch.go)
	bgMu    sync.Mutex
	bgDone  bool           // Close has waited for the background work
	bg      sync.WaitGroup // clean-up goroutines and acquisitions in flight
}

// New returns a Client on rdb, which may be a *redis.Client, a
// *redis.ClusterClient or a failover client (Redis 7.0 or later). New sends
// nothing to Redis. It returns ErrInvalid for a nil rdb, a *redis.Ring (its
// pub/sub binds to one shard) or a bad option (a pipeline as
// Options.Scripter among them).
//
// Set ContextTimeoutEnabled in rdb's options: without it go-redis ignores
// the deadlines of contexts while it waits for a reply, so on a Redis that
// stops answering a call lasts its ReadTimeout (3s by default) whatever the
// context or TryLock's wait say. The lost-lock signal does not depend on
// it: a hold is reported lost when its lease runs out unrenewed, even while
// a renewal call hangs.
func New(rdb redis.UniversalClient, opts Options) (*Client, error) {
	if rdb == nil || isNilPointer(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalid)
	}
	if _, ok := rdb.(*redis.Ring); ok {
		// A Ring's pub/sub connection binds to one shard and would miss the
		// releases published on the others.
		return nil, fmt.Errorf("%w: *redis.Ring is not supported (its pub/sub binds to one shard); use a Client, a failover client or a ClusterClient", ErrInvalid)
	}
	cfg, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	var batch *batcher
	var piped *pipeScripter
	var scripts redis.Scripter
	if s := cfg.Scripter; s == nil {
		switch r := rdb.(type) {
		case *redis.ClusterClient:
			// A cluster pipeline waits for its slowest node: a node that
			// stops answering would hold up the calls to the others.
			scripts = rdb
		case *redis.Client:
			if pipeable(r) {
				piped = newPipeScripter(r, cfg.ReplySpin)
				scripts = piped
				break
			}
			batch = Batched(rdb).(*batcher)
			scripts = batch
		default:
			batch = Batched(rdb).(*batcher)
			scripts = batch
		}
	} else {
		if isNilPointer(s) {
			return nil, fmt.Errorf("%w: Options.Scripter is a nil %T", ErrInvalid, s)
		}
		if _, ok := s.(redis.Pipeliner); ok {
			// A pipeline sends nothing until Exec: every call would fail.
			return nil, fmt.Errorf("%w: Options.Scripter is a pipeline (%T); give a client or an auto-pipeliner", ErrInvalid, s)
		}
		scripts = s
	}
	cfg.PubSub = cfg.PubSub.resolve(rdb)
	cfg.publish = cfg.PubSub.publishArg()
	id := cfg.ClientID
	if id == "" {
		if id, err = uuid4(); err != nil {
			return nil, fmt.Errorf("lualock: client id: %w", err)
		}
	}
	c := &Client{rdb: rdb, cfg: cfg, id: id, batch: batch, piped: piped, closing: make(chan struct{}), done: make(chan struct{})}
	acquire := scripts
	if c.ack = newReplicaAck(c); c.ack != nil {
		// An acquire script of a replicated primary runs on the
		// attempt's pinned connection, which WAIT follows (replica.go).
		acquire = &ackScripter{Scripter: scripts, r: c.ack}
	}
	c.env = &scriptEnv{
		// The acquisition loop retries transient errors itself, with its
		// own backoff inside the caller's wait: the scripts it sends go
		// once per attempt, with no retry of luart's under it.
		scripts: luart.WithRetry(acquire, luart.Retry{Attempts: 1}),
		// The calls no loop of the runtime retries (release, force
		// release, leave, status) keep luagen's default policy.
		calls:   luart.WithRetry(scripts, luart.DefaultRetry()),
		publish: cfg.publish,
		latchMS: cfg.UnlockLatch.Milliseconds(),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.track = newTracker(c)
	c.wd = newWatchdog(c) // renews on the tracker's connections
	c.hub = newHub(c)
	c.latches = newLatchSweeper(rdb)
	return c, nil
}

// ID returns the client id C, the first part of this client's owner fields.
func (c *Client) ID() string { return c.id }

// Close stops the watchdog and the pub/sub listener, wakes every waiter of
// this client with ErrClosed and waits for its goroutines to exit and for
// the acquisitions in flight to end (a fair waiter it woke has left the
// queue when Close returns). It does
// not unlock held locks. Holds under the watchdog stop being renewed and
// expire after their lease; their Context is cancelled with ErrClosed. Holds
// with a fixed lease stay valid until it runs out, when their Context ends
// (cause ErrNotHeld). Close does not close the redis client. It returns
// the first error of closing a pub/sub connection, if any. Calling it again
// waits until the first call is done and returns nil.
func (c *Client) Close() error {
	first := false
	c.once.Do(func() {
		first = true
		close(c.closing) // the hub counts as closed from here: waiters leave without UNSUBSCRIBE

	})
	if !first {
		<-c.done
		return nil
	}
	defer close(c.done)
	c.cancel()
	if c.track != nil {
		c.track.Close()
	}
	c.wd.Close()
	err := c.hub.Close()
	c.bgMu.Lock()
	c.bgDone = true
	c.bgMu.Unlock()
	c.bg.Wait()
	c.latches.close()
	if c.batch != nil {
		c.batch.close() // waits for the batches under way
	}
	if c.piped != nil {
		c.piped.close() // ends the calls under way and stops the readers
	}
	return err
}

// enter registers an acquisition in flight, which Close waits for (so that
// a waiter it wakes has left the fair queue when Close returns). It returns
// false once Close has begun to wait.
func (c *Client) enter() bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgDone {
		return false
	}
	c.bg.Add(1)
	return true
}

// background runs f in a goroutine that Close waits for; after Close, it
// runs f at once.
func (c *Client) background(f func()) {
	c.bgMu.Lock()
	if c.bgDone {
		c.bgMu.Unlock()
		f()
		return
	}
	c.bg.Add(1)
	c.bgMu.Unlock()
	go func() {
		defer c.bg.Done()
		f()
	}()
}

func (c *Client) closed() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// Stats counts what a Client holds at one moment, for metrics and tests.
type Stats struct {
	Watched       int // locks the watchdog renews
	Waiters       int // goroutines waiting for a release message
	Subscriptions int // channels subscribed; with PubSubBoth, once per kind
	PubSubConns   int // pub/sub connections open: 1 at most with plain pub/sub, one per primary with waiters with sharded pub/sub on a cluster
	Tracked       int // holds the hold tracker watches
	TrackingConns int // the hold tracker's connections open: one per node (primary) that served a tracked hold
}

// Stats returns the client's current counts.
func (c *Client) Stats() Stats {
	s := Stats{Watched: c.wd.Len()}
	s.Waiters, s.Subscriptions, s.PubSubConns = c.hub.Counts()
	if c.track != nil {
		s.Tracked, s.TrackingConns = c.track.Counts()
	}
	return s
}

// NewLock returns a handle on the reentrant lock name, compatible with
// Redisson's RLock. The handle is the owner: it can lock again while it
// holds the lock (re-entry), and other handles, in this process or others,
// cannot. Make one handle per goroutine (or per unit of work) that must
// exclude the others. An invalid name is reported by the handle's methods
// as ErrInvalid.
func (c *Client) NewLock(name string) *Lock {
	return c.newLock(name, c.newReentrant(name))
}

// newLock returns a handle of a new owner on lock name under protocol p.
func (c *Client) newLock(name string, p *protocol) *Lock {
	h := c.holders.Add(1)
	l := &Lock{
		c:       c,
		name:    name,
		p:       p,
		field:   c.id + ":" + strconv.FormatInt(h, 10),
		latch:   keys.Tag(keys.UnlockLatchPrefix, name) + ":" + c.id + ":",
		invalid: CheckName(name),
		op:      newOpLock(),
	}
	l.h = hold{env: l, watchdogLease: c.cfg.WatchdogLease, unlockLatch: c.cfg.UnlockLatch}
	l.h.life.afterFunc = c.cfg.afterFunc
	return l
}

// CheckName returns ErrInvalid, with the reason, for a name that the locks
// refuse (empty, over 64 KiB, or with a brace but no hash tag), and nil for
// one they take. Tools that read a lock's keys themselves, such as the
// lualock command's status, use it to refuse what Lock would refuse, before
// anything is sent to Redis.
func CheckName(name string) error {
	if err := keys.Check(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// isNilPointer reports whether v holds a nil pointer, as a
// (*redis.Client)(nil) in the interface.
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// uuid4 returns a random RFC 4122 version 4 UUID in its text form.
func uuid4() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(crand.Reader, b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// transient reports whether a Redis error may pass when the call is sent
// again: luart.Transient, the one classifier of the module.
func transient(err error) bool { return luart.Transient(err) }

// redirected reports whether err is a cluster redirection (MOVED, ASK)
// that go-redis's cluster client let through after its own redirects, as
// during a failover while its view of the slots catches up: on a
// ClusterClient the acquisition loop retries it, as a transient error.
func (c *Client) redirected(err error) bool {
	if _, ok := c.rdb.(*redis.ClusterClient); !ok {
		return false
	}
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}

// followCluster asks a ClusterClient to reload its view of the slots after
// an acquisition attempt met a network error or a redirection: during a
// failover its view names the crashed master until a reload, which the
// crashed node's errors do not trigger (go-redis then reloaded only after
// tens of seconds in the failover tests). The reload is lazy and runs once
// however many attempts ask for it.
func (c *Client) followCluster(err error) {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok && (c.redirected(err) || !isRedisError(err)) {
		cc.ReloadState(c.ctx)
	}
}

// backoff is the capped, jittered exponential backoff of the acquisition
// loop: luart.Backoff from Options.RetryMin to RetryMax.
type backoff struct{ luart.Backoff }

func (c *Client) newBackoff() backoff {
	return backoff{luart.NewBackoff(c.cfg.RetryMin, c.cfg.RetryMax)}
}

// step returns the next pause: a random time in [d/2, d], d doubling up to
// RetryMax.
func (b *backoff) step() time.Duration { return b.Next() }

// primary returns where a read of key must go to see the latest write: the
// primary that serves its slot on a cluster (a cluster client set to read
// from replicas would send a read-only command to a replica, which may
// lag), the redis client otherwise.
func (c *Client) primary(ctx context.Context, key string) redis.Cmdable {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		if n, err := cc.MasterForKey(ctx, key); err == nil {
			return n
		}
	}
	return c.rdb
}
