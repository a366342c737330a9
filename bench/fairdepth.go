package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
)

// fairBudget is the fair wait budget of the bench's lualock clients
// (Options.FairWait's default), with which the fake waiters are chained.
const fairBudget = 5 * time.Minute

func fairDepthWorkload(depth int) string { return fmt.Sprintf("fair-queue-depth-%d", depth) }

// fairDepth measures the Redis server time of the fair lock's handoff,
// release, join and re-ask with depth waiters queued. K real lualock
// waiters (goroutines in Lock) queue behind a holder; behind them depth
// fake entries are appended to the queue and the deadline set directly
// (RPUSH and ZADD, each deadline one budget after the one ahead, as a join
// writes it): waiters that never ask again, as real goroutines that deep
// would be too heavy for the machine, and far enough out (one budget each)
// that none is purged during the run. The holder releases and the lock is
// handed down the K real waiters (each new holder releases at once), with
// depth..depth+K-1 entries queued. Every EVALSHA of the window is taken from
// SLOWLOG (threshold 0 during the window) and classified by script SHA1 and
// owner field: the acquisition that got the lock (the last fair_acquire of
// a field before its fair_release), the release, and any other call (timer
// retries of queued waiters). INFO commandstats gives the EVALSHA total of
// the window as a cross-check. Then a few more real waiters join one at a
// time behind the fakes, to price joining the back of the queue and the
// re-ask that follows it (the waiter then stands depth places back).
func (e *env) fairDepth(depth int) {
	wl := fairDepthWorkload(depth)
	lib := libLualockFair
	K := e.cfg.depthK
	inst := vLualockFair.mustOpen(e, openOpts{})
	li := inst.(*lualockInst)
	defer inst.close()
	key := e.key("fair")
	queueKey, timeoutsKey := "redisson_lock_queue:{"+key+"}", "redisson_lock_timeout:{"+key+"}"
	g := &guard{}
	cs := &calls{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	setupDeadline := time.Now().Add(3 * time.Minute)

	h0 := inst.newMutex(key)
	if err := cs.lock(ctx, h0); err != nil {
		fatalf("%s: holder lock: %v", wl, err)
	}
	g.enter()
	g.bump()

	var got atomic.Int64
	var stopping atomic.Bool
	kth := make(chan struct{})
	var wg sync.WaitGroup
	spawn := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := inst.newMutex(key)
			// The wait is the workload: it is bounded by the phase, not
			// by callTimeout.
			err := m.lock(ctx)
			if stopping.Load() {
				return
			}
			if err != nil {
				cs.fail(err, false)
				return
			}
			g.enter()
			g.bump()
			c := got.Add(1)
			if c < int64(K) {
				g.exit()
				_ = cs.unlock(context.Background(), m)
				return
			}
			if c == int64(K) {
				close(kth) // keeps the lock (and stays inside) until the clean-up
			}
		}()
	}
	llen := func() int64 {
		n, err := e.admin.LLen(ctx, queueKey).Result()
		if err != nil {
			fatalf("%s: LLEN: %v", wl, err)
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		for !cond() {
			if time.Now().After(setupDeadline) {
				fatalf("%s: timed out waiting for %s (queue %d, waiters %d)", wl, what, llen(), li.c.Stats().Waiters)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	setupStart := time.Now()
	for spawned := 0; spawned < K; spawned++ {
		spawn()
		// One at a time, so that the real waiters' order is known.
		waitFor("waiters to queue", func() bool { return llen() >= int64(spawned+1) })
	}
	waitFor("waiters to subscribe", func() bool { return li.c.Stats().Waiters >= K })
	// Let the second attempt of the last waiters (after subscribing) land.
	e.settleEvalsha(ctx, 300*time.Millisecond, setupDeadline)
	e.appendFakes(ctx, wl, queueKey, timeoutsKey, depth, fairBudget)
	setup := time.Since(setupStart)
	queued := llen()
	// What the queue costs Redis: the list and the deadline set, all of
	// their elements counted (SAMPLES 0), per queued waiter.
	var qBytes int64
	for _, k := range []string{queueKey, timeoutsKey} {
		n, err := e.admin.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			fatalf("%s: MEMORY USAGE %s: %v", wl, k, err)
		}
		qBytes += n
	}

	restore := e.slowlogOn(ctx)
	s0 := e.snap(li.calls, false)
	g.exit()
	if err := cs.unlock(ctx, h0); err != nil {
		fatalf("%s: holder unlock: %v", wl, err)
	}
	select {
	case <-kth:
	case <-time.After(2 * time.Minute):
		fatalf("%s: %d handoffs did not happen within 2 minutes (got %d)", wl, K, got.Load())
	}
	s1 := e.snap(li.calls, false)
	chain := e.slowlog(ctx)
	var lastChainID int64 = -1
	for _, en := range chain {
		lastChainID = max(lastChainID, en.ID)
	}

	// Join cost: more waiters, one at a time, at the back of the queue.
	for j := 0; j < e.cfg.depthJoins; j++ {
		before, w0 := llen(), li.c.Stats().Waiters
		spawn()
		waitFor("a joining waiter", func() bool { return llen() > before && li.c.Stats().Waiters > w0 })
		e.settleEvalsha(ctx, 100*time.Millisecond, setupDeadline)
	}
	all := e.slowlog(ctx)
	restore()

	// Clean up: the K-th holder keeps the lock; delete the lock and its
	// queue (so the waiters' give-up calls are cheap), then close the client.
	stopping.Store(true)
	g.exit()
	if err := e.admin.Del(ctx, key, queueKey, timeoutsKey).Err(); err != nil {
		fatalf("%s: DEL: %v", wl, err)
	}
	_ = li.c.Close()
	if !waitGroupTimeout(&wg, time.Minute) {
		warnf("%s: waiters did not return within a minute of Client.Close", wl)
		e.note(wl, "waiters did not return within a minute of Client.Close")
	}
	e.check(wl, lib, g)

	// Classify the window's script calls.
	id := li.c.ID() + ":"
	type call struct {
		id    int64
		field string
		dur   time.Duration
	}
	var acqs, rels []call
	for _, en := range all {
		if len(en.Args) < 3 || !strings.EqualFold(en.Args[0], "evalsha") {
			continue
		}
		c := call{id: en.ID, dur: en.Duration}
		for _, a := range en.Args[3:] {
			if strings.HasPrefix(a, id) {
				c.field = a
				break
			}
		}
		switch en.Args[1] {
		case generated.FairAcquireSHA1:
			acqs = append(acqs, c)
		case generated.FairReleaseSHA1:
			rels = append(rels, c)
		}
	}
	sort.Slice(acqs, func(i, j int) bool { return acqs[i].id < acqs[j].id })
	var acqUs, relUs, joinUs, reaskUs []time.Duration
	used := map[int64]bool{}
	for _, r := range rels {
		if r.id > lastChainID {
			continue
		}
		relUs = append(relUs, r.dur)
		last := -1
		for i, a := range acqs {
			if a.id < r.id && a.field == r.field {
				last = i
			}
		}
		if last >= 0 {
			acqUs = append(acqUs, acqs[last].dur)
			used[acqs[last].id] = true
		}
	}
	// The K-th holder's acquisition has no release in the window: it is the
	// last acquisition of a field that no other window call follows.
	others := 0
	byField := map[string][]call{}
	for _, a := range acqs {
		if a.id > lastChainID {
			byField[a.field] = append(byField[a.field], a)
			continue
		}
		if !used[a.id] {
			others++
		}
	}
	for _, l := range byField {
		if len(l) >= 2 {
			joinUs = append(joinUs, l[0].dur)
			reaskUs = append(reaskUs, l[1].dur)
		}
	}
	// One of the "others" is the K-th holder's successful acquisition.
	others = max(others-1, 0)
	d := diff(s0, s1)
	e.rec(wl, lib, "queued", float64(queued))
	e.rec(wl, lib, "setup_s", setup.Seconds())
	e.rec(wl, lib, "queue_bytes_per_waiter", float64(qBytes)/float64(queued))
	e.rec(wl, lib, "acquire_n", float64(len(acqUs)))
	e.rec(wl, lib, "release_n", float64(len(relUs)))
	e.rec(wl, lib, "join_n", float64(len(joinUs)))
	if len(acqUs) > 0 {
		e.rec(wl, lib, "acquire_server_us", us(percentile(acqUs, 0.5)))
		e.rec(wl, lib, "acquire_server_us_max", us(percentile(acqUs, 1)))
	}
	if len(relUs) > 0 {
		e.rec(wl, lib, "release_server_us", us(percentile(relUs, 0.5)))
		e.rec(wl, lib, "release_server_us_max", us(percentile(relUs, 1)))
	}
	if len(joinUs) > 0 {
		e.rec(wl, lib, "join_server_us", us(percentile(joinUs, 0.5)))
		e.rec(wl, lib, "reask_server_us", us(percentile(reaskUs, 0.5)))
	}
	e.rec(wl, lib, "evalsha_usec_per_handoff", float64(d.evalshaUsec)/float64(K))
	e.rec(wl, lib, "redis_cpu_us_per_handoff", us(d.redisCPU)/float64(K))
	e.rec(wl, lib, "other_evalsha_in_window", float64(others))
	e.recCalls(wl, lib, cs)
	logf("%-24s %-20s queued %5d (%4.0f B each, setup %5.1fs): acquire %7.0fµs  release %5.0fµs  join %6.0fµs  re-ask %6.0fµs  commandstats evalsha %7.0fµs/handoff  other calls %d",
		wl, lib, queued, float64(qBytes)/float64(queued), setup.Seconds(), us(percentile(acqUs, 0.5)), us(percentile(relUs, 0.5)),
		us(percentile(joinUs, 0.5)), us(percentile(reaskUs, 0.5)), float64(d.evalshaUsec)/float64(K), others)
}

// appendFakes appends n fake waiters to the fair queue, each deadline one
// budget after the one ahead (the last real waiter's first), in pipelined
// batches: RPUSH of the fields, ZADD of the deadlines.
func (e *env) appendFakes(ctx context.Context, wl, queueKey, timeoutsKey string, n int, budget time.Duration) {
	last, err := e.admin.LIndex(ctx, queueKey, -1).Result()
	if err != nil {
		fatalf("%s: LINDEX: %v", wl, err)
	}
	score, err := e.admin.ZScore(ctx, timeoutsKey, last).Result()
	if err != nil {
		fatalf("%s: ZSCORE of the last waiter: %v", wl, err)
	}
	w := float64(budget.Milliseconds())
	const batch = 1000
	for i := 0; i < n; i += batch {
		m := min(batch, n-i)
		fields := make([]any, m)
		zs := make([]redis.Z, m)
		for j := range m {
			// As long as a real field (a UUID, ":", a holder id).
			f := fmt.Sprintf("%08x-0000-4000-8000-000000000000:%d", i+j, i+j)
			score += w
			fields[j] = f
			zs[j] = redis.Z{Score: score, Member: f}
		}
		if _, err := e.admin.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.RPush(ctx, queueKey, fields...)
			p.ZAdd(ctx, timeoutsKey, zs...)
			return nil
		}); err != nil {
			fatalf("%s: appending fake waiters: %v", wl, err)
		}
	}
}

