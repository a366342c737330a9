// Command lockdemo shows lualock at work: a few workers contend for one
// lock, each taking it a few times, and the demo prints who held it when,
// how long each waited and how long each handoff took (from the holder
// starting its Unlock to the next holder's Lock returning), then a summary.
//
//	go run ./examples/lockdemo                 # 5 workers x 3 rounds, embedded Redis
//	go run ./examples/lockdemo -fair           # fair lock: FIFO handoffs
//	go run ./examples/lockdemo -addr redis://127.0.0.1:6380/0
//
// By default it runs on an embedded miniredis, so it needs no server. The
// workers are goroutines of one process but each has its own lock handle,
// which is all lualock looks at: they exclude each other exactly as
// processes on different machines would.
//
// The demo checks mutual exclusion itself (a flag that a worker sets when
// its Lock returns and clears before it calls Unlock) and fails on overlap.
//
// With -fair each worker starts once the one before it is in the fair
// queue (or holds the lock), so they queue in order, and a holder releases
// only once every other worker with rounds left is queued: the lock goes
// round-robin, each worker queueing again at the tail after its turn, and
// the order checked is the order the queue received them, however loaded
// the machine. Without -fair the workers start -stagger apart, and a
// worker that releases the lock often takes it straight back: the
// reentrant lock does not queue.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "lockdemo:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "lockdemo:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

type config struct {
	workers int
	rounds  int
	hold    time.Duration
	stagger time.Duration
	timeout time.Duration
	addr    string
	name    string
	fair    bool
}

// run parses args, runs the demo and writes its report to stdout. It
// returns an error when a worker failed or two holds overlapped.
func run(args []string, stdout io.Writer) error {
	var cfg config
	fs := flag.NewFlagSet("lockdemo", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.IntVar(&cfg.workers, "workers", 5, "number of workers contending for the lock")
	fs.IntVar(&cfg.rounds, "rounds", 3, "times each worker takes the lock")
	fs.DurationVar(&cfg.hold, "hold", 200*time.Millisecond, "how long a worker keeps the lock each time")
	fs.DurationVar(&cfg.stagger, "stagger", 5*time.Millisecond, "delay between the starts of consecutive workers (without -fair, which starts each once the one before is queued)")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "give up when the demo has not finished after this")
	fs.StringVar(&cfg.addr, "addr", "", "Redis `URL` (redis://host:port[/db]) or host:port; default: an embedded miniredis")
	fs.StringVar(&cfg.name, "name", "", "lock name (default: lockdemo:<random>)")
	fs.BoolVar(&cfg.fair, "fair", false, "use a fair lock (NewFairLock): FIFO handoffs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	case cfg.workers < 1:
		return fmt.Errorf("%w: -workers %d, want at least 1", errUsage, cfg.workers)
	case cfg.rounds < 1:
		return fmt.Errorf("%w: -rounds %d, want at least 1", errUsage, cfg.rounds)
	case cfg.hold < 0 || cfg.stagger < 0 || cfg.timeout <= 0:
		return fmt.Errorf("%w: -hold and -stagger must not be negative, -timeout must be positive", errUsage)
	}
	if cfg.name == "" {
		cfg.name = "lockdemo:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}

	rdb, where, closeRedis, err := openRedis(cfg.addr)
	if err != nil {
		return err
	}
	defer closeRedis()
	client, err := lualock.New(rdb, lualock.Options{})
	if err != nil {
		return err
	}
	defer client.Close()

	kind := "reentrant lock"
	if cfg.fair {
		kind = "fair lock"
	}
	fmt.Fprintf(stdout, "lockdemo: %d workers x %d rounds, hold %v, %s %q on %s\n",
		cfg.workers, cfg.rounds, cfg.hold, kind, cfg.name, where)

	d := newDemo(cfg, stdout, client, rdb)
	if err := d.warmUp(); err != nil {
		return err
	}
	if err := d.run(); err != nil {
		return err
	}
	d.summary()
	return nil
}

// openRedis connects to addr, or starts an embedded miniredis when addr is
// empty. where describes the server; closeRedis releases everything.
func openRedis(addr string) (rdb *redis.Client, where string, closeRedis func(), err error) {
	if addr == "" {
		mr := miniredis.NewMiniRedis()
		// miniredis only expires keys when told to. ClockTTL makes TTLs run
		// on the wall clock (checked at every command), as on a real Redis,
		// and TIME, which the fair lock's scripts use, is the wall clock
		// too since SetTime is never called.
		mr.ClockTTL(true)
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, "", nil, fmt.Errorf("start embedded miniredis: %w", err)
		}
		rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
		return rdb, "embedded miniredis " + mr.Addr(), func() { _ = rdb.Close(); mr.Close() }, nil
	}
	opts, err := redisOptions(addr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w: bad -addr: %v", errUsage, err)
	}
	rdb = redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, "", nil, fmt.Errorf("cannot reach Redis at %s: %w", opts.Addr, err)
	}
	return rdb, "Redis " + opts.Addr, func() { _ = rdb.Close() }, nil
}

