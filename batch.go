package lualock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batched returns a Scripter for Options.Scripter that sends the lock
// scripts of concurrent calls to Redis together, through rdb, without
// waiting for a batch to fill: a call goes out at once, alone, while fewer
// than three sends are in flight; the calls that come while three are
// queue, and each send that ends sends its share of the queue (the queued
// and in-flight calls split evenly over the three, up to 64) as one
// pipeline. A queue that no send has taken for 5 ms goes out on a send of
// its own (up to three such sends at a time), so that a stalled connection
// holds up no more than its own calls. A queued call returns when its
// context ends. A Client uses it when Options.Scripter is nil on a redis
// client that is neither a *redis.Client (those get a pipelined
// connection of their own) nor a *redis.ClusterClient; given a
// *redis.Ring it returns rdb. See docs/GUIDE.md, Many goroutines.
func Batched(rdb redis.UniversalClient) redis.Scripter {
	if r, ok := rdb.(*redis.Ring); ok {
		return r // luart loads a script on each shard only through the Ring itself
	}
	b := &batcher{Scripter: rdb, rdb: rdb, lanes: batchLanes, staleAfter: batchStale}
	b.idle = sync.NewCond(&b.mu)
	b.stale = time.AfterFunc(time.Hour, b.flushStale)
	b.stale.Stop()
	return b
}

// batchLanes is how many sends a batcher keeps in flight before calls
// queue; batchMax is the most calls one pipeline carries; batchStale is
// how long the oldest queued call waits, with no send taking calls from
// the queue, before the queue goes out on a send of its own.
const (
	batchLanes = 3
	batchMax   = 64
	batchStale = 5 * time.Millisecond
)

// batcher is what Batched returns. Only EVALSHA and EVALSHA_RO, what the
// scripts' calls send, are batched; every other command of the Scripter
// interface (SCRIPT LOAD after a NOSCRIPT among them) goes straight to rdb.
type batcher struct {
	redis.Scripter
	rdb        redis.UniversalClient
	lanes      int
	staleAfter time.Duration // batchStale; tests set it
	stale      *time.Timer   // runs flushStale; armed while calls are queued

	mu       sync.Mutex
	inFlight int          // sends under way: lanes, and stale queues' sends
	queue    []*batchCall // calls waiting; not empty only while inFlight >= lanes
	sends    int          // batches under way on goroutines of their own
	idle     *sync.Cond   // broadcast when sends falls to 0
	closed   bool         // close was called: no stale queue is sent aside
	carried  int          // calls in the sends under way, alone or batched
	tookAt   time.Time    // when a send last took calls from the queue
}

// batchCall is one queued call. taken is guarded by the batcher's mu; cmd
// is written by the batch's send before it signals done (buffered: the
// send never waits for a caller that left).
type batchCall struct {
	ctx   context.Context
	ro    bool
	sha   string
	keys  []string
	args  []any
	at    time.Time // when it was queued
	taken bool      // in a batch: no longer in the queue
	cmd   *redis.Cmd
	done  chan struct{}
}

// EvalSha sends EVALSHA, batched with the calls of other goroutines.
func (b *batcher) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return b.do(ctx, false, sha1, keys, args)
}

// EvalShaRO sends EVALSHA_RO, batched with the calls of other goroutines.
func (b *batcher) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return b.do(ctx, true, sha1, keys, args)
}

func (b *batcher) do(ctx context.Context, ro bool, sha string, keys []string, args []any) *redis.Cmd {
	b.mu.Lock()
	if b.inFlight < b.lanes {
		// A free lane: the call goes out now, alone, on the caller's
		// context, as it would without the batcher.
		b.inFlight++
		b.carried++
		b.mu.Unlock()
		cmd := evalSha(ctx, b.rdb, ro, sha, keys, args)
		b.next(1)
		return cmd
	}
	c := callPool.Get().(*batchCall)
	c.ctx, c.ro, c.sha, c.keys, c.args, c.at = ctx, ro, sha, keys, args, time.Now()
	if len(b.queue) == 0 {
		b.stale.Reset(b.staleAfter)
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.reply()
	case <-ctx.Done():
	}
	b.mu.Lock()
	taken := c.taken
	if !taken {
		// Never sent: nothing happened in Redis.
		b.queue = slices.DeleteFunc(b.queue, func(q *batchCall) bool { return q == c })
	}
	b.mu.Unlock()
	if !taken {
		c.reply() // back to the pool: no batch holds it
	} else {
		select {
		case <-c.done:
			return c.reply() // the reply came as the context ended
		default:
			// Sent or about to be: as for a reply that does not come back
			// in time, the outcome is unknown to the caller. The batch
			// still writes to c, which is not reused.
		}
	}
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(ctx.Err())
	return cmd
}

// callPool keeps batchCalls, each with its done channel, for reuse.
var callPool = sync.Pool{New: func() any { return &batchCall{done: make(chan struct{}, 1)} }}

