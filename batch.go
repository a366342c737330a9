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
// than two sends are in flight; the calls that come while two are queue,
// and each send that ends sends the whole queue as one pipeline. A queued
// call returns when its context ends. It is what a Client uses when
// Options.Scripter is nil; see docs/GUIDE.md, Many goroutines.
func Batched(rdb redis.UniversalClient) redis.Scripter {
	return &batcher{Scripter: rdb, rdb: rdb, lanes: batchLanes}
}

// batchLanes is how many sends a batcher keeps in flight before calls
// queue; batchMax is the most calls one pipeline carries.
const (
	batchLanes = 2
	batchMax   = 64
)

// batcher is what Batched returns. Only EVALSHA and EVALSHA_RO, what the
// scripts' calls send, are batched; every other command of the Scripter
// interface (SCRIPT LOAD after a NOSCRIPT among them) goes straight to rdb.
type batcher struct {
	redis.Scripter
	rdb   redis.UniversalClient
	lanes int

	mu       sync.Mutex
	inFlight int          // sends under way, at most lanes
	queue    []*batchCall // calls waiting; not empty only while inFlight == lanes
	sends    sync.WaitGroup
}

// batchCall is one queued call. taken is guarded by the batcher's mu; cmd
// is written by the batch's send before done is closed.
type batchCall struct {
	ctx   context.Context
	ro    bool
	sha   string
	keys  []string
	args  []any
	taken bool // in a batch: no longer in the queue
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
		b.mu.Unlock()
		cmd := evalSha(ctx, b.rdb, ro, sha, keys, args)
		b.next()
		return cmd
	}
	c := &batchCall{ctx: ctx, ro: ro, sha: sha, keys: keys, args: args, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
	}
	b.mu.Lock()
	taken := c.taken
	if !taken {
		// Never sent: nothing happened in Redis.
		b.queue = slices.DeleteFunc(b.queue, func(q *batchCall) bool { return q == c })
	}
	b.mu.Unlock()
	if taken {
		select {
		case <-c.done:
			return c.cmd // the reply came as the context ended
		default:
			// Sent or about to be: as for a reply that does not come back
			// in time, the outcome is unknown to the caller.
		}
	}
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(ctx.Err())
	return cmd
}

// next is called when a send ends: it sends the queue, if any, as the
// next batch on the same lane; otherwise it frees the lane.
func (b *batcher) next() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if batch != nil {
		go b.send(batch)
	}
}

// take takes the first calls of the queue as a batch, counting a send
// for it in b.sends; with the queue empty it frees the ending send's lane
// and returns nil. b.mu is held.
func (b *batcher) take() []*batchCall {
	if len(b.queue) == 0 {
		b.inFlight--
		return nil
	}
	n := min(len(b.queue), batchMax)
	batch := slices.Clone(b.queue[:n])
	b.queue = slices.Delete(b.queue, 0, n)
	for _, c := range batch {
		c.taken = true
	}
	b.sends.Add(1)
	return batch
}

// send sends batch, gives each call its reply, and ends the send. It runs
// on a goroutine of its own, so that every caller can leave when its
// context ends; it ends when go-redis returns, within the client's
// timeouts.
func (b *batcher) send(batch []*batchCall) {
	defer b.sends.Done()
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
	b.next()
	for _, c := range batch {
		close(c.done)
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
