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
	conns0 := e.clientCount(ctx0)
	ch0, pat0 := e.pubsubCounts(ctx0)
	tr0, _ := e.info(ctx0, "clients")

	// Holders keep their locks for the whole run: a long TTL for the
	// libraries without renewal, their own renewal for the others.
	inst := v.mustOpen(e, openOpts{ttl: 5 * time.Minute})
	defer inst.close()
	keys := make([]string, nL)
	holders := make([]mutex, nL)
	guards := make([]*guard, nL)
	holdCtx, holdCancel := context.WithTimeout(context.Background(), e.cfg.waitSettle+e.cfg.waitWindow+3*time.Minute)
	defer holdCancel()
	for j := range keys {
		keys[j] = e.key("wait", strconv.Itoa(j))
		holders[j] = inst.newMutex(keys[j])
		guards[j] = &guard{}
		if r, err := hold(holdCtx, holders[j]); err != nil {
			fatalf("%s %s: holder lock: %v", wl, v.name, err)
		} else if r > 0 {
			e.note(wl, "%s: a holder needed %d retried attempts to take a free lock", v.name, r)
		}
		guards[j].enter()
		guards[j].bump()
	}

	var acquired, errs atomic.Int64
	var firstErr atomic.Value
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
					_ = m.unlock(context.Background())
					continue
				}
				if wctx.Err() != nil {
					return
				}
				if errs.Add(1) == 1 {
					firstErr.Store(fmt.Sprint(err))
				}
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
	conns := e.clientCount(ctx) - conns0
	ch, pat := e.pubsubCounts(ctx)
	ch, pat = ch-ch0, pat-pat0
	tr1, _ := e.info(ctx, "clients")
	gc()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	goroutines := runtime.NumGoroutine() - g0
	var stats string
	if li, ok := inst.(*lualockInst); ok {
		s := li.c.Stats()
		stats = fmt.Sprintf("Stats(): %d waiters, %d subscriptions, %d pub/sub connections", s.Waiters, s.Subscriptions, s.PubSubConns)
		e.rec(wl, v.name, "client_pubsub_conns", float64(s.PubSubConns))
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
		if err := h.unlock(ctx); err != nil {
			e.note(wl, "%s: holder unlock: %v", v.name, err)
		}
	}
	e.check(wl, v.name, guards...)

	win := d.dur.Seconds()
	e.rec(wl, v.name, "connections", float64(conns))
	e.rec(wl, v.name, "pubsub_channels", float64(ch))
	e.rec(wl, v.name, "pubsub_patterns", float64(pat))
	if tc := atoiDelta(tr0["tracking_clients"], tr1["tracking_clients"]); tc != 0 {
		e.rec(wl, v.name, "tracking_clients", float64(tc))
	}
	e.rec(wl, v.name, "redis_cmds_per_s", float64(d.cmds)/win)
	e.rec(wl, v.name, "client_requests_per_s", float64(d.clientCalls)/win)
	e.rec(wl, v.name, "redis_cpu_pct", 100*d.redisCPU.Seconds()/win)
	e.rec(wl, v.name, "client_cpu_pct", 100*d.clientCPU.Seconds()/win)
	e.rec(wl, v.name, "heap_inuse_mb", float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/(1<<20))
	e.rec(wl, v.name, "stack_inuse_mb", float64(int64(m1.StackInuse)-int64(m0.StackInuse))/(1<<20))
	e.rec(wl, v.name, "goroutines", float64(goroutines))
	e.rec(wl, v.name, "waiter_acquisitions", float64(acquired.Load()))
	e.rec(wl, v.name, "lock_errors", float64(errs.Load()))
	if gu := giveUpsOf(inst); gu > 0 {
		e.rec(wl, v.name, "lock_calls_given_up", float64(gu))
	}
	if n := errs.Load(); n > 0 {
		e.note(wl, "%s: %d Lock calls failed with an error while waiting (first: %v)", v.name, n, firstErr.Load())
	}
	e.note(wl+"/cmds", "%s: %s", v.name, perSecond(d))
	if stats != "" {
		e.note(wl, "%s: %s", v.name, stats)
	}
	logf("%-18s %-42s conns %4d  channels %5d  %9.1f cmds/s  redis CPU %5.1f%%  client CPU %5.1f%%  heap %+7.1fMB stack %+7.1fMB  errs %d (settle %.1fs, teardown %.1fs)",
		wl, v.name, conns, ch, float64(d.cmds)/win, 100*d.redisCPU.Seconds()/win, 100*d.clientCPU.Seconds()/win,
		float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/(1<<20), float64(int64(m1.StackInuse)-int64(m0.StackInuse))/(1<<20),
		errs.Load(), settled.Seconds(), time.Since(teardown).Seconds())
}

func atoiDelta(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return y - x
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