// redisOptions parses a redis://, rediss:// or unix:// URL or a host:port,
// without quoting the address (it may hold a password) in errors.
func redisOptions(addr string) (*redis.Options, error) {
	if strings.Contains(addr, "://") {
		opts, err := redis.ParseURL(addr)
		if err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err
			}
			return nil, err
		}
		return opts, nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil {
		return nil, err
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("bad port %q", port)
	}
	return &redis.Options{Addr: addr}, nil
}

// demo is one run: the workers report to it under mu.
type demo struct {
	cfg    config
	out    io.Writer
	client *lualock.Client
	rdb    *redis.Client
	start  time.Time
	inside atomic.Bool // some worker is between its Lock and its Unlock

	mu          sync.Mutex
	holder      string    // worker inside, for the overlap message
	lastRelease time.Time // when the last holder started its Unlock
	acqs        []acquisition
	fields      []string // each worker's owner field, once it has started
	left        []int    // each worker's rounds not yet taken
}

// newDemo returns a run of cfg that reports to out.
func newDemo(cfg config, out io.Writer, client *lualock.Client, rdb *redis.Client) *demo {
	return &demo{cfg: cfg, out: out, client: client, rdb: rdb,
		fields: make([]string, cfg.workers), left: make([]int, cfg.workers)}
}

type acquisition struct {
	worker  int
	asked   time.Time // Lock called
	got     time.Time // Lock returned
	wait    time.Duration
	handoff time.Duration // from the previous holder's release; -1 for the first
}

func (d *demo) newLock() *lualock.Lock {
	if d.cfg.fair {
		return d.client.NewFairLock(d.cfg.name)
	}
	return d.client.NewLock(d.cfg.name)
}

