package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// env is the state of one bench run: the Redis under test, the admin
// connection and the samples gathered so far.
type env struct {
	cfg     config
	admin   *redis.Client
	runID   string
	seq     atomic.Int64
	round   int
	elapsed time.Duration

	startedServer bool
	revision      string // of the library under test, at start
	load0, load1  load   // the machine's load at start and end

	redisVersion string

	mu      sync.Mutex
	samples map[sampleKey][]float64
	order   []sampleKey
	notes   map[string][]string // workload -> notes gathered while running
}

type sampleKey struct{ library, workload, metric string }

func newEnv(cfg config) (*env, error) {
	e := &env{
		cfg:     cfg,
		admin:   newAdmin(cfg.addr),
		runID:   strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		samples: map[sampleKey][]float64{},
		notes:   map[string][]string{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := e.info(ctx, "server")
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", cfg.addr, err)
	}
	e.redisVersion = info["redis_version"]
	return e, nil
}

// key returns a key name unique to this run.
func (e *env) key(parts ...string) string {
	return fmt.Sprintf("lb:%s:%s:%d", e.runID, strings.Join(parts, ":"), e.seq.Add(1))
}

// rec stores one round's value of a metric.
func (e *env) rec(workload, library, metric string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	k := sampleKey{library, workload, metric}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.samples[k]; !ok {
		e.order = append(e.order, k)
	}
	e.samples[k] = append(e.samples[k], v)
}

// note keeps a remark for the report (deduplicated).
func (e *env) note(workload, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.notes[workload] {
		if n == s {
			return
		}
	}
	e.notes[workload] = append(e.notes[workload], s)
}

// agg is a metric over the rounds.
type agg struct {
	Median, Min, Max float64
	N                int
	OK               bool
}

func (e *env) get(workload, library, metric string) agg {
	e.mu.Lock()
	v := append([]float64(nil), e.samples[sampleKey{library, workload, metric}]...)
	e.mu.Unlock()
	if len(v) == 0 {
		return agg{}
	}
	sort.Float64s(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return agg{Median: med, Min: v[0], Max: v[len(v)-1], N: len(v), OK: true}
}

// ---- Redis observation (admin connection) ----

func (e *env) info(ctx context.Context, section string) (map[string]string, error) {
	s, err := e.admin.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

type cmdStat struct{ calls, usec int64 }

// snapshot is the server-side state a measurement window starts and ends with.
type snapshot struct {
	at    time.Time
	cmds  map[string]cmdStat
	cpu   float64 // used_cpu_user + used_cpu_sys, seconds
	calls int64   // client-side requests of the library under test
	rus   time.Duration
	mem   runtime.MemStats
}

// adminCommands are the commands the bench itself sends; they are left out
// of every command count.
var adminCommands = map[string]bool{
	"info": true, "client|list": true, "pubsub|channels": true, "pubsub|numpat": true,
	"pubsub|numsub": true, "config|set": true, "config|get": true, "slowlog|get": true,
	"slowlog|reset": true, "slowlog|len": true, "llen": true, "dbsize": true, "scan": true,
}

func (e *env) snap(calls func() int64, withMem bool) snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s snapshot
	if withMem {
		runtime.ReadMemStats(&s.mem)
	}
	s.rus = cpuTime()
	if calls != nil {
		s.calls = calls()
	}
	s.at = time.Now()
	info, err := e.info(ctx, "commandstats")
	if err != nil {
		fatalf("INFO commandstats: %v", err)
	}
	s.cmds = map[string]cmdStat{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(v, ",") {
			a, b, _ := strings.Cut(f, "=")
			switch a {
			case "calls":
				st.calls, _ = strconv.ParseInt(b, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(b, 10, 64)
			}
		}
		s.cmds[name] = st
	}
	cpu, err := e.info(ctx, "cpu")
	if err != nil {
		fatalf("INFO cpu: %v", err)
	}
	u, _ := strconv.ParseFloat(cpu["used_cpu_user"], 64)
	sy, _ := strconv.ParseFloat(cpu["used_cpu_sys"], 64)
	s.cpu = u + sy
	return s
}

// delta is what happened between two snapshots.
type delta struct {
	dur         time.Duration
	cmds        int64 // commandstats calls, script-internal ones included
	scriptCalls int64 // EVAL/EVALSHA/FCALL calls
	evalshaUsec int64
	scriptUsec  int64 // EVAL/EVALSHA execution time, inner commands included
	byCmd       map[string]int64
	redisCPU    time.Duration
	clientCalls int64
	clientCPU   time.Duration
	mallocs     uint64
}

func diff(a, b snapshot) delta {
	d := delta{
		dur:         b.at.Sub(a.at),
		redisCPU:    time.Duration((b.cpu - a.cpu) * float64(time.Second)),
		clientCalls: b.calls - a.calls,
		clientCPU:   b.rus - a.rus,
		mallocs:     b.mem.Mallocs - a.mem.Mallocs,
		byCmd:       map[string]int64{},
	}
	for name, st := range b.cmds {
		if adminCommands[name] {
			continue
		}
		n := st.calls - a.cmds[name].calls
		if n == 0 {
			continue
		}
		d.cmds += n
		d.byCmd[name] = n
		switch name {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			d.scriptCalls += n
			d.scriptUsec += st.usec - a.cmds[name].usec
		}
		if name == "evalsha" {
			d.evalshaUsec = st.usec - a.cmds[name].usec
		}
	}
	return d
}

// countKeys counts the keys matching pattern (SCAN).
func (e *env) countKeys(pattern string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n int64
	var cursor uint64
	for {
		keys, next, err := e.admin.Scan(ctx, cursor, pattern, 10000).Result()
		if err != nil {
			fatalf("SCAN: %v", err)
		}
		n += int64(len(keys))
		if cursor = next; cursor == 0 {
			return n
		}
	}
}

// clientCount is the number of connections open on the server.
func (e *env) clientCount(ctx context.Context) int {
	s, err := e.admin.ClientList(ctx).Result()
	if err != nil {
		fatalf("CLIENT LIST: %v", err)
	}
	return strings.Count(s, "\n")
}

// pubsubCounts returns the channels with subscribers and the patterns.
func (e *env) pubsubCounts(ctx context.Context) (channels, patterns int) {
	ch, err := e.admin.PubSubChannels(ctx, "*").Result()
	if err != nil {
		fatalf("PUBSUB CHANNELS: %v", err)
	}
	np, err := e.admin.PubSubNumPat(ctx).Result()
	if err != nil {
		fatalf("PUBSUB NUMPAT: %v", err)
	}
	return len(ch), int(np)
}

// ---- small helpers ----

// percentile returns the q-quantile (nearest rank) of d, which it sorts.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return -1
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(math.Ceil(q*float64(len(d)))) - 1
	i = min(max(i, 0), len(d)-1)
	return d[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// gc settles the heap between runs so one library's garbage is not
// collected on the next one's time.
func gc() {
	runtime.GC()
	runtime.GC()
}

func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "WARNING: "+format+"\n", args...)
}