// settleEvalsha waits until no EVALSHA has run for quiet.
func (e *env) settleEvalsha(ctx context.Context, quiet time.Duration, deadline time.Time) {
	last, since := int64(-1), time.Now()
	for time.Now().Before(deadline) {
		s := e.snap(nil, false)
		n := s.cmds["evalsha"].calls
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowlogOn logs every command until the returned function restores the
// previous settings.
func (e *env) slowlogOn(ctx context.Context) func() {
	old, err := e.admin.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		fatalf("CONFIG GET slowlog-*: %v", err)
	}
	must := func(err error) {
		if err != nil {
			fatalf("slowlog: %v", err)
		}
	}
	must(e.admin.ConfigSet(ctx, "slowlog-max-len", "100000").Err())
	must(e.admin.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err())
	must(e.admin.Do(ctx, "slowlog", "reset").Err())
	return func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		must(e.admin.ConfigSet(c, "slowlog-log-slower-than", old["slowlog-log-slower-than"]).Err())
		must(e.admin.Do(c, "slowlog", "reset").Err())
		must(e.admin.ConfigSet(c, "slowlog-max-len", old["slowlog-max-len"]).Err())
	}
}

func (e *env) slowlog(ctx context.Context) []redis.SlowLog {
	l, err := e.admin.SlowLogGet(ctx, -1).Result()
	if err != nil {
		fatalf("SLOWLOG GET: %v", err)
	}
	return l
}

func waitGroupTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