// warmUp takes and releases a scratch lock of the same kind, so that the
// connection is dialled and the scripts are loaded (NOSCRIPT, SCRIPT LOAD)
// before the workers start: the first worker's wait would include them, and
// a later worker could overtake it while the first loads a script.
func (d *demo) warmUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := d.cfg.name + ":warm-up"
	l := d.client.NewLock(name)
	if d.cfg.fair {
		l = d.client.NewFairLock(name)
	}
	if err := l.Lock(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := l.Unlock(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

func (d *demo) run() error {
	ctx, cancel := context.WithTimeoutCause(context.Background(), d.cfg.timeout,
		fmt.Errorf("the demo did not finish within -timeout %v", d.cfg.timeout))
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	d.start = time.Now()
	var wg sync.WaitGroup
	for i := range d.cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.worker(ctx, i); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

func workerName(i int) string { return "worker-" + strconv.Itoa(i+1) }

// worker takes the lock cfg.rounds times, holding it cfg.hold each time.
func (d *demo) worker(ctx context.Context, i int) error {
	name := workerName(i)
	lock := d.newLock() // one handle per worker: each is its own owner
	d.mu.Lock()
	d.fields[i], d.left[i] = lock.Field(), d.cfg.rounds
	d.mu.Unlock()
	var err error
	switch {
	case d.cfg.fair && i > 0: // the first asks at once
		err = d.waitQueued(ctx, func(j int) bool { return j == i-1 })
	case !d.cfg.fair:
		err = sleep(ctx, time.Duration(i)*d.cfg.stagger)
	}
	if err != nil {
		return nil // another worker failed, or the timeout: run reports it
	}
	for range d.cfg.rounds {
		asked := time.Now()
		if err := lock.Lock(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // another worker failed, or the timeout: run reports it
			}
			return fmt.Errorf("%s: lock: %w", name, err)
		}
		if err := d.acquired(i, asked, time.Now()); err != nil {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = lock.Unlock(uctx)
			cancel()
			return err
		}
		select {
		case <-time.After(d.cfg.hold):
		case <-lock.Done():
			return fmt.Errorf("%s: lock lost while holding it: %w", name, context.Cause(lock.Context()))
		case <-ctx.Done():
		}
		if d.cfg.fair {
			// Every other worker with rounds left waits in the queue
			// before this one releases: the handoffs follow the queue.
			_ = d.waitQueued(ctx, func(j int) bool { return j != i && d.left[j] > 0 })
		}
		d.releasing(i)
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := lock.Unlock(uctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: unlock: %w", name, err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// acquired records that worker i's Lock returned at got, and fails when
// another worker is still inside.
func (d *demo) acquired(i int, asked, got time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inside.CompareAndSwap(false, true) {
		return fmt.Errorf("mutual exclusion violated: %s acquired the lock at +%s while %s held it",
			workerName(i), ms(got.Sub(d.start)), d.holder)
	}
	d.holder = workerName(i)
	a := acquisition{worker: i, asked: asked, got: got, wait: got.Sub(asked), handoff: -1}
	if !d.lastRelease.IsZero() {
		a.handoff = got.Sub(d.lastRelease)
	}
	d.acqs = append(d.acqs, a)
	d.left[i]--
	if a.handoff < 0 {
		fmt.Fprintf(d.out, "%s %s acquired (waited %s)\n", d.at(got), workerName(i), ms(a.wait))
	} else {
		fmt.Fprintf(d.out, "%s %s acquired (waited %s, handoff %s)\n", d.at(got), workerName(i), ms(a.wait), ms(a.handoff))
	}
	return nil
}

// releasing records that worker i is about to call Unlock: it leaves the
// critical section first, so that the next holder never finds it inside.
func (d *demo) releasing(i int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	held := now.Sub(d.acqs[len(d.acqs)-1].got)
	d.holder = ""
	d.inside.Store(false)
	d.lastRelease = now
	fmt.Fprintf(d.out, "%s %s released (held %s)\n", d.at(now), workerName(i), ms(held))
}

func (d *demo) summary() {
	d.mu.Lock()
	defer d.mu.Unlock()
	total := time.Since(d.start)
	fmt.Fprintf(d.out, "\nsummary: %d acquisitions in %s, no overlapping holds\n", len(d.acqs), ms(total))
	count := make([]int, d.cfg.workers)
	var waits, handoffs []time.Duration
	for _, a := range d.acqs {
		count[a.worker]++
		waits = append(waits, a.wait)
		if a.handoff >= 0 {
			handoffs = append(handoffs, a.handoff)
		}
	}
	for i, n := range count {
		fmt.Fprintf(d.out, "  %-10s %d acquisitions\n", workerName(i), n)
	}
	fmt.Fprintf(d.out, "  wait       p50 %-9s max %s\n", ms(pct(waits, 50)), ms(pct(waits, 100)))
	if len(handoffs) > 0 {
		fmt.Fprintf(d.out, "  handoff    p50 %-9s max %s\n", ms(pct(handoffs, 50)), ms(pct(handoffs, 100)))
	}
	order := make([]string, len(d.acqs))
	for k, a := range d.acqs {
		order[k] = strconv.Itoa(a.worker + 1)
	}
	fmt.Fprintf(d.out, "  order      %s\n", strings.Join(order, " "))
	// FIFO: the lock went to the workers in the order they asked for it.
	jumps := 0
	for k := 1; k < len(d.acqs); k++ {
		if d.acqs[k].asked.Before(d.acqs[k-1].asked) {
			jumps++
		}
	}
	switch {
	case jumps == 0:
		fmt.Fprintf(d.out, "  FIFO       kept: every handoff went to the worker that had waited longest\n")
	case d.cfg.fair:
		fmt.Fprintf(d.out, "  FIFO       broken %d times\n", jumps)
	default:
		fmt.Fprintf(d.out, "  FIFO       not kept (%d handoffs to a later asker), as expected of a non-fair lock; try -fair\n", jumps)
	}
}

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := (p*len(s)+99)/100 - 1
	return s[max(k, 0)]
}

// ms formats d in milliseconds, with precision that suits its size.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f < 10:
		return strconv.FormatFloat(f, 'f', 2, 64) + "ms"
	case f < 1000:
		return strconv.FormatFloat(f, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(f/1000, 'f', 2, 64) + "s"
	}
}

// at formats the time since the start of the demo, for the first column.
func (d *demo) at(t time.Time) string {
	return fmt.Sprintf("+%8.1fms", float64(t.Sub(d.start))/float64(time.Millisecond))
}

// queueKey is the fair lock's queue of waiters (docs/PROTOCOL.md):
// redisson_lock_queue:{name}, or redisson_lock_queue:name when name has a
// hash tag of its own.
func queueKey(name string) string {
	if strings.Contains(name, "{") {
		return "redisson_lock_queue:" + name
	}
	return "redisson_lock_queue:{" + name + "}"
}

// waitQueued waits until every worker j that want selects (under d.mu)
// has started and is in the fair queue or holds the lock, polling the
// queue in Redis every millisecond.
func (d *demo) waitQueued(ctx context.Context, want func(j int) bool) error {
	for {
		queue, err := d.rdb.LRange(ctx, queueKey(d.cfg.name), 0, -1).Result()
		if err != nil {
			return err
		}
		ready := true
		d.mu.Lock()
		for j := range d.cfg.workers {
			if want(j) && (d.fields[j] == "" || !slices.Contains(queue, d.fields[j]) && d.holder != workerName(j)) {
				ready = false
			}
		}
		d.mu.Unlock()
		if ready {
			return nil
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