// reply returns c's command and puts c back in the pool, cleared. Only the
// call's own goroutine calls it, once nothing else holds c.
func (c *batchCall) reply() *redis.Cmd {
	cmd := c.cmd
	*c = batchCall{done: c.done}
	callPool.Put(c)
	return cmd
}

// next is called when a send of done calls ends: it sends the lane's share
// of the queue, if any, as the next batch on the same lane; otherwise it
// frees the lane.
func (b *batcher) next(done int) {
	b.mu.Lock()
	b.carried -= done
	batch := b.take(true)
	b.mu.Unlock()
	if batch != nil {
		go b.send(batch)
	}
}

// take takes the first calls of the queue as a batch, counting it in
// b.sends; with the queue empty it frees the ending send's lane and
// returns nil. b.mu is held.
//
// With shared set (a lane whose send ended), the batch is the lane's share
// of the calls under way: those queued and those the other sends carry,
// split evenly over the lanes; without (a stale queue's send aside), up to
// batchMax. Taking the whole queue at every lane's end lets the lanes fall
// into step: the lane that ends while the others' callers are still coming
// back takes one or two calls, the next one nearly all of them, and Redis
// and the callers then wait for each other in turn. The calls left wait
// for the next send to end.
func (b *batcher) take(shared bool) []*batchCall {
	if len(b.queue) == 0 {
		b.inFlight--
		return nil
	}
	n := min(len(b.queue), batchMax)
	if shared {
		n = min(n, (len(b.queue)+b.carried+b.lanes-1)/b.lanes)
	}
	b.carried += n
	b.tookAt = time.Now()
	batch := slices.Clone(b.queue[:n])
	b.queue = slices.Delete(b.queue, 0, n)
	for _, c := range batch {
		c.taken = true
	}
	b.sends++
	return batch
}

// flushStale runs on the stale timer: when the oldest queued call has
// waited staleAfter and no send has taken calls from the queue for as
// long (a connection or the server stalls), the queue goes out on a send
// of its own, unless as many such sends as lanes are under way; otherwise
// the timer is armed again.
func (b *batcher) flushStale() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.queue) == 0 {
		return
	}
	since := b.queue[0].at
	if b.tookAt.After(since) {
		// A call left behind by a share: the queue still moves.
		since = b.tookAt
	}
	if wait := b.staleAfter - time.Since(since); wait > 0 {
		b.stale.Reset(wait)
		return
	}
	if b.inFlight >= 2*b.lanes {
		// The lanes and as many sends aside all stall: the server, not a
		// connection. The calls wait for one of them, or for their
		// context, rather than take one pooled connection after another.
		b.stale.Reset(b.staleAfter)
		return
	}
	b.inFlight++
	batch := b.take(false)
	if len(b.queue) > 0 {
		b.stale.Reset(b.staleAfter)
	}
	go b.send(batch)
}

// send sends batch, gives each call its reply, and ends the send. It runs
// on a goroutine of its own, so that every caller can leave when its
// context ends; it ends when go-redis returns, within the client's
// timeouts.
func (b *batcher) send(batch []*batchCall) {
	if len(batch) == 1 {
		c := batch[0]
		c.cmd = evalSha(c.ctx, b.rdb, c.ro, c.sha, c.keys, c.args)
	} else {
		p := b.rdb.Pipeline()
		for _, c := range batch {
			c.cmd = evalSha(c.ctx, p, c.ro, c.sha, c.keys, c.args)
		}
		// Every command's reply lands in its Cmd; Exec's own error is the
		// first of them.
		_, _ = p.Exec(batchContext(batch))
	}
	// The lane goes on with the calls queued meanwhile before this batch's
	// callers are woken: Redis gets them sooner.
	b.next(len(batch))
	for _, c := range batch {
		c.done <- struct{}{}
	}
	b.mu.Lock()
	if b.sends--; b.sends == 0 {
		b.idle.Broadcast()
	}
	b.mu.Unlock()
}

// close stops sending stale queues aside and waits for the batches under
// way to end (within go-redis's timeouts). Calls still running may start
// batches after it returns.
func (b *batcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.stale.Stop()
	for b.sends > 0 {
		b.idle.Wait()
	}
}

// evalSha sends EVALSHA or EVALSHA_RO through s.
func evalSha(ctx context.Context, s redis.Scripter, ro bool, sha string, keys []string, args []any) *redis.Cmd {
	if ro {
		return s.EvalShaRO(ctx, sha, keys, args...)
	}
	return s.EvalSha(ctx, sha, keys, args...)
}

// batchContext is the context a batch of several calls is sent on: not
// cancelled by any one call's context (the others still want their
// replies), with the latest deadline of the calls when each has one, so
// that go-redis bounds the send's I/O by it (ContextTimeoutEnabled);
// without one, by its timeouts.
func batchContext(batch []*batchCall) context.Context {
	var latest time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(batch[0].ctx)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return deadlineOnly{Context: context.WithoutCancel(batch[0].ctx), d: latest}
}

// deadlineOnly is a context that is never cancelled but reports a
// deadline: go-redis sets its connection deadlines from it.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }
