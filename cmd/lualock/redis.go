package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/luart"
)

const (
	defaultAddr    = "redis://127.0.0.1:6379"
	envRedisURL    = "REDIS_URL"
	envWatchdog    = "LUALOCK_WATCHDOG_LEASE"
	envFairWait    = "LUALOCK_FAIR_WAIT"
	envPubSub      = "LUALOCK_PUBSUB"
	connectTimeout = 5 * time.Second // first answer from Redis, at most
	releaseTimeout = 5 * time.Second // Unlock on the way out

	// The command's environment.
	envName   = "LUALOCK_NAME"   // the lock's name
	envHolder = "LUALOCK_HOLDER" // the owner field C:H of the hold
	envLease  = "LUALOCK_LEASE"  // the lease: fixed (-lease) or the watchdog's, renewed
	envToken  = "LUALOCK_TOKEN"  // -fenced: the hold's fencing token

	defaultWatchdogLease = 30 * time.Second // lualock.Options' default
)

// addrFlag is -addr. Its default, $REDIS_URL, is applied by redisOptions
// rather than shown by -h, since it may hold a password.
func addrFlag(fs *flag.FlagSet) *string {
	return fs.String("addr", "", "Redis `URL` (redis://host:port[/db]) or host:port (default $"+envRedisURL+", else "+defaultAddr+")")
}

// redisOptions parses -addr: a redis://, rediss:// or unix:// URL, or a
// plain host:port; without -addr, $REDIS_URL, else defaultAddr. An -addr
// given empty is refused rather than taken as "the default". Errors never
// quote the address, which may hold a password. It also returns the address
// it parsed, which the supervisor gets to reach the same server.
func redisOptions(fs *flag.FlagSet, addr string) (*redis.Options, string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "addr" })
	if given && strings.TrimSpace(addr) == "" {
		return nil, "", errors.New("empty address (leave -addr out to use $" + envRedisURL + ")")
	}
	if addr == "" {
		if addr = os.Getenv(envRedisURL); addr == "" {
			addr = defaultAddr
		}
	}
	addr = strings.TrimSpace(addr)
	opts, err := parseAddr(addr)
	return opts, addr, err
}

// parseAddr parses a resolved address (see redisOptions).
func parseAddr(addr string) (*redis.Options, error) {
	if addr == "" {
		return nil, errors.New("empty address")
	}
	if strings.Contains(addr, "://") {
		opts, err := redis.ParseURL(addr)
		if err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err // url.Error repeats the URL, password included
			}
			return nil, fmt.Errorf("bad Redis URL: %v", err)
		}
		return opts, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("want redis://host:port[/db] or host:port: %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("bad port %q in host:port", port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return &redis.Options{Addr: net.JoinHostPort(host, port)}, nil
}

// where names the server in messages, without credentials.
func where(opts *redis.Options) string {
	if opts.DB != 0 {
		return fmt.Sprintf("%s db %d", opts.Addr, opts.DB)
	}
	return opts.Addr
}

// quiet drops go-redis's own log lines (dial failures and the like):
// lualock reports the errors that matter itself, prefixed "lualock: ".
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

// errWaitOver says that -wait ran out while connecting.
var errWaitOver = errors.New("-wait is over")

// connect asks the server whether it is a cluster node (INFO cluster), then
// makes the client, which keeps go-redis's default retries. A node of a
// Redis Cluster (cluster_enabled:1) gets a cluster client seeded with it, so
// -addr may name any node of a cluster. The first contact is tried again as
// firstContact says.
func connect(ctx context.Context, opts *redis.Options, deadline, retryBy time.Time) (redis.UniversalClient, error) {
	p := *opts
	p.MaxRetries, p.DialerRetries, p.PoolSize, p.ContextTimeoutEnabled = -1, 1, 1, true
	probe := redis.NewClient(&p)
	defer probe.Close()
	var info string
	n, took, err := firstContact(ctx, deadline, retryBy, func(actx context.Context) (err error) {
		info, err = probe.Info(actx, "cluster").Result()
		return err
	})
	if errors.Is(err, errWaitOver) {
		//lint:ignore ST1005 Redis is a name; the message is a whole line on stderr
		return nil, fmt.Errorf("Redis at %s did not answer: %w", where(opts), errWaitOver)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach Redis at %s: %w%s", where(opts), err, attempts(n, took))
	}
	// Contexts bound every call, also on a Redis that stops answering.
	opts.ContextTimeoutEnabled = true
	// go-redis 9.22's default maintenance-notification handshake (auto)
	// writes the client's options when Redis refuses it (Redis 7), racing
	// with a second connection being set up at the same time (the race
	// detector saw it once replica acknowledgement pinned connections):
	// off, as Redis before 8 has no such notifications anyway.
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if !strings.Contains(info, "cluster_enabled:1") {
		return redis.NewClient(opts), nil
	}
	if opts.DB != 0 {
		return nil, fmt.Errorf("%s is a Redis Cluster node, which has no db %d", opts.Addr, opts.DB)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		MaintNotificationsConfig: opts.MaintNotificationsConfig,
		Addrs:                    []string{opts.Addr},
		Username:                 opts.Username,
		Password:                 opts.Password,
		TLSConfig:                opts.TLSConfig,
		Dialer:                   opts.Dialer,
		ContextTimeoutEnabled:    true,
	}), nil
}

