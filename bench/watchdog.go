package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const watchdogWorkload = "watchdog-at-scale"

// watchdog holds many locks with auto-renewal and measures what keeping
// them costs per renewal period: Redis calls and client CPU. lualock runs
// with WatchdogLease = lease (renewal every lease/3); rueidislock with
// KeyValidity = lease (renewal every lease/2, its ExtendInterval default).
// redislock and redsync have no auto-renewal: an emulation refreshes every
// lock one call at a time every lease/3, from 16 goroutines.
func (e *env) watchdog(v variant) {
	wl := watchdogWorkload
	n, lease := e.cfg.wdLocks, e.cfg.wdLease
	emulated := v.name == libRedislockEm || v.name == libRedsyncEm
	period := lease / 3
	if v.name == libRueidis || v.name == libRueidisT {
		period = lease / 2
	}
	inst := v.mustOpen(e, openOpts{ttl: lease, wdLease: lease})
	defer inst.close()
	cs := &calls{}
	gc()

	keys := make([]string, n)
	hs := make([]mutex, n)
	guards := make([]*guard, n)
	for i := range keys {
		keys[i] = e.key("wd", strconv.Itoa(i))
		hs[i] = inst.newMutex(keys[i])
		guards[i] = &guard{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	setupStart := time.Now()
	var retries atomic.Int64
	parallel(32, n, func(i int) {
		r, err := hold(ctx, cs, hs[i])
		if err != nil {
			fatalf("%s %s: lock %d: %v", wl, v.name, i, err)
		}
		retries.Add(int64(r))
		guards[i].enter()
		guards[i].bump()
	})
	setup := time.Since(setupStart)
	if r := retries.Load(); r > 0 {
		e.note(wl, "%s: taking the %d free locks needed %d retried attempts (the first attempt failed)", v.name, n, r)
	}

	// The emulated watchdog: every period, refresh every lock.
	stopRefresh := make(chan struct{})
	var refreshWG sync.WaitGroup
	if emulated {
		refreshWG.Add(1)
		go func() {
			defer refreshWG.Done()
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-stopRefresh:
					return
				case <-t.C:
				}
				parallel(16, n, func(i int) { _ = cs.renew(ctx, hs[i]) })
			}
		}()
	}

	// Start the window half a period after a renewal round, so that it
	// holds exactly wdPeriods rounds of a once-per-period renewer; renewers
	// with one timer per lock are spread evenly anyway.
	e.alignToRenewal(inst, period)
	time.Sleep(period / 2)
	s0 := e.snap(inst.calls, false)
	time.Sleep(time.Duration(e.cfg.wdPeriods) * period)
	s1 := e.snap(inst.calls, false)
	d := diff(s0, s1)

	// Overlap probe: another client must not get any of the locks.
	probe := v.mustOpen(e, openOpts{ttl: lease, wdLease: lease})
	step := max(n/100, 1)
	probed, lost := 0, 0
	lateLost := 0
	for i := 0; i < n; i += step {
		probed++
		if hs[i].lost() {
			// The library told its holder the lock is gone (its context
			// is done): the holder leaves the critical section, and a
			// probe that now gets the lock is no overlap.
			lost++
			guards[i].exit()
			continue
		}
		pm := probe.newMutex(keys[i])
		ok, err := cs.tryLock(ctx, pm)
		if err != nil {
			continue
		}
		if ok {
			if hs[i].lost() {
				lateLost++
			}
			guards[i].enter() // the holder is still inside: an overlap
			guards[i].bump()
			_ = cs.unlock(ctx, pm)
		}
	}
	if lateLost > 0 {
		e.note(wl, "%s: %d probed locks were taken by the probe and only reported lost to their holder afterwards", v.name, lateLost)
	}
	for i := range hs {
		if i%step != 0 && hs[i].lost() {
			lost++ // not probed, counted too
		}
	}
	probe.close()
	close(stopRefresh)
	refreshWG.Wait()
	e.check(wl, v.name, guards...)
	parallel(32, n, func(i int) {
		guards[i].exit()
		_ = cs.unlock(ctx, hs[i])
	})

	periods := d.dur.Seconds() / period.Seconds()
	e.rec(wl, v.name, "period_s", period.Seconds())
	e.rec(wl, v.name, "setup_s", setup.Seconds())
	e.rec(wl, v.name, "client_requests_per_period", float64(d.clientCalls)/periods)
	e.rec(wl, v.name, "requests_per_100_locks_per_period", float64(d.clientCalls)/periods/float64(n)*100)
	e.rec(wl, v.name, "redis_cmds_per_period", float64(d.cmds)/periods)
	e.rec(wl, v.name, "client_cpu_ms_per_period", ms(d.clientCPU)/periods)
	e.rec(wl, v.name, "redis_cpu_ms_per_period", ms(d.redisCPU)/periods)
	e.rec(wl, v.name, "locks_lost", float64(lost))
	if lost > 0 {
		e.note(wl, "%s: %d of %d held locks were reported lost by the library during the run", v.name, lost, n)
	}
	e.recCalls(wl, v.name, cs)
	e.note(wl+"/cmds", "%s: %s", v.name, perSecond(d))
	logf("%-18s %-42s %d locks, period %v: %8.1f requests/period (%6.2f per 100 locks)  %9.0f redis cmds/period  client CPU %7.1fms/period  redis CPU %7.1fms/period  lost %d/%d  errors %d (stalls %d)  (setup %.1fs)",
		wl, v.name, n, period, float64(d.clientCalls)/periods, float64(d.clientCalls)/periods/float64(n)*100,
		float64(d.cmds)/periods, ms(d.clientCPU)/periods, ms(d.redisCPU)/periods, lost, probed, cs.errs.Load(), cs.stalls.Load(), setup.Seconds())
}

// alignToRenewal waits (up to 1.5 periods) for a burst of renewal requests
// after at least a quarter period of silence: the start of a renewal round
// of a once-per-period renewer. Renewers that never fall silent return at
// the timeout.
func (e *env) alignToRenewal(inst instance, period time.Duration) {
	deadline := time.Now().Add(period * 3 / 2)
	last, quietSince := inst.calls(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
		n := inst.calls()
		if n != last {
			if time.Since(quietSince) >= period/4 {
				return
			}
			last, quietSince = n, time.Now()
		}
	}
}

// hold takes a free lock for a holder with TryLock, retried a bounded
// number of times. (A blocking Lock is not used: rueidislock's WithContext
// can wait for an invalidation that never comes when its attempt on a free
// key timed out, and it would hold the run up until its context ends.)
func hold(ctx context.Context, cs *calls, m mutex) (retries int, err error) {
	var last error
	for i := range 100 {
		ok, err := cs.tryLock(ctx, m)
		if ok {
			return i, nil
		}
		if ctx.Err() != nil {
			return i, ctx.Err()
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return 100, fmt.Errorf("a free lock was not obtained in 100 attempts (last error: %v)", last)
}

// parallel runs f(0..n-1) on w goroutines.
func parallel(w, n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
