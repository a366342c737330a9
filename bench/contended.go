package main

import (
	"context"
	"sync"
	"time"
)

func contendedWorkload(pause time.Duration) string {
	if pause == 0 {
		return "contended-handoff"
	}
	return "contended-handoff-pause"
}

// handoffState is shared by the holders of one key. It is only touched
// inside the critical section, so the lock under test protects it.
type handoffState struct {
	lastHolder  int
	lastRelease time.Time
}

// contended runs N goroutines on one key: lock, hold, unlock, (pause), again.
func (e *env) contended(v variant, pause time.Duration) {
	wl := contendedWorkload(pause)
	n, hold := e.cfg.contN, e.cfg.hold
	inst := v.mustOpen(e, openOpts{ttl: 30 * time.Second})
	defer inst.close()
	key := e.key("cont")
	g := &guard{}
	cs := &calls{}
	st := &handoffState{lastHolder: -1}

	type worker struct {
		m        mutex
		waits    []time.Duration // waits that returned (failed ones included)
		censored []time.Duration // waits cut short by the end of the run
		handoffs []time.Duration
		holds    []time.Duration
		acq      int
		reacq    int
	}
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = &worker{m: inst.newMutex(key)}
		ws[i].waits = make([]time.Duration, 0, e.cfg.contMaxOps)
		ws[i].handoffs = make([]time.Duration, 0, e.cfg.contMaxOps)
		ws[i].holds = make([]time.Duration, 0, e.cfg.contMaxOps)
	}
	// Warm up one handle per worker (scripts, connections, subscriptions).
	for _, w := range ws {
		if cs.lock(context.Background(), w.m) != nil {
			continue
		}
		g.enter()
		g.bump()
		g.exit()
		_ = cs.unlock(context.Background(), w.m)
	}
	gc()

	s0 := e.snap(inst.calls, false)
	begin := time.Now()
	deadline := begin.Add(e.cfg.contDur)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := 0; it < e.cfg.contMaxOps && time.Now().Before(deadline); it++ {
				t0 := time.Now()
				err := cs.lock(ctx, w.m)
				t1 := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						w.censored = append(w.censored, t1.Sub(t0))
						return
					}
					w.waits = append(w.waits, t1.Sub(t0)) // a failed wait is a wait too
					time.Sleep(time.Millisecond)          // never spin on a failing Redis
					continue
				}
				late := !t1.Before(deadline)
				g.enter()
				if late {
					// Acquired after the end (sync.Mutex cannot be
					// cancelled): a wait, but not an acquisition of the run.
					w.censored = append(w.censored, t1.Sub(t0))
					g.bump()
					g.exit()
					_ = cs.unlock(context.Background(), w.m)
					return
				}
				prev, rel := st.lastHolder, st.lastRelease
				w.waits = append(w.waits, t1.Sub(t0))
				switch {
				case prev == i:
					w.reacq++
				case prev >= 0:
					w.handoffs = append(w.handoffs, t1.Sub(rel))
				}
				c := g.read()
				time.Sleep(hold)
				g.write(c)
				w.acq++
				st.lastHolder = i
				st.lastRelease = time.Now()
				w.holds = append(w.holds, st.lastRelease.Sub(t1))
				g.exit()
				_ = cs.unlock(context.Background(), w.m)
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	s1 := e.snap(inst.calls, false)
	d := diff(s0, s1)
	e.check(wl, v.name, g)

	var waits, handoffs, holds, censored []time.Duration
	acq, reacq := 0, 0
	minAcq, maxAcq := -1, 0
	for _, w := range ws {
		waits = append(waits, w.waits...)
		waits = append(waits, w.censored...)
		censored = append(censored, w.censored...)
		handoffs = append(handoffs, w.handoffs...)
		holds = append(holds, w.holds...)
		acq += w.acq
		reacq += w.reacq
		if minAcq < 0 || w.acq < minAcq {
			minAcq = w.acq
		}
		maxAcq = max(maxAcq, w.acq)
	}
	if end.After(deadline) {
		end = deadline
	}
	window := end.Sub(begin).Seconds()
	fa := float64(acq)
	e.rec(wl, v.name, "acq_per_s", fa/window)
	e.recPercentiles(wl, v.name, "wait", "ms", waits)
	e.rec(wl, v.name, "wait_max_ms", ms(percentile(waits, 1)))
	e.recPercentiles(wl, v.name, "handoff", "ms", handoffs)
	e.rec(wl, v.name, "reacq_share_pct", 100*float64(reacq)/max(fa, 1))
	e.rec(wl, v.name, "acq_per_goroutine_min", float64(minAcq))
	e.rec(wl, v.name, "acq_per_goroutine_max", float64(maxAcq))
	e.rec(wl, v.name, "hold_ms", ms(percentile(holds, 0.5)))
	e.rec(wl, v.name, "unfinished_waits", float64(len(censored)))
	e.rec(wl, v.name, "unfinished_wait_max_ms", ms(max(percentile(censored, 1), 0)))
	if v.name != libMutex {
		e.rec(wl, v.name, "redis_cmds_per_acq", float64(d.cmds)/max(fa, 1))
		e.rec(wl, v.name, "client_requests_per_acq", float64(d.clientCalls)/max(fa, 1))
		e.rec(wl, v.name, "redis_cpu_us_per_acq", us(d.redisCPU)/max(fa, 1))
		e.rec(wl, v.name, "redis_cmds_per_s", float64(d.cmds)/d.dur.Seconds())
		e.note(wl+"/cmds", "%s: %s", v.name, perOp(d, max(fa, 1)))
	}
	e.recCalls(wl, v.name, cs)
	if gu := giveUpsOf(inst); gu > 0 {
		e.rec(wl, v.name, "lock_calls_given_up", float64(gu))
	}
	logf("%-24s %-50s %6.0f acq/s  wait p50 %7.2fms p99 %8.2fms (n %d)  handoff p50 %6.2fms p99 %7.2fms (n %d)  reacq %3.0f%%  per-goroutine %d..%d  unfinished %d  errors %d (stalls %d)",
		wl, v.name, fa/window, ms(percentile(waits, 0.5)), ms(percentile(waits, 0.99)), len(waits),
		ms(percentile(handoffs, 0.5)), ms(percentile(handoffs, 0.99)), len(handoffs),
		100*float64(reacq)/max(fa, 1), minAcq, maxAcq, len(censored), cs.errs.Load(), cs.stalls.Load())
}

func giveUpsOf(i instance) int64 {
	if r, ok := i.(*redsyncInst); ok {
		return r.gu.n.Load()
	}
	return 0
}
