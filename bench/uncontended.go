package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

func uncontendedWorkload(g int) string { return fmt.Sprintf("uncontended-%d", g) }

// uncontended runs lock+unlock loops, g goroutines each on its own key.
func (e *env) uncontended(v variant, g int) {
	wl := uncontendedWorkload(g)
	o := openOpts{ttl: 30 * time.Second}
	inst := v.mustOpen(e, o)
	defer inst.close()
	cs := &calls{}

	type worker struct {
		key string
		m   mutex
		s   *slot // its calls' context, cancelled by watch on overrun
		g   *guard
		lat []time.Duration // every attempt, failed ones included
		ok  int             // lock+unlock pairs that succeeded
	}
	ws := make([]*worker, g)
	slots := make([]*slot, g)
	perG := max(e.cfg.uncMaxOps/g, 1000)
	end := time.Now().Add(e.cfg.uncDur + 30*time.Second) // of the slots' contexts
	// A token of this run in every key name, so that the keys the run
	// leaves behind (latches, by their lock's name) can be counted.
	tok := fmt.Sprintf("unc%d", e.seq.Add(1))
	for i := range ws {
		key := e.key(tok, fmt.Sprint(i))
		slots[i] = newSlot(end)
		ws[i] = &worker{key: key, m: inst.newMutex(key), s: slots[i], g: &guard{}, lat: make([]time.Duration, 0, perG)}
	}
	stopWatch := watch(slots)
	// op is one lock+unlock pair; it returns how long it took.
	op := func(w *worker) time.Duration {
		t0 := time.Now()
		if err := w.s.lock(cs, w.m); err != nil {
			return time.Since(t0)
		}
		w.g.enter()
		w.g.bump()
		w.g.exit()
		if w.s.unlock(cs, w.m) == nil {
			w.ok++
		}
		return time.Since(t0)
	}
	// Warm up: scripts loaded, connections dialled, caches primed.
	const warmup = 20
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range warmup {
				op(w)
			}
			w.ok = 0
		}()
	}
	wg.Wait()
	gc()

	start := make(chan struct{})
	var deadline time.Time
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for len(w.lat) < cap(w.lat) && time.Now().Before(deadline) {
				w.lat = append(w.lat, op(w))
			}
		}()
	}
	s0 := e.snap(inst.calls, true)
	deadline = time.Now().Add(e.cfg.uncDur)
	close(start)
	wg.Wait()
	s1 := e.snap(inst.calls, true)
	stopWatch()
	left := e.countKeys(e.keyPattern() + tok + ":*")
	d := diff(s0, s1)

	var lat []time.Duration
	ok := 0
	guards := make([]*guard, len(ws))
	var keys []string
	var holders []mutex
	for i, w := range ws {
		lat = append(lat, w.lat...)
		ok += w.ok
		guards[i] = w.g
		keys = append(keys, w.key)
		holders = append(holders, w.m)
	}
	if v.name != libPing { // a PING is no lock: there is nothing to exclude
		n := min(len(ws), 8)
		e.probeExclusion(v, o, cs, keys[:n], holders[:n], guards[:n])
	}
	e.check(wl, v.name, guards...)
	ops := float64(ok)
	// The window runs from snapshot to snapshot: from just before the
	// goroutines start to just after the last of them returns, which is
	// after the end of its last op (started before the deadline; a stalled
	// call ends at callTimeout). Every count below is over that window.
	el := d.dur.Seconds()
	e.rec(wl, v.name, "ops_per_s", ops/el)
	e.recPercentiles(wl, v.name, "latency", "us", lat)
	e.rec(wl, v.name, "allocs_per_op", float64(d.mallocs)/ops)
	e.rec(wl, v.name, "redis_cmds_per_op", float64(d.cmds)/ops)
	e.rec(wl, v.name, "script_calls_per_op", float64(d.scriptCalls)/ops)
	e.rec(wl, v.name, "client_requests_per_op", float64(d.clientCalls)/ops)
	e.rec(wl, v.name, "redis_cpu_us_per_op", us(d.redisCPU)/ops)
	e.rec(wl, v.name, "client_cpu_us_per_op", us(d.clientCPU)/ops)
	e.rec(wl, v.name, "script_exec_us_per_op", float64(d.scriptUsec)/ops)
	e.rec(wl, v.name, "keys_left_per_op", float64(left)/(ops+float64(warmup*g))) // the warm-up's ops used the same keys
	e.recCalls(wl, v.name, cs)
	e.note(wl+"/cmds", "%s: %s", v.name, perOp(d, ops))
	logf("%-16s %-50s %9.0f ops/s  p50 %6.0fµs  p99 %6.0fµs (n %d)  %5.1f allocs/op  %4.1f cmds/op  %4.2f req/op  errors %d (stalls %d)",
		wl, v.name, ops/el, us(percentile(lat, 0.5)), us(percentile(lat, 0.99)), len(lat), float64(d.mallocs)/ops, float64(d.cmds)/ops, float64(d.clientCalls)/ops,
		cs.errs.Load(), cs.stalls.Load())
}

// probeExclusion checks mutual exclusion directly, after a run's window:
// for each key, its holder takes the lock and enters its guard, then a
// second client of the same library tries once to take the same lock. A
// success enters the guard while the holder is inside, which check reports
// as an overlap. None of these calls is in the run's measured numbers.
func (e *env) probeExclusion(v variant, o openOpts, cs *calls, keys []string, holders []mutex, guards []*guard) {
	o.name = ""
	probe := v.mustOpen(e, o)
	defer probe.close()
	ctx := context.Background()
	for i, m := range holders {
		if cs.lock(ctx, m) != nil {
			continue
		}
		guards[i].enter()
		guards[i].bump()
		pm := probe.newMutex(keys[i])
		if x, ok := probe.(exclusionProber); ok {
			pm = x.newProbe(keys[i]) // readers share: a writer probes a read hold
		}
		if ok, _ := cs.tryLock(ctx, pm); ok {
			guards[i].enter()
			guards[i].bump()
			_ = cs.unlock(ctx, pm)
		}
		guards[i].exit()
		_ = cs.unlock(ctx, m)
	}
}

// perOp formats the commands per op of a delta, most frequent first.
func perOp(d delta, ops float64) string {
	if ops == 0 {
		return ""
	}
	s := ""
	for i, part := range splitTop(d, 14) {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.2f", part.k, float64(part.v)/ops)
	}
	return s
}

type kv struct {
	k string
	v int64
}

func splitTop(d delta, n int) []kv {
	var l []kv
	for k, v := range d.byCmd {
		l = append(l, kv{k, v})
	}
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && (l[j].v > l[j-1].v || l[j].v == l[j-1].v && l[j].k < l[j-1].k); j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
	if len(l) > n {
		l = l[:n]
	}
	return l
}
