package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
)

// result is one line of results.json.
type result struct {
	Library  string  `json:"library"`
	Workload string  `json:"workload"`
	Metric   string  `json:"metric"`
	Median   float64 `json:"median"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
}

// write writes results.json, run.json and REPORT.md into the -out directory.
func (e *env) write() error {
	var res []result
	for _, k := range e.order {
		a := e.get(k.workload, k.library, k.metric)
		res = append(res, result{k.library, k.workload, k.metric, round6(a.Median), round6(a.Min), round6(a.Max)})
	}
	if err := writeJSON(filepath.Join(e.cfg.out, "results.json"), res); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(e.cfg.out, "run.json"), e.meta()); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.cfg.out, "REPORT.md"), e.report(), 0o644)
}

func writeJSON(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func round6(v float64) float64 {
	if v == 0 || math.IsNaN(v) {
		return v
	}
	p := math.Pow(10, 6-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// num formats a value with about three significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "–"
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 10000:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100 || a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return sig3(v)
	}
}

// sig3 formats v with three significant digits (whole numbers from 100 up).
func sig3(v float64) string {
	a := math.Abs(v)
	if a == 0 || a >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return strconv.FormatFloat(v, 'f', 2-int(math.Floor(math.Log10(a))), 64)
}

// cell formats a metric as median (min–max) over rounds: "–" when no round
// has it, and "[k of R rounds]" after it when only some rounds do.
func (e *env) cell(wl, lib, metric string) string {
	a := e.get(wl, lib, metric)
	if !a.OK {
		return "–"
	}
	s := num(a.Median)
	if a.N > 1 && num(a.Min) != num(a.Max) {
		s = fmt.Sprintf("%s (%s–%s)", s, num(a.Min), num(a.Max))
	}
	if a.N < e.cfg.rounds {
		s += fmt.Sprintf(" [%d of %d rounds]", a.N, e.cfg.rounds)
	}
	return s
}

// ratio formats a / b with three significant digits.
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	return sig3(a/b) + "×"
}

type md struct{ bytes.Buffer }

func (m *md) p(format string, args ...any) { fmt.Fprintf(&m.Buffer, format+"\n", args...) }

func (m *md) table(header []string, rows [][]string) {
	m.p("| %s |", strings.Join(header, " | "))
	seps := make([]string, len(header))
	for i := range seps {
		if i == 0 {
			seps[i] = "---"
		} else {
			seps[i] = "--:"
		}
	}
	m.p("| %s |", strings.Join(seps, " | "))
	for _, r := range rows {
		m.p("| %s |", strings.Join(r, " | "))
	}
	m.p("")
}

// med returns a metric's median, NaN when absent.
func (e *env) med(wl, lib, metric string) float64 {
	a := e.get(wl, lib, metric)
	if !a.OK {
		return math.NaN()
	}
	return a.Median
}

// bestPeer returns the peer row with the best median of metric (higher or
// lower is better) in the given rows.
func (e *env) bestPeer(wl, metric string, rows []variant, higher bool) (string, float64) {
	name, best := "", math.NaN()
	for _, v := range rows {
		if !v.peer {
			continue
		}
		x := e.med(wl, v.name, metric)
		if math.IsNaN(x) {
			continue
		}
		if math.IsNaN(best) || (higher && x > best) || (!higher && x < best) {
			name, best = v.name, x
		}
	}
	return name, best
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + runtime.GOARCH + ")"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown (" + runtime.GOARCH + ")"
}

// revision is the commit of the library under test.
type revision struct {
	Commit     string `json:"commit"`      // git rev-parse HEAD; "" when unknown
	Dirty      bool   `json:"dirty"`       // uncommitted changes outside bench/: the library under test differs from Commit
	BenchDirty bool   `json:"bench_dirty"` // uncommitted changes in bench/
}

func (r revision) String() string {
	if r.Commit == "" {
		return "revision unknown"
	}
	s := "commit " + r.Commit[:min(len(r.Commit), 12)]
	if r.Dirty {
		s += " plus uncommitted changes outside bench/"
	}
	if r.BenchDirty {
		s += " (bench/ itself has uncommitted changes)"
	}
	return s
}

// lualockRevision returns the commit of the library under test and whether
// the working tree had changes. main calls it at start, close to when go
// run compiled the library.
func lualockRevision() revision {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "HEAD").Output()
	if err != nil {
		return revision{}
	}
	changed := func(pathspec ...string) bool {
		st, err := exec.Command("git", append([]string{"-C", "..", "status", "--porcelain", "--"}, pathspec...)...).Output()
		return err == nil && len(bytes.TrimSpace(st)) > 0
	}
	return revision{
		Commit:     strings.TrimSpace(string(out)),
		Dirty:      changed(".", ":(exclude)bench"),
		BenchDirty: changed("bench"),
	}
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return runtime.GOOS + " " + strings.TrimSpace(string(b))
}

// depVersions returns the versions of the peer libraries and go-redis.
func depVersions() map[string]string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	want := map[string]bool{
		"github.com/bsm/redislock": true, "github.com/go-redsync/redsync/v4": true,
		"github.com/redis/rueidis": true, "github.com/redis/go-redis/v9": true,
	}
	out := map[string]string{}
	for _, d := range bi.Deps {
		if want[d.Path] {
			out[d.Path] = d.Version
		}
	}
	return out
}

// verdict is one target check.
type verdict struct {
	target, result string
	met            bool
	known          bool
}

func (v verdict) status() string {
	switch {
	case !v.known:
		return "**not measured**"
	case v.met:
		return "**met**"
	default:
		return "**MISSED**"
	}
}

func (e *env) report() []byte {
	var m md
	meta := e.meta()
	mode := meta.Mode
	if e.cfg.quick {
		mode += " (smoke test: reduced sizes, the numbers are not the issue's workloads)"
	}
	if len(meta.Only) > 0 {
		mode += fmt.Sprintf("; only %s (partial run)", strings.Join(meta.Only, ", "))
	}
	m.p("# lualock vs the Go Redis lock libraries")
	m.p("")
	m.p("Generated by `bench/` (`make bench`) from the numbers measured in this run; do not edit by hand. The same run description is in run.json, machine-readable.")
	m.p("")
	m.p("## Machine and run")
	m.p("")
	m.p("- Mode: **%s**; rounds: %d", mode, meta.Rounds)
	m.p("- Command: `%s`", meta.Command)
	m.p("- lualock: %s (the root module of this repository, `git rev-parse HEAD`)", meta.Revision)
	m.p("- CPU: %s, %d cores (GOMAXPROCS %d); %s; the machine is shared, so runs are noisy", meta.Machine.CPU, meta.Machine.Cores, meta.Machine.GOMAXPROCS, meta.Machine.Kernel)
	m.p("- Redis: %s on loopback (%s), no persistence", meta.Redis, map[bool]string{true: "started by the bench", false: "given with -addr"}[meta.OwnRedis])
	if meta.Replica {
		m.p("- With one replica (-replica): lualock (replica acknowledgement %s) waits for it after each acquisition unless off; the other libraries do not", meta.Ack)
	} else if meta.Ack != "" {
		m.p("- lualock's replica acknowledgement: %s (no replica: nothing to wait for)", meta.Ack)
	}
	m.p("- Go: %s; libraries: %s", meta.Go, meta.librariesText())
	m.p("- Sizes: %s", meta.sizesText())
	m.p("- Started %s, finished %s (%v)", meta.Started, meta.Finished, e.elapsed.Round(time.Second))
	if other, steal, ok := otherLoad(e.load0, e.load1); ok {
		m.p("- Other load during the run: processes other than the bench and its Redis used %.0f%% of one core on average; hypervisor steal %.1f%% of one core (from /proc/stat)", 100*other, 100*steal)
	}
	m.p("- Every library gets its own client per run with its defaults plus a connection name (CLIENT SETNAME, so that CLIENT LIST can tell its connections apart): go-redis `redis.NewClient(&redis.Options{Addr, ClientName})` (pool of 10 × GOMAXPROCS connections) for lualock, redislock and redsync; `rueidis.ClientOption{InitAddress, ClientName}` for rueidislock")
	m.p("- Overlap detector in every workload (CAS \"inside\" flag per lock + a counter incremented non-atomically across the hold): see *Mutual exclusion* below")
	m.p("")
	m.p("## Mutual exclusion")
	m.p("")
	if len(e.overlaps) == 0 {
		m.p("No overlap in any workload, for any library: no two holders were ever inside one critical section.")
	} else {
		m.p("**The overlap detector fired: two holders were inside one critical section. The run exited with status 3.**")
		m.p("")
		for _, o := range e.overlaps {
			m.p("- **%s**, %s, round %d: %s", o.library, o.workload, o.round, strings.Join(o.locks, "; "))
		}
		m.p("")
		m.p("Every other library and workload had none. The tables below still give the measurements of the runs that overlapped; read them knowing that the lock did not hold.")
	}
	m.p("")
	m.p("## How to read the tables")
	m.p("")
	m.p("- Cells are **median (min–max) over rounds**; a single number means the rounds agreed to three digits (or there was one round). \"[k of R rounds]\" after a cell: only k rounds had a value.")
	m.p("- Order: every workload runs each library in turn, rounds outermost, and the order rotates: %s. Keys a library leaves (lualock's unlock latches of releases whose reply was lost live 10 s) are thus not expired on the next library's time.", orderRule)
	m.p("- Percentiles need a sample: a p50 or p99 is computed only over at least %d values in a round, and shows \"–\" otherwise; the sample size is in the column next to it (n). Section 4 is the exception: it gives the median and maximum of the few (n) script calls it classifies, not tail percentiles.", minSample)
	m.p("- Every Lock, TryLock, Unlock and renewal call of every library has its own %v bound (except the waits a workload is about: the waiters of sections 4 and 5). *errors* counts failed calls per run (warm-up and probes included, a run's own end excluded); a *stall* is a failed call that hit the %v bound. A row that had any error is marked ⚠ and named under its table.", callTimeout, callTimeout)
	m.p("- *Redis cmds* is the sum over INFO commandstats `calls` deltas (calls that reached execution; `rejected_calls` are not in it) of the window: every script call counts once as EVALSHA and every `redis.call` inside it counts once more under its own name (on Redis 7.0 an EVAL that runs LLEN and GET adds eval 1, llen 1, get 1). It counts every client of the server, so it includes the libraries' connection handshakes (HELLO, CLIENT SETNAME/SETINFO), rueidis's PINGs, and, with -addr, anyone else's commands; the commands the bench's own admin connection sent in the window (INFO, CLIENT LIST, SCAN, LLEN…, counted in that connection by name) are subtracted. *requests* counts what the library's client sent (a script call is one request).")
	m.p("")

	verdicts := e.targets()
	m.p("## Targets")
	m.p("")
	var rows [][]string
	for _, v := range verdicts {
		rows = append(rows, []string{v.target, v.status(), v.result})
	}
	m.table([]string{"target", "status", "measured (medians)"}, rows)
	wl := contendedWorkload(0)
	var peers []string
	for _, v := range []string{libRedislock, libRedsync} {
		peers = append(peers, fmt.Sprintf("%s handoff p99 %s, wait p99 %s", v, e.pctText(wl, v, "handoff", "p99", "ms"), e.pctText(wl, v, "wait", "p99", "ms")))
	}
	why := ""
	if e.med(wl, libRedislock, "reacq_share_pct") >= 50 && e.med(wl, libRedsync, "reacq_share_pct") >= 50 {
		why = fmt.Sprintf(" Their handoffs are rare (a p99 needs %d) and short because the releasing goroutine usually takes the lock back first (section 2); their waiters' cost is in wait p99.", minSample)
	}
	m.p("The issue expects a handoff p99 of 10–370 ms for the polling peers with their documented settings; measured without a pause: %s.%s", strings.Join(peers, ", "), why)
	m.p("")

	e.reportUncontended(&m)
	e.reportContended(&m)
	e.reportFairDepth(&m)
	e.reportWaiting(&m)
	e.reportWatchdog(&m)
	e.reportRWLock(&m)

	m.p("## Notes gathered during the run")
	m.p("")
	var keys []string
	for k := range e.notes {
		if !strings.HasSuffix(k, "/cmds") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		m.p("None.")
	}
	for _, k := range keys {
		for _, n := range e.notes[k] {
			m.p("- %s: %s", k, n)
		}
	}
	m.p("")
	return m.Bytes()
}

func (e *env) cmdDetails(m *md, wl, title string) {
	l := e.notes[wl+"/cmds"]
	if len(l) == 0 {
		return
	}
	m.p("<details><summary>%s (last round)</summary>", title)
	m.p("")
	for _, n := range lastPerLibrary(l) {
		m.p("- %s", n)
	}
	m.p("")
	m.p("</details>")
	m.p("")
}

// lastPerLibrary keeps the last note of each library (notes are "lib: ...").
func lastPerLibrary(l []string) []string {
	last := map[string]string{}
	var order []string
	for _, n := range l {
		lib, _, _ := strings.Cut(n, ": ")
		if _, ok := last[lib]; !ok {
			order = append(order, lib)
		}
		last[lib] = n
	}
	out := make([]string, len(order))
	for i, lib := range order {
		out[i] = last[lib]
	}
	return out
}

// ---- errors and small samples ----

func names(vs []variant) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.name
	}
	return out
}

// hadErrors reports whether any round of lib in wl had a failed call.
func (e *env) hadErrors(wl, lib string) bool {
	a := e.get(wl, lib, "errors")
	return a.OK && a.Max > 0
}

// label is lib's row name, marked ⚠ when a round had a failed call.
func (e *env) label(wl, lib string) string {
	if e.hadErrors(wl, lib) {
		return lib + " ⚠"
	}
	return lib
}

// errMark is a remark for a verdict whose row had failed calls.
func (e *env) errMark(wl, lib string) string {
	if e.hadErrors(wl, lib) {
		return fmt.Sprintf(" ⚠ %s had failed calls (%s)", lib, wl)
	}
	return ""
}

// errCell is the errors column: failed calls per run, with the stalls among
// them when there were any.
func (e *env) errCell(wl, lib string) string {
	s := e.cell(wl, lib, "errors")
	if a := e.get(wl, lib, "stalls"); a.OK && a.Max > 0 {
		s += " (stalls " + e.cell(wl, lib, "stalls") + ")"
	}
	return s
}

// errorsText names the rows of a table that had failed calls, for the
// paragraph under it; "" when none had.
func (e *env) errorsText(wl string, libs ...string) string {
	var bad []string
	for _, lib := range libs {
		if !e.hadErrors(wl, lib) {
			continue
		}
		a, st := e.get(wl, lib, "errors"), e.get(wl, lib, "stalls")
		bad = append(bad, fmt.Sprintf("%s in %s: %s failed calls per run (median over rounds; at most %s), up to %s of them stalls at the %v bound",
			lib, wl, num(a.Median), num(a.Max), num(st.Max), callTimeout))
	}
	if len(bad) == 0 {
		return ""
	}
	return "⚠ Failed calls: " + strings.Join(bad, "; ") + ". A failed call is no operation; a stall holds its goroutine up to the bound, which lowers the row's throughput, and a failed Lock counts with its duration in the latency or wait percentiles where the table has them. The first error of each run is in the notes at the end."
}

// pctText is a percentile for prose: "0.56 ms (n 746)", or "– (n 18 <
// 100)" when no round had minSample values.
func (e *env) pctText(wl, lib, sample, pct, unit string) string {
	n := num(e.med(wl, lib, sample+"_n"))
	v := e.med(wl, lib, sample+"_"+pct+"_"+unit)
	if math.IsNaN(v) {
		return fmt.Sprintf("– (n %s < %d)", n, minSample)
	}
	return fmt.Sprintf("%s %s (n %s)", num(v), unit, n)
}

// ---- targets ----

func (e *env) targets() []verdict {
	var out []verdict
	// 1. Uncontended.
	for _, g := range e.cfg.uncGoroutines {
		wl := uncontendedWorkload(g)
		ping := e.med(wl, libPing, "ops_per_s")
		peer, best := e.bestPeer(wl, "ops_per_s", uncontendedVariants(), true)
		// The same two targets for lualock with its scripts sent by
		// go-redis's auto-pipeliner (an option, not the default), when
		// that row ran.
		for _, row := range []struct{ lib, with string }{
			{libLualock, ""},
			{libLualockAP, ", with Options.Scripter = AutoPipeline"},
			{libLualockRue, ", with Options.Scripter = lualockrueidis"},
			{libLualockPlain, ", with Options.Scripter = rdb"},
		} {
			lu := e.med(wl, row.lib, "ops_per_s")
			if row.lib != libLualock && math.IsNaN(lu) {
				continue
			}
			r := lu / ping
			out = append(out, verdict{
				target: fmt.Sprintf("uncontended lock+unlock, %d goroutine(s)%s: ≥ 0.45 × PING/s", g, row.with),
				result: fmt.Sprintf("%s %s ops/s = %s PING/s (%s)%s", row.lib, num(lu), ratio(lu, ping), num(ping), e.errMark(wl, row.lib)),
				met:    r >= 0.45, known: !math.IsNaN(r),
			}, verdict{
				target: fmt.Sprintf("uncontended, %d goroutine(s)%s: at least as fast as the fastest peer", g, row.with),
				result: fmt.Sprintf("%s %s ops/s vs %s %s ops/s (%s)%s", row.lib, num(lu), peer, num(best), ratio(lu, best), e.errMark(wl, row.lib)),
				met:    lu >= best, known: !math.IsNaN(lu) && !math.IsNaN(best),
			})
		}
		// Redis's work and the client's allocations per pair, default
		// Options, against redislock in the same run.
		lc, rc := e.med(wl, libLualock, "redis_cpu_us_per_op"), e.med(wl, libRedislockDoc, "redis_cpu_us_per_op")
		al := e.med(wl, libLualock, "allocs_per_op")
		out = append(out, verdict{
			target: fmt.Sprintf("uncontended, %d goroutine(s): Redis CPU per lock+unlock ≤ 1.1 × redislock's", g),
			result: fmt.Sprintf("lualock %s µs vs redislock %s µs (%s)", num(lc), num(rc), ratio(lc, rc)),
			met:    lc <= 1.1*rc, known: !math.IsNaN(lc) && !math.IsNaN(rc),
		}, verdict{
			target: fmt.Sprintf("uncontended, %d goroutine(s): allocations per lock+unlock ≤ 29 (whole process, rounded)", g),
			result: fmt.Sprintf("lualock %s allocs/op", num(al)),
			met:    math.Round(al) <= 29, known: !math.IsNaN(al),
		})
	}
	// 2. Contended handoff p99.
	for _, pause := range []time.Duration{0, e.cfg.pause} {
		wl := contendedWorkload(pause)
		var peers []string
		for _, v := range contendedVariants() {
			if v.peer && !strings.Contains(v.name, "tuned") {
				peers = append(peers, fmt.Sprintf("%s %s", strings.Fields(v.name)[0], e.pctText(wl, v.name, "handoff", "p99", "ms")))
			}
		}
		for _, lib := range []string{libLualock, libLualockFair} {
			h := e.med(wl, lib, "handoff_p99_ms")
			out = append(out, verdict{
				target: fmt.Sprintf("%s: handoff p99 ≤ 1 ms (%s)", wl, lib),
				result: fmt.Sprintf("%s%s; documented-setting peers: %s", e.pctText(wl, lib, "handoff", "p99", "ms"), e.errMark(wl, lib), strings.Join(peers, ", ")),
				met:    h <= 1, known: !math.IsNaN(h),
			})
		}
		// Fair lock wait bound.
		n := float64(e.cfg.contN)
		hold := e.med(wl, libLualockFair, "hold_ms")
		hand := e.med(wl, libLualockFair, "handoff_p50_ms")
		wait := e.med(wl, libLualockFair, "wait_p99_ms")
		bound := 1.3 * (n - 1) * (hold + hand)
		out = append(out, verdict{
			target: fmt.Sprintf("%s: fair lock wait p99 ≤ 1.3 × (N−1) × (hold + handoff)", wl),
			result: fmt.Sprintf("wait p99 %.2f ms (n %s) vs bound 1.3 × %d × (%.3f + %.3f) = %.2f ms (hold and handoff: the fair lock's own medians)%s",
				wait, num(e.med(wl, libLualockFair, "wait_n")), e.cfg.contN-1, hold, hand, bound, e.errMark(wl, libLualockFair)),
			met: wait <= bound, known: !math.IsNaN(bound) && !math.IsNaN(wait),
		})
	}
	// 3. Waiting at scale.
	wl := waitingWorkload
	size := fmt.Sprintf("%d waiters on %d locks", e.cfg.waitGoroutines, e.cfg.waitLocks)
	psc := e.med(wl, libLualock, "pubsub_conns")
	subs := e.med(wl, libLualock, "subscriptions")
	out = append(out, verdict{
		target: "waiting at scale: 1 pub/sub connection and ≤ 100 subscriptions (lualock; counted by the server, CLIENT LIST)",
		result: fmt.Sprintf("%s: %s pub/sub connection(s), %s subscriptions (sub + ssub + psub); lualock's own Stats(): %s and %s%s",
			size, num(psc), num(subs), num(e.med(wl, libLualock, "stats_pubsub_conns")), num(e.med(wl, libLualock, "stats_subscriptions")), e.errMark(wl, libLualock)),
		met: psc == 1 && subs <= 100, known: !math.IsNaN(psc) && !math.IsNaN(subs),
	})
	cps := e.med(wl, libLualock, "redis_cmds_per_s")
	limit := float64(e.cfg.waitGoroutines) / 100
	peer, best := e.bestPeer(wl, "redis_cmds_per_s", waitingVariants(), false)
	out = append(out, verdict{
		target: fmt.Sprintf("waiting at scale: near-zero Redis commands/s while nobody releases (taken as < 1 per 100 waiters per second, < %s/s here)", num(limit)),
		result: fmt.Sprintf("lualock %s cmds/s; lowest peer %s %s cmds/s", num(cps), peer, num(best)),
		met:    cps < limit, known: !math.IsNaN(cps),
	})
	fpsc := e.med(wl, libLualockFair, "pubsub_conns")
	fsubs := e.med(wl, libLualockFair, "subscriptions")
	fcps := e.med(wl, libLualockFair, "redis_cmds_per_s")
	out = append(out, verdict{
		target: "waiting at scale, fair lock (same targets, for information)",
		result: fmt.Sprintf("lualock (fair): %s pub/sub connection(s), %s subscriptions (one per waiter), %s cmds/s", num(fpsc), num(fsubs), num(fcps)),
		met:    fpsc == 1 && fsubs <= 100 && fcps < limit, known: !math.IsNaN(fpsc) && !math.IsNaN(fsubs) && !math.IsNaN(fcps),
	})
	// 4. Watchdog.
	wd := e.med(watchdogWorkload, libLualock, "requests_per_100_locks_per_period")
	out = append(out, verdict{
		target: "watchdog: ≤ 1 Redis call per 100 held locks per renewal period",
		result: fmt.Sprintf("lualock %s calls per 100 locks per period (%s calls per period for %d locks)%s", num(wd), num(e.med(watchdogWorkload, libLualock, "client_requests_per_period")), e.cfg.wdLocks, e.errMark(watchdogWorkload, libLualock)),
		met:    wd <= 1, known: !math.IsNaN(wd),
	})
	return out
}

// ---- workload sections ----

func (e *env) reportUncontended(m *md) {
	m.p("## 1. Uncontended lock + unlock")
	m.p("")
	m.p("Each goroutine locks and unlocks its own key in a loop for %v per run (PING: one `PING` per op). The window runs from a snapshot just before the goroutines start to one just after the last of them returns: it ends after the last op that started before the deadline, so a stalled call (cut at %v) lengthens it. ops/s counts the lock+unlock pairs that succeeded; the latency percentiles are over every attempt (n), failed ones included. `Redis cmds/op` is the INFO commandstats delta per op and counts the commands run inside scripts; `requests/op` is what the client sent (a script call is one request). allocs/op is the process-wide `runtime.MemStats.Mallocs` delta per op. CPU: Redis's `used_cpu_user + used_cpu_sys` and this process's getrusage, per op. *keys left/op*: keys named after the run's locks still in Redis right after the run (SCAN), per op: what outlives the lock.", e.cfg.uncDur, callTimeout)
	m.p("")
	m.p("There is no contention here: each key has one goroutine, so the overlap detector inside the loop can only catch a library that lets one goroutine in twice. Mutual exclusion is checked directly after each run's window instead: for up to 8 of the keys, the key's goroutine takes the lock and stays inside while a second client of the same library tries once to take it (lualock `TryLock(ctx, 0)`, redislock `Obtain` without retry, redsync `TryLockContext`, rueidislock `TryWithContext`); a success would be an overlap and fail the run. These calls are not in the measured numbers. PING is no lock and is not probed.")
	m.p("")
	for _, g := range e.cfg.uncGoroutines {
		wl := uncontendedWorkload(g)
		vs := uncontendedVariants()
		ping := e.med(wl, libPing, "ops_per_s")
		peer, best := e.bestPeer(wl, "ops_per_s", vs, true)
		m.p("### %d goroutine(s)", g)
		m.p("")
		var rows [][]string
		for _, v := range vs {
			x := e.med(wl, v.name, "ops_per_s")
			rows = append(rows, []string{e.label(wl, v.name), e.cell(wl, v.name, "ops_per_s"), ratio(x, best), ratio(x, ping),
				e.cell(wl, v.name, "latency_n"), e.cell(wl, v.name, "latency_p50_us"), e.cell(wl, v.name, "latency_p99_us"),
				e.cell(wl, v.name, "allocs_per_op"), e.cell(wl, v.name, "redis_cmds_per_op"),
				e.cell(wl, v.name, "client_requests_per_op"), e.cell(wl, v.name, "redis_cpu_us_per_op"),
				e.cell(wl, v.name, "client_cpu_us_per_op"), e.cell(wl, v.name, "keys_left_per_op"), e.errCell(wl, v.name)})
		}
		m.table([]string{"library", "ops/s", "× best peer", "× PING/s", "n (attempts)", "p50 µs", "p99 µs", "allocs/op", "Redis cmds/op", "requests/op", "Redis CPU µs/op", "client CPU µs/op", "keys left/op", "errors"}, rows)
		lu := e.med(wl, libLualock, "ops_per_s")
		fair := e.med(wl, libLualockFair, "ops_per_s")
		m.p("%s", e.uncontendedText(wl, g, lu, fair, ping, peer, best))
		m.p("")
		e.cmdDetails(m, wl, "Redis commands per op by command, scripts' inner commands included")
	}
}

func (e *env) uncontendedText(wl string, g int, lu, fair, ping float64, peer string, best float64) string {
	var s []string
	s = append(s, fmt.Sprintf("With %d goroutine(s) lualock does %s lock+unlock pairs per second, %.2f × the go-redis PING rate (%s/s).", g, num(lu), lu/ping, num(ping)))
	s = append(s, "A pair is two round trips, so a library that sends one request at a time cannot pass 0.5 × PING/s.")
	if lu >= best {
		s = append(s, fmt.Sprintf("It is the fastest library in this table, %s the best peer (%s).", ratio(lu, best), peer))
	} else {
		s = append(s, fmt.Sprintf("The fastest peer, %s, does %s ops/s: lualock reaches %s of it.", peer, num(best), ratio(lu, best)))
	}
	cpu := func(lib string) float64 {
		return e.med(wl, lib, "redis_cpu_us_per_op") + e.med(wl, lib, "client_cpu_us_per_op")
	}
	rl := libRedislockDoc
	s = append(s, fmt.Sprintf("Per op lualock costs %s µs of Redis CPU (scripts: %s µs of execution) and %s µs of client CPU, against %s, %s and %s µs for redislock, which also runs one script per call; lualock's release additionally writes an unlock latch key (SET … PX, Options.UnlockLatch, 10 s by default) so that a repeated Unlock replays its outcome, deleted in the background (one UNLINK per 20 ms of releases) once the reply is in, which leaves %s key(s) per op in Redis right after the run, and PUBLISHes to the lock's channel on every release.",
		num(e.med(wl, libLualock, "redis_cpu_us_per_op")), num(e.med(wl, libLualock, "script_exec_us_per_op")), num(e.med(wl, libLualock, "client_cpu_us_per_op")),
		num(e.med(wl, rl, "redis_cpu_us_per_op")), num(e.med(wl, rl, "script_exec_us_per_op")), num(e.med(wl, rl, "client_cpu_us_per_op")),
		num(e.med(wl, libLualock, "keys_left_per_op"))))
	if g > 1 && runtime.NumCPU() <= 4 {
		s = append(s, fmt.Sprintf("On this %d-core machine the bench and Redis share the CPU; with %d goroutines it is busy, so ops/s follows the total CPU per op (client + Redis): lualock %s µs, redislock %s µs, rueidislock tuned %s µs.",
			runtime.NumCPU(), g, num(cpu(libLualock)), num(cpu(rl)), num(cpu(libRueidisT))))
	}
	if ap := e.med(wl, libLualockAP, "ops_per_s"); !math.IsNaN(ap) {
		why := "concurrent calls share one write and one read, which saves both processes system calls per request"
		if g == 1 {
			why = "with one goroutine there is nothing to batch; what differs is how the auto-pipeliner drives its connection"
		}
		s = append(s, fmt.Sprintf("With Options.Scripter set to go-redis's auto-pipeliner (rdb.AutoPipeline(), go-redis ≥ 9.22, experimental there), the same scripts do %s ops/s (%s the default, %s PING/s, %s the best peer): %s.",
			num(ap), ratio(ap, lu), ratio(ap, ping), ratio(ap, best), why))
	}
	if rue := e.med(wl, libLualockRue, "ops_per_s"); !math.IsNaN(rue) {
		s = append(s, fmt.Sprintf("With Options.Scripter set to a rueidis client (extra/lualockrueidis), which pipelines concurrent calls and sends a lone one at once, the same scripts do %s ops/s (%s the default, %s the best peer) at %s µs of Redis and %s µs of client CPU per op.",
			num(rue), ratio(rue, lu), ratio(rue, best), num(e.med(wl, libLualockRue, "redis_cpu_us_per_op")), num(e.med(wl, libLualockRue, "client_cpu_us_per_op"))))
	}
	if pl := e.med(wl, libLualockPlain, "ops_per_s"); !math.IsNaN(pl) {
		s = append(s, fmt.Sprintf("By default lualock sends its scripts on a pipelined connection of its own beside go-redis's pool (a call alone is written at once and reads its own reply, polling the socket for up to Options.ReplySpin, 50µs, before it sleeps; concurrent calls are written together and their replies read as they come); with Options.Scripter set to the go-redis client itself, one call per connection, the same scripts do %s ops/s (%s the default) at %s µs of Redis and %s µs of client CPU per op.",
			num(pl), ratio(pl, lu), num(e.med(wl, libLualockPlain, "redis_cpu_us_per_op")), num(e.med(wl, libLualockPlain, "client_cpu_us_per_op"))))
	}
	s = append(s, fmt.Sprintf("The fair lock does %s ops/s (%s the reentrant lock): its scripts also read the queue and the timeout set.", num(fair), ratio(fair, lu)))
	if rd, wr, fe := e.med(wl, libLualockRead, "ops_per_s"), e.med(wl, libLualockWrite, "ops_per_s"), e.med(wl, libLualockFence, "ops_per_s"); !math.IsNaN(rd) {
		s = append(s, fmt.Sprintf("The read-write lock's read lock does %s ops/s (%s PING/s; it also writes a timeout key per hold and reads every reader's on release), its write lock %s ops/s (%s PING/s); the fenced lock %s ops/s, %s the reentrant lock (its acquire also INCRs the token counter).",
			num(rd), ratio(rd, ping), num(wr), ratio(wr, ping), num(fe), ratio(fe, lu)))
	}
	s = append(s, fmt.Sprintf("rueidislock writes KeyMajority × 2 − 1 keys per lock (3 by default: %s requests/op; 1 tuned) and pipelines concurrent requests over one connection, so it gains the most from concurrency.", num(e.med(wl, libRueidis, "client_requests_per_op"))))
	if t := e.errorsText(wl, names(uncontendedVariants())...); t != "" {
		s = append(s, t)
	}
	return strings.Join(s, " ")
}

func (e *env) reportContended(m *md) {
	for i, pause := range []time.Duration{0, e.cfg.pause} {
		wl := contendedWorkload(pause)
		vs := contendedVariants()
		if i == 0 {
			m.p("## 2. Contended handoff (%d goroutines, one key, hold %v, no pause)", e.cfg.contN, e.cfg.hold)
		} else {
			m.p("## 3. Contended handoff with a %v pause after each unlock", pause)
		}
		m.p("")
		m.p("Each goroutine loops lock → hold %v (time.Sleep) → unlock%s for %v per run. *wait*: Lock call to return (waits still pending at the end of the run count with their age so far; failed Lock calls count too). *handoff*: the previous holder's release (just before it calls Unlock) to another goroutine's Lock returning. *re-acq*: share of acquisitions by the goroutine that held the lock last. n: the size of the sample a percentile is taken from (no percentile under %d). Polling libraries use their documented retry setting and a tuned one, labelled.",
			e.cfg.hold, map[bool]string{true: fmt.Sprintf(" → sleep %v", pause), false: ""}[pause > 0], e.cfg.contDur, minSample)
		m.p("")
		if i == 0 {
			m.p("%s", redislockSettingText)
			m.p("")
		}
		ideal := e.med(wl, libMutex, "acq_per_s")
		_, bestH := e.bestPeer(wl, "handoff_p99_ms", vs, false)
		_, bestA := e.bestPeer(wl, "acq_per_s", vs, true)
		var rows [][]string
		for _, v := range vs {
			x := e.med(wl, v.name, "acq_per_s")
			h := e.med(wl, v.name, "handoff_p99_ms")
			rows = append(rows, []string{e.label(wl, v.name), e.cell(wl, v.name, "acq_per_s"), ratio(x, bestA), ratio(x, ideal),
				e.cell(wl, v.name, "wait_n"), e.cell(wl, v.name, "wait_p50_ms"), e.cell(wl, v.name, "wait_p99_ms"),
				e.cell(wl, v.name, "handoff_n"), e.cell(wl, v.name, "handoff_p50_ms"), e.cell(wl, v.name, "handoff_p99_ms"), ratio(h, bestH),
				e.cell(wl, v.name, "reacq_share_pct") + "%",
				e.cell(wl, v.name, "acq_per_goroutine_min") + " / " + e.cell(wl, v.name, "acq_per_goroutine_max"),
				e.cell(wl, v.name, "redis_cmds_per_acq"), e.cell(wl, v.name, "client_requests_per_acq"),
				e.cell(wl, v.name, "redis_cpu_us_per_acq"), e.cell(wl, v.name, "unfinished_waits"), e.errCell(wl, v.name)})
		}
		m.table([]string{"library", "acq/s", "× best peer", "× sync.Mutex", "waits (n)", "wait p50 ms", "wait p99 ms", "handoffs (n)", "handoff p50 ms", "handoff p99 ms", "handoff p99 × best peer", "re-acq", "acq/goroutine min / max", "Redis cmds/acq", "requests/acq", "Redis CPU µs/acq", "unfinished waits", "errors"}, rows)
		m.p("%s", e.contendedText(wl, pause))
		m.p("")
		e.cmdDetails(m, wl, "Redis commands per acquisition by command")
	}
}

func (e *env) contendedText(wl string, pause time.Duration) string {
	var s []string
	lu, fa := libLualock, libLualockFair
	f := func(lib, metric string) string { return num(e.med(wl, lib, metric)) }
	pct := func(lib, sample, p string) string { return e.pctText(wl, lib, sample, p, "ms") }
	s = append(s, fmt.Sprintf("lualock hands the lock to another goroutine in %s at p99 (median %s ms); the fair lock in %s (median %s ms).",
		pct(lu, "handoff", "p99"), f(lu, "handoff_p50_ms"), pct(fa, "handoff", "p99"), f(fa, "handoff_p50_ms")))
	var doc []string
	barging := true
	for _, v := range []string{libRedislock, libRedsync, libRueidis} {
		doc = append(doc, fmt.Sprintf("%s handoff p99 %s, re-acq %s%%, wait p99 %s", strings.Fields(v)[0], pct(v, "handoff", "p99"), f(v, "reacq_share_pct"), pct(v, "wait", "p99")))
		if v != libRueidis && e.med(wl, v, "reacq_share_pct") < 50 {
			barging = false
		}
	}
	s = append(s, "Documented settings: "+strings.Join(doc, "; ")+".")
	if barging {
		s = append(s, "A handoff is only counted when the lock goes to a goroutine other than its last holder. The polling libraries mostly give the lock back to the goroutine that just released it, so their few handoffs are polls that happened to land while the lock was free: too few for a p99, or short ones, and what polling costs shows in wait p99, in re-acq and in the min / max acquisitions per goroutine.")
	}
	if r := e.med(wl, lu, "reacq_share_pct"); r >= 50 {
		s = append(s, fmt.Sprintf("lualock's reentrant lock is not fair either: its last holder takes the lock back in %s%% of acquisitions, because it asks again before the woken waiter's attempt arrives (as with Redisson's RLock); its wait p99 is %s.", num(r), pct(lu, "wait", "p99")))
	} else {
		s = append(s, fmt.Sprintf("lualock's reentrant lock gives the lock back to its last holder in %s%% of acquisitions; its wait p99 is %s.", num(r), pct(lu, "wait", "p99")))
	}
	s = append(s, fmt.Sprintf("The fair lock serves the waiters in order: re-acq %s%%, %s to %s acquisitions per goroutine, wait p99 %s, at %s of the reentrant lock's throughput.",
		f(fa, "reacq_share_pct"), f(fa, "acq_per_goroutine_min"), f(fa, "acq_per_goroutine_max"), pct(fa, "wait", "p99"), ratio(e.med(wl, fa, "acq_per_s"), e.med(wl, lu, "acq_per_s"))))
	if pause > 0 {
		s = append(s, "With the pause the lock stays free while its last holder sleeps, so waiters that hear of the release in time get it: by a pub/sub message (lualock), a client-side-caching invalidation (rueidislock) or their next poll (redislock, redsync).")
	}
	s = append(s, fmt.Sprintf("Polling every millisecond (tuned rows) brings the peers' waits down but costs Redis commands for every poll: Redis cmds per acquisition are %s for lualock, %s for redislock tuned and %s for redsync tuned.",
		f(lu, "redis_cmds_per_acq"), f(libRedislockT, "redis_cmds_per_acq"), f(libRedsyncT, "redis_cmds_per_acq")))
	s = append(s, fmt.Sprintf("sync.Mutex, the in-process ideal, does %s acquisitions/s with a %s ms hold: the gap to it is the price of going through Redis.", f(libMutex, "acq_per_s"), f(libMutex, "hold_ms")))
	if !math.IsNaN(e.med(wl, libLualockAP, "acq_per_s")) {
		s = append(s, fmt.Sprintf("The row with Options.Scripter set to go-redis's auto-pipeliner (a throughput option for many concurrent callers, section 1) is slower here: handoff p99 %s and %s acquisitions/s against %s by default. After a batch returns, go-redis v9.22's auto-pipeliner waits for each of its callers to send its next command, or for a short silence, before it flushes again; here the callers do not (they hold the lock, or wait for a message), so the commands of a handoff wait out that silence.",
			pct(libLualockAP, "handoff", "p99"), f(libLualockAP, "acq_per_s"), f(lu, "acq_per_s")))
	}
	if t := e.errorsText(wl, names(contendedVariants())...); t != "" {
		s = append(s, t)
	}
	return strings.Join(s, " ")
}

// redislockSettingText says where redislock's "documented" retry setting
// comes from.
const redislockSettingText = "Where the redislock setting comes from: the README of `github.com/bsm/redislock` v0.9.4 shows `Obtain` with nil options only, that is one attempt and no retry. Its retry setting is in its godoc examples (example_test.go): `ExampleClient_Obtain_retry` uses `LimitRetry(LinearBackoff(100*time.Millisecond), 3)`, and `ExampleClient_Obtain_customDeadline` uses `LinearBackoff(500*time.Millisecond)` bounded by a context deadline. The *example* row uses `LinearBackoff(100ms)` from the first, without the limit of 3 retries: the bench's Lock must wait until it gets the lock, so `Obtain` retries every 100 ms until the run's end, as the second example bounds it by its context. redsync and rueidislock run with their defaults; redsync's Lock gives up after its tries (32) and the adapter calls it again, as its README says to."

func (e *env) reportFairDepth(m *md) {
	m.p("## 4. Fair lock: Redis server CPU versus queue depth")
	m.p("")
	m.p("%d real lualock fair waiters (goroutines blocked in Lock) queue behind a holder, and behind them *waiters* fake entries are appended to the queue and its deadline set (RPUSH, ZADD; each deadline one budget after the one ahead, as a join writes it; they never ask again, and none is due during the run): real goroutines that deep would be too heavy for the machine. The holder releases and the lock is handed down the real waiters %d times (each new holder releases at once). During that window SLOWLOG logs every command (threshold 0) and each EVALSHA is classified by script SHA1 and owner field: *acquire* is the call that took the lock (the handoff), *release* the call that released it. *join* and *re-ask* are the first two calls of a real waiter that joins the back of the queue afterwards, behind the fakes (its first attempt, then the one after subscribing). The EVALSHA column is the INFO commandstats usec delta of the window divided by the handoffs (acquire + release + anything else that ran). Times are Redis's own execution time of the script, network excluded. *queue B/waiter*: MEMORY USAGE (SAMPLES 0) of the queue list and the deadline set, per queued entry. The acquire, release and join columns are the median of the n calls of that kind classified in a round (n next to them), not tail percentiles, so the %d-value rule of the other sections does not apply.", e.cfg.depthK, e.cfg.depthK, minSample)
	m.p("")
	var rows [][]string
	for _, d := range e.cfg.depths {
		wl := fairDepthWorkload(d)
		c := func(metric string) string { return e.cell(wl, libLualockFair, metric) }
		depth := num(float64(d))
		if e.hadErrors(wl, libLualockFair) {
			depth += " ⚠"
		}
		rows = append(rows, []string{depth, c("queued"),
			c("acquire_server_us") + " (n " + c("acquire_n") + ")", c("release_server_us") + " (n " + c("release_n") + ")",
			c("join_server_us") + " (n " + c("join_n") + ")", c("reask_server_us"),
			c("evalsha_usec_per_handoff"), c("redis_cpu_us_per_handoff"),
			c("other_evalsha_in_window"), c("queue_bytes_per_waiter"), c("setup_s"), e.errCell(wl, libLualockFair)})
	}
	m.p("**%s**", libLualockFair)
	m.p("")
	m.table([]string{"waiters", "queued at start", "acquire µs (median of n)", "release µs (median of n)", "join µs (median of n)", "re-ask µs", "EVALSHA µs per handoff (commandstats)", "Redis CPU µs per handoff", "other calls in window", "queue B/waiter", "queue setup s", "errors"}, rows)
	m.p("| peer | fair lock |")
	m.p("| --- | --- |")
	for _, p := range []string{"redislock", "redsync", "rueidislock"} {
		m.p("| %s | n/a — no fair lock |", p)
	}
	m.p("")
	var s []string
	first, last := fairDepthWorkload(e.cfg.depths[0]), fairDepthWorkload(e.cfg.depths[len(e.cfg.depths)-1])
	a0, a1 := e.med(first, libLualockFair, "acquire_server_us"), e.med(last, libLualockFair, "acquire_server_us")
	r0, r1 := e.med(first, libLualockFair, "release_server_us"), e.med(last, libLualockFair, "release_server_us")
	j1 := e.med(last, libLualockFair, "join_server_us")
	s = append(s, fmt.Sprintf("From %d to %d queued waiters the acquisition grows from %s µs to %s µs of Redis time (%s) and the release from %s µs to %s µs (%s).",
		e.cfg.depths[0], e.cfg.depths[len(e.cfg.depths)-1], num(a0), num(a1), ratio(a1, a0), num(r0), num(r1), ratio(r1, r0)))
	s = append(s, "Every fair script is O(1) or O(log N) in the queue's length (docs/PROTOCOL.md, \"The fair queue at any depth\"): the handoff cuts only the new head's deadline (Redisson's own handoff rewrites every waiter's, one ZINCRBY each), a re-ask finds its place by its own deadline (ZCOUNT) rather than LPOS, a give-up from the middle leaves a tombstone rather than an LREM.")
	s = append(s, fmt.Sprintf("Joining the back of the queue costs %s µs per call at the largest depth. Every queued waiter re-asks at least once per FairWait/2 (2m30s with the default Options.FairWait of 5 min) to renew its deadline, so a deep queue also costs Redis that many calls while nobody releases.", num(j1)))
	others := 0.0
	for _, d := range e.cfg.depths {
		if x := e.med(fairDepthWorkload(d), libLualockFair, "other_evalsha_in_window"); x > 0 {
			others += x
		}
	}
	if others > 0 {
		s = append(s, "*Other calls* are EVALSHAs in the window that were neither the acquisition nor the release of a handoff: attempts of queued waiters that did not get the lock (timer retries, or a wake-up that came before its turn); they are in the commandstats column but not in the acquire and release columns.")
	}
	s = append(s, "Redis runs scripts on its single thread: while one runs, every other client waits, so the acquire column is also the latency it adds to everything else on that Redis.")
	for _, d := range e.cfg.depths {
		if t := e.errorsText(fairDepthWorkload(d), libLualockFair); t != "" {
			s = append(s, t)
		}
	}
	m.p("%s", strings.Join(s, " "))
	m.p("")
}

func (e *env) reportWaiting(m *md) {
	wl := waitingWorkload
	vs := waitingVariants()
	m.p("## 5. Waiting at scale (%d goroutines waiting on %d held locks)", e.cfg.waitGoroutines, e.cfg.waitLocks)
	m.p("")
	m.p("One holder per lock keeps it for the whole run (lualock and rueidislock renew it; redislock and redsync get a 5-minute TTL). %d goroutines then wait in Lock, %d per lock, with each library's documented settings; their Lock calls are bounded by the end of the run, not by the per-call bound. After %v of settling, a %v window measures what waiting costs while nobody releases. Connections are counted by the server at the end of the window: every connection of the library's client carries a name of its own (CLIENT SETNAME), and CLIENT LIST gives *connections* (those with that name), *pub/sub conns* (of them, those with flag P or a subscription), *subscriptions* (the sum of their sub + ssub + psub fields: channels, shard channels and patterns) and *tracking* (those with client-side-caching tracking on, flag t). *channels*: PUBSUB CHANNELS delta. Memory: HeapInuse and StackInuse deltas after GC, from before the client was made to the end of the window; *Redis MB*: the server's used_memory delta over the same span (keys, client buffers, pub/sub channels).",
		e.cfg.waitGoroutines, e.cfg.waitGoroutines/e.cfg.waitLocks, e.cfg.waitSettle, e.cfg.waitWindow)
	m.p("")
	_, best := e.bestPeer(wl, "redis_cmds_per_s", vs, false)
	var rows [][]string
	for _, v := range vs {
		x := e.med(wl, v.name, "redis_cmds_per_s")
		c := func(metric string) string { return e.cell(wl, v.name, metric) }
		rows = append(rows, []string{e.label(wl, v.name), c("connections"), c("pubsub_conns"), c("subscriptions"), c("pubsub_channels"), c("tracking_clients"),
			c("redis_cmds_per_s"), ratio(x, best), c("client_requests_per_s"),
			c("redis_cpu_pct") + "%", c("client_cpu_pct") + "%",
			c("redis_mem_mb"), c("heap_inuse_mb"), c("stack_inuse_mb"), c("goroutines"), e.errCell(wl, v.name)})
	}
	m.table([]string{"library", "connections", "pub/sub conns", "subscriptions", "channels", "tracking", "Redis cmds/s", "× best peer", "requests/s", "Redis CPU", "client CPU", "Redis MB", "heap MB", "stacks MB", "goroutines", "errors"}, rows)
	var s []string
	f := func(lib, metric string) string { return num(e.med(wl, lib, metric)) }
	s = append(s, fmt.Sprintf("The server counts %s pub/sub connection(s) and %s subscriptions for lualock's %d waiters: one channel per lock (lualock's own Stats() says %s and %s); the rest of its %s connections is the go-redis pool, opened by the waiters' first attempts. While nobody releases Redis sees %s commands/s (%s requests/s): the watchdog renewing the %d held locks and one fallback-timer retry per lock per MaxWaitTimer (10 s), not per waiter.",
		f(libLualock, "pubsub_conns"), f(libLualock, "subscriptions"), e.cfg.waitGoroutines, f(libLualock, "stats_pubsub_conns"), f(libLualock, "stats_subscriptions"), f(libLualock, "connections"),
		f(libLualock, "redis_cmds_per_s"), f(libLualock, "client_requests_per_s"), e.cfg.waitLocks))
	s = append(s, fmt.Sprintf("The fair lock wakes waiters one by one on their own channels, so it subscribes one channel per waiter (%s subscriptions on %s pub/sub connection(s)), and each waiter re-asks at least once per FairWait/2 to keep its place in the queue: %s commands/s (%s requests/s) in this window.",
		f(libLualockFair, "subscriptions"), f(libLualockFair, "pubsub_conns"), f(libLualockFair, "redis_cmds_per_s"), f(libLualockFair, "client_requests_per_s")))
	if fairPeriod := lualockDefaultFairWait / 2; e.cfg.waitWindow < fairPeriod {
		s = append(s, fmt.Sprintf("That period (%v with the default FairWait) is longer than the window (%v), so these re-asks may fall outside it; in steady state they cost up to one request per waiter per period, %s requests/s for %d waiters, each scanning its queue with LPOS.",
			fairPeriod, e.cfg.waitWindow, num(float64(e.cfg.waitGoroutines)/fairPeriod.Seconds()), e.cfg.waitGoroutines))
	}
	s = append(s, fmt.Sprintf("redislock and redsync poll: %s and %s commands/s, bounded by how fast Redis and their connection pools can serve %d pollers (the errors column counts pool timeouts and the like; redsync also gives up after 32 tries and is called again).",
		f(libRedislock, "redis_cmds_per_s"), f(libRedsync, "redis_cmds_per_s"), e.cfg.waitGoroutines))
	s = append(s, fmt.Sprintf("rueidislock waits on client-side-caching invalidations (tracking on %s of its %s connection(s), no pub/sub) and costs %s commands/s here: every change of a held key (its renewals included, see workload 6) invalidates it and wakes a waiter of that lock, which tries again.",
		f(libRueidis, "tracking_clients"), f(libRueidis, "connections"), f(libRueidis, "redis_cmds_per_s")))
	if e.cfg.waitWindow < 10*time.Second {
		s = append(s, fmt.Sprintf("The window (%v) is shorter than lualock's 10 s fallback timer, so its timer retries may fall outside it: run the full mode for that number.", e.cfg.waitWindow))
	}
	if t := e.errorsText(wl, names(vs)...); t != "" {
		s = append(s, t)
	}
	m.p("%s", strings.Join(s, " "))
	m.p("")
	e.cmdDetails(m, wl, "Redis commands per second by command")
}

func (e *env) reportWatchdog(m *md) {
	wl := watchdogWorkload
	vs := watchdogVariants()
	m.p("## 6. Watchdog at scale (%d held locks, lease %v)", e.cfg.wdLocks, e.cfg.wdLease)
	m.p("")
	m.p("%d locks are taken and held; the window covers %d renewal periods and starts half a period after a renewal round. lualock: `Options.WatchdogLease = %v`, renewed every lease/3 in batches of 500 locks per script call, all batches in one pipeline. rueidislock: `KeyValidity = %v`, each key renewed by its own goroutine every ExtendInterval (KeyValidity/2); it writes KeyMajority × 2 − 1 keys per lock (3 by default, 1 tuned). redislock and redsync have no auto-renewal: the *emulated* rows refresh every lock with one `Refresh` / `Extend` call every lease/3, from 16 goroutines, which is what an application would have to write. Calls are requests sent by the client; Redis cmds include the commands run inside scripts. Client CPU is the process's getrusage delta.",
		e.cfg.wdLocks, e.cfg.wdPeriods, e.cfg.wdLease, e.cfg.wdLease)
	m.p("")
	_, best := e.bestPeer(wl, "requests_per_100_locks_per_period", vs, false)
	var rows [][]string
	for _, v := range vs {
		x := e.med(wl, v.name, "requests_per_100_locks_per_period")
		rows = append(rows, []string{e.label(wl, v.name), e.cell(wl, v.name, "period_s") + " s", e.cell(wl, v.name, "client_requests_per_period"),
			e.cell(wl, v.name, "requests_per_100_locks_per_period"), ratio(x, best), e.cell(wl, v.name, "redis_cmds_per_period"),
			e.cell(wl, v.name, "client_cpu_ms_per_period"), e.cell(wl, v.name, "redis_cpu_ms_per_period"),
			e.cell(wl, v.name, "locks_lost"), e.errCell(wl, v.name)})
	}
	m.table([]string{"library", "renewal period", "calls/period", "calls per 100 locks per period", "× best peer", "Redis cmds/period", "client CPU ms/period", "Redis CPU ms/period", "locks lost", "errors"}, rows)
	var s []string
	s = append(s, fmt.Sprintf("lualock renews %d locks with %s calls per period (%s per 100 locks): one script call per 500 locks, sent together in one pipeline, so the cost per lock is the script's inner HEXISTS + PEXPIRE (%s Redis commands per period) rather than a round trip each.",
		e.cfg.wdLocks, num(e.med(wl, libLualock, "client_requests_per_period")), num(e.med(wl, libLualock, "requests_per_100_locks_per_period")), num(e.med(wl, libLualock, "redis_cmds_per_period"))))
	s = append(s, e.rueidisLoopText(wl, "requests_per_100_locks_per_period"))
	s = append(s, "Per second, divide by the period: lualock's period is lease/3, rueidislock's lease/2.")
	s = append(s, "A probe from a second client tries 1 lock in 100 after the window; any success is an overlap and fails the run. *errors* counts failed calls of the run: taking the locks, the emulated renewals, the probe and the final unlocks.")
	if t := e.errorsText(wl, names(vs)...); t != "" {
		s = append(s, t)
	}
	m.p("%s", strings.Join(s, " "))
	m.p("")
	e.cmdDetails(m, wl, "Redis commands per second by command")
}

// lualockDefaultFairWait is lualock's documented Options.FairWait default;
// the bench runs lualock with its defaults.
const lualockDefaultFairWait = 5 * time.Minute

// rueidisLoopText explains rueidislock's renewal cost from the watchdog
// numbers: one call per key per period is expected; far more is the
// self-invalidation loop of its default tracking mode.
func (e *env) rueidisLoopText(wl, metric string) string {
	def := e.med(wl, libRueidis, metric)
	tuned := e.med(wl, libRueidisT, metric)
	const keys = 3 // KeyMajority 2 → 3 keys per lock
	if math.IsNaN(def) {
		return ""
	}
	if def <= 3*keys*100 {
		return fmt.Sprintf("rueidislock sends about one call per key per period (%s per 100 locks with its defaults, 3 keys per lock; %s tuned, 1 key per lock).", num(def), num(tuned))
	}
	s := fmt.Sprintf("rueidislock with its defaults sends %s calls per 100 locks per period where one per key (300) would do: without NoLoopTracking, each renewal's PEXPIREAT invalidates the key on rueidislock's own tracking connection, and the lock's goroutine answers every invalidation of a held key with another renewal, so from their first renewal on held keys renew themselves in a loop as fast as the connection allows (rueidislock v1.0.69, the monitoring function in lock.go). With NoLoopTracking (the tuned row, Redis ≥ 7.0.5) it is %s per 100 locks.", num(def), num(tuned))
	if lost := e.med(wl, libRueidis, "locks_lost"); lost > 0 {
		s += fmt.Sprintf(" Under that load rueidislock reported %s of its %d held locks lost (their context cancelled) during the run, although nothing else touched them.", num(lost), e.cfg.wdLocks)
	}
	return s
}
