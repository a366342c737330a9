package lualock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/keys"
)

// latchSweeper deletes the unlock latches of releases whose reply arrived
// (those of last holds: see dropIfWritten).
//
// A latch (see Options.UnlockLatch) only serves a release sent again with
// the same request id: by go-redis after a lost reply, or by the handle's
// next Unlock or Lock after an error. Once the reply is in hand neither can
// happen, so the latch can go, as Redisson 3.24+ DELs its own; left to its
// TTL, a client releasing 40 000 locks a second would keep 400 000 of them.
// The deletions are sent by one goroutine, off the caller's path: it
// collects the latches of sweepDelay (20ms) and deletes them together, as
// one UNLINK per cluster slot (one command for all on a single server), in
// one pipeline. So an Unlock costs no extra round trip and no wake-up of
// another goroutine, and under load a fraction of a command; a latch lives
// about 20ms past its reply instead of UnlockLatch. A deletion that fails
// is not retried: the latch expires on its own.
type latchSweeper struct {
	rdb     redis.UniversalClient
	mu      sync.Mutex
	pending []string
	spare   []string // the sweeper's last batch, reused: only run touches it
	closed  bool
	kick    chan struct{} // a latch is pending
	stop    chan struct{}
	done    chan struct{}
}

// sweepBatch is the most latches one UNLINK names.
const sweepBatch = 512

// sweepDelay is how long the sweeper collects latches before it deletes
// them: at most one deletion round trip per sweepDelay, however many
// releases, and a latch outlives its release's reply by about that much.
const sweepDelay = 20 * time.Millisecond

func newLatchSweeper(rdb redis.UniversalClient) *latchSweeper {
	s := &latchSweeper{rdb: rdb, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// drop queues latch for deletion. After close it does nothing: the latch
// expires on its own.
func (s *latchSweeper) drop(latch string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.pending = append(s.pending, latch)
	first := len(s.pending) == 1
	s.mu.Unlock()
	if first {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// dropIfWritten queues latch for deletion if the release that replied res
// wrote it: the last hold's (releaseFreed), or any of a release that named
// no hold count (holds 0). A release that named its count and left holds
// (releasePartial) wrote none: its count makes its resend safe.
func (s *latchSweeper) dropIfWritten(latch string, res releaseOutcome, holds int) {
	if holds == 0 || res == releaseFreed {
		s.drop(latch)
	}
}

// close sends the deletions still pending, bounded by undoTimeout, and
// stops the goroutine.
func (s *latchSweeper) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
}

func (s *latchSweeper) run() {
	defer close(s.done)
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-s.kick:
		case <-s.stop:
			s.sweep()
			return
		}
		// Let the releases of the next moment join this one.
		t.Reset(sweepDelay)
		select {
		case <-t.C:
			s.sweep()
		case <-s.stop:
			t.Stop()
			s.sweep()
			return
		}
	}
}

// sweep deletes the pending latches.
func (s *latchSweeper) sweep() {
	s.mu.Lock()
	pending := s.pending
	s.pending = s.spare[:0]
	s.mu.Unlock()
	defer func() {
		clear(pending)
		s.spare = pending
	}()
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	_, cluster := s.rdb.(*redis.ClusterClient)
	if !cluster {
		// One server: every latch in the same UNLINKs, no grouping.
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			unlinkAll(ctx, p, pending)
			return nil
		})
		return
	}
	groups := map[int][]string{}
	var order []int
	for _, k := range pending {
		g := keys.Slot(k)
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], k)
	}
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, g := range order {
			unlinkAll(ctx, p, groups[g])
		}
		return nil
	})
}

// unlinkAll queues the UNLINKs of ks on p, sweepBatch keys a command.
func unlinkAll(ctx context.Context, p redis.Pipeliner, ks []string) {
	for len(ks) > 0 {
		n := min(len(ks), sweepBatch)
		p.Unlink(ctx, ks[:n]...)
		ks = ks[n:]
	}
}
