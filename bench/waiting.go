package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const waitingWorkload = "waiting-at-scale"

// waiting parks many goroutines on a few held locks and measures what
// waiting costs while nobody releases: connections, subscriptions, Redis
// commands per second, client memory and CPU.
func (e *env) waiting(v variant) {
	wl := waitingWorkload
	nG, nL := e.cfg.waitGoroutines, e.cfg.waitLocks
	ctx0, cancel0 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel0()
	gc()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	ch0, pat0 := e.pubsubCounts(ctx0)
	mem0 := e.usedMemory(ctx0)

	// Holders keep their locks for the whole run: a long TTL for the
	// libraries without renewal, their own renewal for the others. Every
	// connection of the library's client carries its name, so that CLIENT
	// LIST tells them from the others.
	name := e.clientName()
	inst := v.mustOpen(e, openOpts{ttl: 5 * time.Minute, name: name})
	defer inst.close()
	cs := &calls{}
	keys := make([]string, nL)
	holders := make([]mutex, nL)
	guards := make([]*guard, nL)
	holdCtx, holdCancel := context.WithTimeout(context.Background(), e.cfg.waitSettle+e.cfg.waitWindow+3*time.Minute)
	defer holdCancel()
	for j := range keys {
		keys[j] = e.key("wait", strconv.Itoa(j))
		holders[j] = inst.newMutex(keys[j])
		guards[j] = &guard{}
		if r, err := hold(holdCtx, cs, holders[j]); err != nil {
			fatalf("%s %s: holder lock: %v", wl, v.name, err)
		} else if r > 0 {
			e.note(wl, "%s: a holder needed %d retried attempts to take a free lock", v.name, r)
		}
		guards[j].enter()
		guards[j].bump()
	}

	var acquired atomic.Int64
	wctx, wcancel := context.WithTimeout(context.Background(), e.cfg.waitSettle+e.cfg.waitWindow+2*time.Minute)
	defer wcancel()
	var wg sync.WaitGroup
	spawnStart := time.Now()
	for i := range nG {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := i % nL
			m := inst.newMutex(keys[j])
			for wctx.Err() == nil {
				err := m.lock(wctx)
				if err == nil {
					// Only possible if a holder lost its lock: the guard
					// reports it as an overlap.
					acquired.Add(1)
					guards[j].enter()
					guards[j].bump()
					guards[j].exit()
					_ = cs.unlock(context.Background(), m)
					continue
				}
				if wctx.Err() != nil {
					return
				}
				cs.fail(err, false)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(e.cfg.waitSettle)
	settled := time.Since(spawnStart)

	s0 := e.snap(inst.calls, false)
	time.Sleep(e.cfg.waitWindow)
	s1 := e.snap(inst.calls, false)
	d := diff(s0, s1)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := e.clientsNamed(ctx, name)
	redisMem := e.usedMemory(ctx) - mem0
	ch, pat := e.pubsubCounts(ctx)
	ch, pat = ch-ch0, pat-pat0
	gc()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	goroutines := runtime.NumGoroutine() - g0
	if li, ok := inst.(*lualockInst); ok {
		// lualock's own view, for comparison with the server's.
		s := li.c.Stats()
		e.rec(wl, v.name, "stats_pubsub_conns", float64(s.PubSubConns))
		e.rec(wl, v.name, "stats_subscriptions", float64(s.Subscriptions))
		e.rec(wl, v.name, "stats_waiters", float64(s.Waiters))
	}

	// Tear down: stop the waiters first, then release the holders.
	wcancel()
	if !waitGroupTimeout(&wg, time.Minute) {
		warnf("%s %s: waiters did not return within a minute of their context ending", wl, v.name)
		e.note(wl, "%s: waiters did not return within a minute of their context ending", v.name)
	}
	teardown := time.Now()
	for j, h := range holders {
		guards[j].exit()
		if h.lost() {
			e.note(wl, "%s: holder of lock %d lost its lock during the run", v.name, j)
		}
		_ = cs.unlock(ctx, h)
	}
	e.check(wl, v.name, guards...)

	win := d.dur.Seconds()
	e.rec(wl, v.name, "connections", float64(cl.total))
	e.rec(wl, v.name, "pubsub_conns", float64(cl.pubsub))
	e.rec(wl, v.name, "subscriptions", float64(cl.subs))
	e.rec(wl, v.name, "tracking_clients", float64(cl.tracking))
	e.rec(wl, v.name, "pubsub_channels", float64(ch))
	e.rec(wl, v.name, "pubsub_patterns", float64(pat))
	e.rec(wl, v.name, "redis_cmds_per_s", float64(d.cmds)/win)
	e.rec(wl, v.name, "client_requests_per_s", float64(d.clientCalls)/win)
	e.rec(wl, v.name, "redis_cpu_pct", 100*d.redisCPU.Seconds()/win)
	e.rec(wl, v.name, "client_cpu_pct", 100*d.clientCPU.Seconds()/win)
	e.rec(wl, v.name, "redis_mem_mb", float64(redisMem)/(1<<20))
	e.rec(wl, v.name, "heap_inuse_mb", float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/(1<<20))
	e.rec(wl, v.name, "stack_inuse_mb", float64(int64(m1.StackInuse)-int64(m0.StackInuse))/(1<<20))
	e.rec(wl, v.name, "goroutines", float64(goroutines))
	e.rec(wl, v.name, "waiter_acquisitions", float64(acquired.Load()))
	if gu := giveUpsOf(inst); gu > 0 {
		e.rec(wl, v.name, "lock_calls_given_up", float64(gu))
	}
	e.recCalls(wl, v.name, cs)
	e.note(wl+"/cmds", "%s: %s", v.name, perSecond(d))
	logf("%-18s %-42s conns %4d  pub/sub conns %d  subscriptions %5d  channels %5d  tracking %d  %9.1f cmds/s  redis CPU %5.1f%%  client CPU %5.1f%%  redis mem %+7.1fMB  heap %+7.1fMB stack %+7.1fMB  errors %d (settle %.1fs, teardown %.1fs)",
		wl, v.name, cl.total, cl.pubsub, cl.subs, ch, cl.tracking, float64(d.cmds)/win, 100*d.redisCPU.Seconds()/win, 100*d.clientCPU.Seconds()/win,
		float64(redisMem)/(1<<20), float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/(1<<20), float64(int64(m1.StackInuse)-int64(m0.StackInuse))/(1<<20),
		cs.errs.Load(), settled.Seconds(), time.Since(teardown).Seconds())
}

// perSecond formats the commands per second of a delta, most frequent first.
func perSecond(d delta) string {
	s := ""
	for i, part := range splitTop(d, 14) {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.1f/s", part.k, float64(part.v)/d.dur.Seconds())
	}
	if s == "" {
		s = "no commands"
	}
	return s
}

// usedMemory is the server's used_memory (INFO memory), in bytes: what the
// keys, the clients (their buffers) and the pub/sub channels take.
func (e *env) usedMemory(ctx context.Context) int64 {
	info, err := e.info(ctx, "memory")
	if err != nil {
		fatalf("INFO memory: %v", err)
	}
	n, _ := strconv.ParseInt(info["used_memory"], 10, 64)
	return n
}
