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
	inst := v.mustOpen(e, openOpts{ttl: 30 * time.Second})
	defer inst.close()

	type worker struct {
		m     mutex
		g     *guard
		lat   []time.Duration
		errs  int
		first error
	}
	ws := make([]*worker, g)
	perG := max(e.cfg.uncMaxOps/g, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.uncDur+30*time.Second)
	defer cancel()
	// A token of this run in every key name, so that the keys the run
	// leaves behind (latches, by their lock's name) can be counted.
	tok := fmt.Sprintf("unc%d", e.seq.Add(1))
	for i := range ws {
		ws[i] = &worker{m: inst.newMutex(e.key(tok, fmt.Sprint(i))), g: &guard{}, lat: make([]time.Duration, 0, perG)}
	}
	// Warm up: scripts loaded, connections dialled, caches primed.
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := w.m.lock(ctx); err != nil {
					fatalf("%s %s warm-up lock: %v", wl, v.name, err)
				}
				w.g.enter()
				w.g.bump()
				w.g.exit()
				if err := w.m.unlock(ctx); err != nil {
					fatalf("%s %s warm-up unlock: %v", wl, v.name, err)
				}
			}
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
				t0 := time.Now()
				if err := w.m.lock(ctx); err != nil {
					w.errs++
					if w.first == nil {
						w.first = err
					}
					continue
				}
				w.g.enter()
				w.g.bump()
				w.g.exit()
				if err := w.m.unlock(ctx); err != nil {
					w.errs++
					if w.first == nil {
						w.first = err
					}
				}
				w.lat = append(w.lat, time.Since(t0))
			}
		}()
	}
	s0 := e.snap(inst.calls, true)
	deadline = time.Now().Add(e.cfg.uncDur)
	close(start)
	wg.Wait()
	s1 := e.snap(inst.calls, true)
	left := e.countKeys(fmt.Sprintf("*lb:%s:%s:*", e.runID, tok))
	d := diff(s0, s1)

	var lat []time.Duration
	errs := 0
	var first error
	guards := make([]*guard, len(ws))
	for i, w := range ws {
		lat = append(lat, w.lat...)
		errs += w.errs
		if first == nil {
			first = w.first
		}
		guards[i] = w.g
	}
	e.check(wl, v.name, guards...)
	ops := float64(len(lat))
	// The window ends at the last goroutine's last op, not at the snapshot.
	el := d.dur.Seconds()
	e.rec(wl, v.name, "ops_per_s", ops/el)
	e.rec(wl, v.name, "latency_p50_us", us(percentile(lat, 0.50)))
	e.rec(wl, v.name, "latency_p99_us", us(percentile(lat, 0.99)))
	e.rec(wl, v.name, "allocs_per_op", float64(d.mallocs)/ops)
	e.rec(wl, v.name, "redis_cmds_per_op", float64(d.cmds)/ops)
	e.rec(wl, v.name, "script_calls_per_op", float64(d.scriptCalls)/ops)
	e.rec(wl, v.name, "client_requests_per_op", float64(d.clientCalls)/ops)
	e.rec(wl, v.name, "redis_cpu_us_per_op", us(d.redisCPU)/ops)
	e.rec(wl, v.name, "client_cpu_us_per_op", us(d.clientCPU)/ops)
	e.rec(wl, v.name, "script_exec_us_per_op", float64(d.scriptUsec)/ops)
	e.rec(wl, v.name, "keys_left_per_op", float64(left)/(ops+float64(20*g))) // the warm-up's ops used the same keys
	if errs > 0 {
		e.rec(wl, v.name, "errors", float64(errs))
		e.note(wl, "%s: %d errors (first: %v)", v.name, errs, first)
	}
	e.note(wl+"/cmds", "%s: %s", v.name, perOp(d, ops))
	logf("%-16s %-50s %9.0f ops/s  p50 %6.0fµs  p99 %6.0fµs  %5.1f allocs/op  %4.1f cmds/op  %4.2f req/op",
		wl, v.name, ops/el, us(percentile(lat, 0.5)), us(percentile(lat, 0.99)), float64(d.mallocs)/ops, float64(d.cmds)/ops, float64(d.clientCalls)/ops)
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
