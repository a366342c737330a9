package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// runMeta is run.json: what a run was, so that a quick or partial result
// cannot pass for a full one. REPORT.md's header prints the same.
type runMeta struct {
	Mode      string                    `json:"mode"`      // "full" or "quick"
	Only      []string                  `json:"only"`      // -only: the workloads run; empty: all
	Rounds    int                       `json:"rounds"`    // rounds of every workload
	Order     string                    `json:"order"`     // how libraries are ordered within a round
	Command   string                    `json:"command"`   // the exact command, from bench/
	Revision  revision                  `json:"revision"`  // of the library under test
	Go        string                    `json:"go"`        // toolchain that built the bench
	Redis     string                    `json:"redis"`     // redis_version
	OwnRedis  bool                      `json:"own_redis"` // the bench started its own redis-server (false: -addr)
	Replica   bool                      `json:"replica"`   // -replica: that server had a replica
	Ack       string                    `json:"ack"`       // -ack: lualock's replica acknowledgement
	Libraries map[string]string         `json:"libraries"` // module versions of the peers and go-redis
	Machine   machine                   `json:"machine"`
	Started   string                    `json:"started"`   // RFC 3339, UTC
	Finished  string                    `json:"finished"`  // RFC 3339, UTC
	ElapsedS  float64                   `json:"elapsed_s"` // wall time of the workloads
	Rules     rules                     `json:"rules"`
	Sizes     map[string]map[string]any `json:"sizes"` // per workload family
}

type machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Kernel     string `json:"kernel"`
}

// rules are the report's fixed thresholds.
type rules struct {
	CallTimeoutS float64 `json:"call_timeout_s"` // per-call bound; a call cut by it is a stall
	MinSample    int     `json:"min_sample"`     // smallest sample a percentile is reported for
}

const orderRule = "round r (from 0) runs the libraries of a workload starting at row r mod n and wrapping; the bench's keys are deleted after every library's run"

func (e *env) meta() runMeta {
	c := e.cfg
	mode := "full"
	if c.quick {
		mode = "quick"
	}
	only := []string{}
	for w := range c.only {
		only = append(only, w)
	}
	sort.Strings(only)
	sec := func(d time.Duration) float64 { return d.Seconds() }
	return runMeta{
		Mode:      mode,
		Only:      only,
		Rounds:    c.rounds,
		Order:     orderRule,
		Command:   strings.TrimRight("cd bench && go run . "+strings.Join(os.Args[1:], " "), " "),
		Revision:  e.revision,
		Go:        runtime.Version(),
		Redis:     e.redisVersion,
		OwnRedis:  e.startedServer,
		Replica:   e.replicated,
		Ack:       c.ack.String(),
		Libraries: depVersions(),
		Machine:   machine{CPU: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Kernel: kernel()},
		Started:   e.started.UTC().Format(time.RFC3339),
		Finished:  e.started.Add(e.elapsed).UTC().Format(time.RFC3339),
		ElapsedS:  e.elapsed.Round(time.Second).Seconds(),
		Rules:     rules{CallTimeoutS: sec(callTimeout), MinSample: minSample},
		Sizes: map[string]map[string]any{
			"uncontended": {"goroutines": c.uncGoroutines, "duration_s": sec(c.uncDur), "max_ops_per_run": c.uncMaxOps},
			"contended": {"goroutines": c.contN, "duration_s": sec(c.contDur), "hold_ms": c.hold.Milliseconds(),
				"pause_ms": c.pause.Milliseconds(), "max_ops_per_goroutine": c.contMaxOps},
			"fair": {"depths": c.depths, "handoffs_per_depth": c.depthK, "joins_per_depth": c.depthJoins},
			"waiting": {"goroutines": c.waitGoroutines, "locks": c.waitLocks, "settle_s": sec(c.waitSettle),
				"window_s": sec(c.waitWindow)},
			"watchdog": {"locks": c.wdLocks, "lease_s": sec(c.wdLease), "periods": c.wdPeriods},
		},
	}
}

// sizesText prints Sizes for the report, one workload family per item.
func (m runMeta) sizesText() string {
	var names []string
	for n := range m.Sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		var kv []string
		for k, v := range m.Sizes[n] {
			kv = append(kv, fmt.Sprintf("%s %v", k, v))
		}
		sort.Strings(kv)
		parts = append(parts, fmt.Sprintf("%s (%s)", n, strings.Join(kv, ", ")))
	}
	return strings.Join(parts, "; ")
}

// librariesText prints Libraries for the report.
func (m runMeta) librariesText() string {
	var parts []string
	for p, v := range m.Libraries {
		parts = append(parts, fmt.Sprintf("`%s` %s", p, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
