package main

import (
	"strings"
	"testing"
	"time"
)

// testEnv is an env with no Redis: enough to record samples and report.
func testEnv(cfg config) *env {
	return &env{cfg: cfg, samples: map[sampleKey][]float64{}, notes: map[string][]string{}}
}

// TestCheck_overlap checks the overlap detector: two holders inside one
// critical section, or an increment lost, are recorded and make the bench
// exit with status 3; clean runs record 0 and exit 0.
func TestCheck_overlap(t *testing.T) {
	e := testEnv(config{})
	clean := &guard{}
	for range 2 {
		clean.enter()
		clean.bump()
		clean.exit()
	}
	e.check("wl", "clean", clean)
	if got := e.med("wl", "clean", "overlaps"); got != 0 || e.exitStatus() != 0 {
		t.Fatalf("clean guard: overlaps %v, exit status %d; want 0, 0", got, e.exitStatus())
	}

	both := &guard{} // a second holder enters before the first leaves
	both.enter()
	v := both.read()
	both.enter()
	both.bump()
	both.exit()
	both.write(v) // the first holder's increment overwrites the second's
	both.exit()
	lost := &guard{} // one holder, but the counter missed an entry
	lost.enter()
	lost.exit()
	e.check("wl", "broken", clean, both, lost)
	if got := e.med("wl", "broken", "overlaps"); got != 2 {
		t.Errorf("overlaps recorded: %v, want 2 (locks #1 and #2)", got)
	}
	if len(e.overlaps) != 1 || len(e.overlaps[0].locks) != 2 ||
		!strings.HasPrefix(e.overlaps[0].locks[0], "lock #1: 1 overlapping entries, counter 1 after 2 entries") ||
		!strings.HasPrefix(e.overlaps[0].locks[1], "lock #2: 0 overlapping entries, counter 0 after 1 entries") {
		t.Errorf("overlaps kept for the report: %+v", e.overlaps)
	}
	if got := e.exitStatus(); got != 3 {
		t.Errorf("exit status %d, want 3", got)
	}
}

// TestExitStatus_quickBudget: a -quick run that overruns its budget fails.
func TestExitStatus_quickBudget(t *testing.T) {
	e := testEnv(config{quick: true})
	e.elapsed = quickBudget - time.Second
	if got := e.exitStatus(); got != 0 {
		t.Errorf("quick run within its budget: exit status %d, want 0", got)
	}
	e.elapsed = quickBudget + time.Second
	if got := e.exitStatus(); got != 5 {
		t.Errorf("quick run over its budget: exit status %d, want 5", got)
	}
	e.cfg.quick = false
	if got := e.exitStatus(); got != 0 {
		t.Errorf("full run: exit status %d, want 0 (no budget)", got)
	}
}

// TestTargets_verdicts checks the target table's verdicts from synthetic
// medians: met, missed, and not measured when a number is absent.
func TestTargets_verdicts(t *testing.T) {
	e := testEnv(config{uncGoroutines: []int{1, 32}, contN: 8, waitGoroutines: 10000, waitLocks: 100, wdLocks: 10000})
	u1, u32 := uncontendedWorkload(1), uncontendedWorkload(32)
	e.rec(u1, libPing, "ops_per_s", 10000)
	e.rec(u1, libLualock, "ops_per_s", 5000)
	e.rec(u1, vRedislockU.name, "ops_per_s", 4000)
	e.rec(u32, libPing, "ops_per_s", 100000)
	e.rec(u32, libLualock, "ops_per_s", 30000)
	e.rec(u32, libLualockAP, "ops_per_s", 50000)
	e.rec(u32, vRueidisT.name, "ops_per_s", 60000)
	e.rec(waitingWorkload, libLualock, "pubsub_conns", 1)
	e.rec(waitingWorkload, libLualock, "subscriptions", 100)
	e.rec(waitingWorkload, libLualock, "redis_cmds_per_s", 57)
	e.rec(watchdogWorkload, libLualock, "requests_per_100_locks_per_period", 0.2)

	got := map[string]string{}
	for _, v := range e.targets() {
		got[v.target] = v.status()
	}
	want := map[string]string{
		"uncontended lock+unlock, 1 goroutine(s): ≥ 0.45 × PING/s":                                                 "**met**",
		"uncontended, 1 goroutine(s): at least as fast as the fastest peer":                                        "**met**",
		"uncontended lock+unlock, 32 goroutine(s): ≥ 0.45 × PING/s":                                                "**MISSED**",
		"uncontended, 32 goroutine(s): at least as fast as the fastest peer":                                       "**MISSED**",
		"uncontended lock+unlock, 32 goroutine(s), with Options.Scripter = AutoPipeline: ≥ 0.45 × PING/s":          "**met**",
		"uncontended, 32 goroutine(s), with Options.Scripter = AutoPipeline: at least as fast as the fastest peer": "**MISSED**",
		"contended-handoff: handoff p99 ≤ 1 ms (lualock)":                                                          "**not measured**",
		"watchdog: ≤ 1 Redis call per 100 held locks per renewal period":                                           "**met**",
	}
	for target, status := range want {
		if got[target] != status {
			t.Errorf("%q: %q, want %q", target, got[target], status)
		}
	}
	for target, status := range got {
		if strings.HasPrefix(target, "waiting at scale: 1 pub/sub") && status != "**met**" {
			t.Errorf("%q: %q, want met", target, status)
		}
		if strings.Contains(target, "1 goroutine(s), with Options.Scripter") {
			t.Errorf("%q reported for a run without the auto-pipeliner row", target)
		}
	}
}

// TestDiff checks that a delta leaves out the bench's own admin commands
// and counts script calls and their time.
func TestDiff(t *testing.T) {
	a := snapshot{
		cmds:  map[string]cmdStat{"evalsha": {calls: 10, usec: 100}, "info": {calls: 5}, "ping": {calls: 3}},
		admin: map[string]int64{"info": 5, "ping": 1},
		cpu:   1.0,
	}
	b := snapshot{
		cmds:  map[string]cmdStat{"evalsha": {calls: 30, usec: 350}, "info": {calls: 7}, "ping": {calls: 6}, "publish": {calls: 4}},
		admin: map[string]int64{"info": 7, "ping": 2},
		cpu:   1.5,
	}
	d := diff(a, b)
	if d.cmds != 26 || d.scriptCalls != 20 || d.evalshaUsec != 250 || d.scriptUsec != 250 {
		t.Errorf("cmds %d, script calls %d, evalsha µs %d, script µs %d; want 26, 20, 250, 250", d.cmds, d.scriptCalls, d.evalshaUsec, d.scriptUsec)
	}
	if _, ok := d.byCmd["info"]; ok || d.byCmd["ping"] != 2 || d.byCmd["publish"] != 4 {
		t.Errorf("by command %v: want no info (all the bench's own), ping 2 (3 less the bench's 1), publish 4", d.byCmd)
	}
	if d.redisCPU.Seconds() != 0.5 {
		t.Errorf("Redis CPU %v, want 500ms", d.redisCPU)
	}
}