// firstContact runs try, lualock's first contact with Redis, until it
// succeeds. Each attempt ends within connectTimeout and, when deadline is
// set, by then: an attempt that times out at the deadline returns
// errWaitOver. A failure that may pass (a refused or reset connection,
// EOF, a timeout, a server still loading: luart.Transient) is tried again,
// after 50ms doubling up to 1s, until retryBy; a zero retryBy means one
// attempt, so that status and unlock fail at once where nothing listens.
// It returns the number of attempts and the time they took.
func firstContact(ctx context.Context, deadline, retryBy time.Time, try func(context.Context) error) (int, time.Duration, error) {
	first := time.Now()
	pause := 50 * time.Millisecond
	for n := 1; ; n++ {
		limit := time.Now().Add(connectTimeout)
		if !deadline.IsZero() && deadline.Before(limit) {
			limit = deadline
		}
		actx, cancel := context.WithDeadline(ctx, limit)
		err := try(actx)
		cancel()
		if err == nil {
			return n, time.Since(first), nil
		}
		timedOut := errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
		if timedOut && !deadline.IsZero() && !time.Now().Before(deadline) {
			return n, time.Since(first), errWaitOver
		}
		if ctx.Err() != nil || !luart.Transient(err) || retryBy.IsZero() || time.Now().Add(pause).After(retryBy) {
			return n, time.Since(first), err
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// attempts says " (N attempts in D)" after an error when there were
// several, else "".
func attempts(n int, took time.Duration) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(" (%d attempts in %v)", n, took.Round(time.Millisecond))
}

// pubsubFlag is -pubsub: the kind of pub/sub (lualock.Options.PubSub),
// default $LUALOCK_PUBSUB, else auto.
type pubsubFlag struct {
	mode lualock.PubSubMode
	set  bool
}

func newPubsubFlag(fs *flag.FlagSet) *pubsubFlag {
	p := &pubsubFlag{}
	fs.Var(p, "pubsub", "pub/sub `kind` for release messages: auto, plain, sharded or both (default $"+envPubSub+", else auto)")
	return p
}

func (p *pubsubFlag) String() string {
	if p == nil || !p.set {
		return ""
	}
	return p.mode.String()
}

func (p *pubsubFlag) Set(s string) error {
	if err := p.mode.UnmarshalText([]byte(s)); err != nil {
		return errors.New("want auto, plain, sharded or both")
	}
	p.set = true
	return nil
}

// clientOptions reads the lualock.Options from the environment, and the
// pub/sub kind from ps (-pubsub) when given.
func clientOptions(ps *pubsubFlag) (lualock.Options, error) {
	var o lualock.Options // the hold tracker (on by default) stops the command within milliseconds of a loss
	if v := os.Getenv(envPubSub); v != "" {
		if err := o.PubSub.UnmarshalText([]byte(v)); err != nil {
			return o, fmt.Errorf("%s=%q: want auto, plain, sharded or both", envPubSub, v)
		}
	}
	if ps != nil && ps.set {
		o.PubSub = ps.mode
	}
	if v := os.Getenv(envWatchdog); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 3*time.Millisecond {
			return o, fmt.Errorf("%s=%q: want a duration of at least 3ms, such as 30s", envWatchdog, v)
		}
		o.WatchdogLease = d
	}
	if v := os.Getenv(envFairWait); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 500*time.Millisecond {
			return o, fmt.Errorf("%s=%q: want a duration of at least 500ms, such as 5m", envFairWait, v)
		}
		o.FairWait = d
	}
	return o, nil
}

// newLock returns the reentrant or, when fair is set, the fair lock name.
// newKindLock returns the handle lock's flags ask for and, for -fenced,
// what reads its token once held (nil otherwise).
func newKindLock(c *lualock.Client, a *lockArgs) (*lualock.Lock, func() int64) {
	switch {
	case a.read:
		return c.NewReadWriteLock(a.name).ReadLock(), nil
	case a.write:
		return c.NewReadWriteLock(a.name).WriteLock(), nil
	case a.fenced:
		f := c.NewFencedLock(a.name)
		return f.Handle(), f.Token
	}
	return newLock(c, a.name, a.fair), nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newLock(c *lualock.Client, name string, fair bool) *lualock.Lock {
	if fair {
		return c.NewFairLock(name)
	}
	return c.NewLock(name)
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
