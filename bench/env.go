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
	adminN  *nameCounts // commands the admin connection sent, by name
	runID   string
	seq     atomic.Int64
	round   int
	elapsed time.Duration

	startedServer bool
	replicated    bool     // -replica: the server has a replica
	revision      revision // of the library under test, at start
	started       time.Time
	load0, load1  load // the machine's load at start and end

	redisVersion string

	mu      sync.Mutex
	samples map[sampleKey][]float64
	order   []sampleKey
	notes   map[string][]string // workload -> notes gathered while running
	// overlaps are the runs whose overlap detector fired: the run goes on,
	// the report leads with them, and the bench exits with status 3.
	overlaps []overlap
}

type sampleKey struct{ library, workload, metric string }

func newEnv(cfg config) (*env, error) {
	e := &env{
		cfg:     cfg,
		adminN:  &nameCounts{},
		runID:   strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		samples: map[sampleKey][]float64{},
		notes:   map[string][]string{},
	}
	e.admin = newAdmin(cfg.addr, e.adminN)
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

// keyPattern matches every key of this run, and the keys a library names
// after them (lualock's latches and queues, rueidislock's key copies).
func (e *env) keyPattern() string { return "*lb:" + e.runID + ":*" }

// clientName returns a connection name unique to this run (CLIENT SETNAME).
func (e *env) clientName() string { return fmt.Sprintf("lb-%s-%d", e.runID, e.seq.Add(1)) }

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

func (e *env) info(ctx context.Context, sections ...string) (map[string]string, error) {
	s, err := e.admin.Info(ctx, sections...).Result()
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
	admin map[string]int64 // commands the admin connection sent before cmds was read
	cpu   float64          // used_cpu_user + used_cpu_sys, seconds
	calls int64            // client-side requests of the library under test
	rus   time.Duration
	mem   runtime.MemStats
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
	// INFO reports the commands that ran before it, not itself: the admin
	// commands in a delta are those sent from one snapshot's INFO
	// commandstats up to the next one's.
	s.admin = e.adminN.snapshot()
	// One INFO for both sections (Redis 7), so they describe one moment.
	info, err := e.info(ctx, "commandstats", "cpu")
	if err != nil {
		fatalf("INFO commandstats cpu: %v", err)
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
	s.cpu = redisCPU(info)
	return s
}

// redisCPU is the server's used_cpu_user + used_cpu_sys from INFO cpu, in
// seconds.
func redisCPU(info map[string]string) float64 {
	u, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
	s, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
	return u + s
}

// delta is what happened between two snapshots.
type delta struct {
	dur         time.Duration
	cmds        int64 // commandstats calls, script-internal ones included, less the bench's admin commands
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
		n := st.calls - a.cmds[name].calls - (b.admin[name] - a.admin[name])
		if n <= 0 {
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

// scanKeys calls f with every batch of keys matching pattern (SCAN) and
// returns how many there were.
func (e *env) scanKeys(pattern string, f func(ctx context.Context, keys []string)) int64 {
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
		if len(keys) > 0 && f != nil {
			f(ctx, keys)
		}
		if cursor = next; cursor == 0 {
			return n
		}
	}
}

// countKeys counts the keys matching pattern.
func (e *env) countKeys(pattern string) int64 { return e.scanKeys(pattern, nil) }

// dropKeys deletes the keys of this run (and only those: with -addr the
// server is someone else's) until a SCAN finds none, so that keys one
// library leaves behind (lualock's unlock latches expire after 10 s) are
// not expired, and billed, during the next library's run.
func (e *env) dropKeys() {
	var total int64
	for range 5 {
		n := e.scanKeys(e.keyPattern(), func(ctx context.Context, keys []string) {
			if err := e.admin.Del(ctx, keys...).Err(); err != nil {
				fatalf("DEL of the bench's keys: %v", err)
			}
		})
		if n == 0 {
			if total > 0 {
				logf("deleted %d keys the run left", total)
			}
			return
		}
		total += n
	}
	warnf("keys matching %s still appear after 5 rounds of deletion", e.keyPattern())
}

// conns is what CLIENT LIST shows of the connections named name.
type conns struct {
	total    int // connections
	pubsub   int // of them in pub/sub mode (flag P, or sub, ssub or psub > 0)
	subs     int // sum of sub + ssub + psub: channels, shard channels, patterns
	tracking int // of them with client-side-caching tracking on (flag t)
}

// clientsNamed counts the server's connections named name (CLIENT LIST).
func (e *env) clientsNamed(ctx context.Context, name string) conns {
	s, err := e.admin.ClientList(ctx).Result()
	if err != nil {
		fatalf("CLIENT LIST: %v", err)
	}
	var c conns
	for _, line := range strings.Split(s, "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if f["name"] != name {
			continue
		}
		subs := 0
		for _, k := range []string{"sub", "ssub", "psub"} {
			n, _ := strconv.Atoi(f[k])
			subs += n
		}
		c.total++
		c.subs += subs
		if strings.Contains(f["flags"], "P") || subs > 0 {
			c.pubsub++
		}
		if strings.Contains(f["flags"], "t") {
			c.tracking++
		}
	}
	return c
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

// minSample is the smallest sample a percentile is reported for: over
// fewer values p99 is about the maximum.
const minSample = 100

// recPercentiles records the size of sample d as name_n and, when it has at
// least minSample values, its p50 and p99 as name_p50_unit, name_p99_unit.
func (e *env) recPercentiles(workload, library, name, unit string, d []time.Duration) {
	e.rec(workload, library, name+"_n", float64(len(d)))
	if len(d) < minSample {
		return
	}
	conv := us
	if unit == "ms" {
		conv = ms
	}
	e.rec(workload, library, name+"_p50_"+unit, conv(percentile(d, 0.50)))
	e.rec(workload, library, name+"_p99_"+unit, conv(percentile(d, 0.99)))
}

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
