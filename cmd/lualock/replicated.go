package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// Replicated deployments: a Sentinel-managed primary (-sentinel, -master)
// and replica acknowledgement (-ack, lualock.Options.ReplicaAck).
const (
	envSentinel     = "LUALOCK_SENTINEL"          // default for -sentinel
	envMaster       = "LUALOCK_SENTINEL_MASTER"   // default for -master
	envSentinelUser = "LUALOCK_SENTINEL_USERNAME" // default for -sentinel-user
	envSentinelPass = "LUALOCK_SENTINEL_PASSWORD" // default for -sentinel-password
	envReplicaAck   = "LUALOCK_REPLICA_ACK"       // default for -ack
	envAckTimeout   = "LUALOCK_REPLICA_ACK_TIMEOUT"
	defaultAckWait  = time.Second // lualock.Options' default ReplicaAckTimeout
)

// deployFlags are -sentinel, -master, -sentinel-user, -sentinel-password
// and -ack.
type deployFlags struct {
	sentinels, master          string
	sentinelUser, sentinelPass string
	ack                        string
}

func newDeployFlags(fs *flag.FlagSet) *deployFlags {
	d := &deployFlags{}
	fs.StringVar(&d.sentinels, "sentinel", "", "Sentinel `ADDRS` (host:port,host:port,...): reach the primary they name for -master instead of -addr (default $"+envSentinel+")")
	fs.StringVar(&d.master, "master", "", "the master `NAME` the Sentinels know the primary by (default $"+envMaster+")")
	fs.StringVar(&d.sentinelUser, "sentinel-user", "", "the Sentinels' own ACL `USER` (default $"+envSentinelUser+")")
	// The default is not shown: the environment variable holds a secret.
	fs.StringVar(&d.sentinelPass, "sentinel-password", "", "the Sentinels' own `PASSWORD` (requirepass; default $"+envSentinelPass+", which unlike a flag does not show in ps)")
	fs.StringVar(&d.ack, "ack", "", "replica acknowledgement `MODE` after each acquisition: one, all or off (default $"+envReplicaAck+", else one)")
	return d
}

// options sets the replica acknowledgement of o from -ack, else
// $LUALOCK_REPLICA_ACK, and its timeout from $LUALOCK_REPLICA_ACK_TIMEOUT.
func (d *deployFlags) options(o *lualock.Options) error {
	mode, from := d.ack, "-ack"
	if mode == "" {
		mode, from = os.Getenv(envReplicaAck), envReplicaAck
	}
	if mode != "" {
		if err := o.ReplicaAck.UnmarshalText([]byte(mode)); err != nil {
			return fmt.Errorf("%s %q: want one, all or off", from, mode)
		}
	}
	if v := os.Getenv(envAckTimeout); v != "" {
		t, err := time.ParseDuration(v)
		if err != nil || t < time.Millisecond {
			return fmt.Errorf("%s=%q: want a duration of at least 1ms, such as 1s", envAckTimeout, v)
		}
		o.ReplicaAckTimeout = t
	}
	return nil
}

// ackSetting describes the replica acknowledgement o sets, for status.
func ackSetting(o lualock.Options) string {
	if o.ReplicaAck == lualock.ReplicaAckOff {
		return o.ReplicaAck.String()
	}
	t := o.ReplicaAckTimeout
	if t == 0 {
		t = defaultAckWait
	}
	return fmt.Sprintf("%v (timeout %v)", o.ReplicaAck, t)
}

// failover returns the failover options -sentinel and -master (or their
// environment variables) ask for; nil when no Sentinel is named. The
// primary's credentials and db come from opts (-addr's URL), the
// Sentinels' own from -sentinel-user and -sentinel-password (or theirs).
func (d *deployFlags) failover(opts *redis.Options) (*redis.FailoverOptions, error) {
	addrs, master := d.sentinels, d.master
	if addrs == "" {
		addrs = os.Getenv(envSentinel)
	}
	if master == "" {
		master = os.Getenv(envMaster)
	}
	user, pass := d.sentinelUser, d.sentinelPass
	if user == "" {
		user = os.Getenv(envSentinelUser)
	}
	if pass == "" {
		pass = os.Getenv(envSentinelPass)
	}
	if addrs == "" {
		if master != "" {
			return nil, errors.New("-master without -sentinel")
		}
		if d.sentinelUser != "" || d.sentinelPass != "" {
			return nil, errors.New("-sentinel-user or -sentinel-password without -sentinel")
		}
		return nil, nil
	}
	if master == "" {
		return nil, errors.New("-sentinel needs -master, the name the Sentinels know the primary by")
	}
	var list []string
	for _, a := range strings.Split(addrs, ",") {
		a = strings.TrimSpace(a)
		_, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("-sentinel: %q is not host:port", a)
		}
		list = append(list, a)
	}
	return failoverOptions(sentinelSet{Addrs: list, Master: master, User: user, Password: pass}, opts), nil
}

// sentinelSet is a resolved -sentinel, -master and the Sentinels'
// credentials; the handover carries it to the supervisor.
type sentinelSet struct {
	Addrs    []string `json:"addrs"`
	Master   string   `json:"master"`
	User     string   `json:"user,omitempty"`
	Password string   `json:"password,omitempty"` // never printed
}

// failoverOptions are the go-redis failover options of s, with the
// primary's credentials, db and TLS from opts when given.
func failoverOptions(s sentinelSet, opts *redis.Options) *redis.FailoverOptions {
	fo := &redis.FailoverOptions{
		MasterName: s.Master, SentinelAddrs: s.Addrs,
		SentinelUsername: s.User, SentinelPassword: s.Password,
		ContextTimeoutEnabled: true,
	}
	if opts != nil {
		fo.Username, fo.Password, fo.DB, fo.TLSConfig = opts.Username, opts.Password, opts.DB, opts.TLSConfig
	}
	return fo
}

// sentinels returns the resolved Sentinels of fo.
func sentinels(fo *redis.FailoverOptions) *sentinelSet {
	return &sentinelSet{Addrs: fo.SentinelAddrs, Master: fo.MasterName, User: fo.SentinelUsername, Password: fo.SentinelPassword}
}

// dial connects as connect does, or, when Sentinels are named, to the
// primary they name (dialFailover).
func (d *deployFlags) dial(ctx context.Context, opts *redis.Options, deadline, retryBy time.Time) (redis.UniversalClient, error) {
	fo, err := d.failover(opts)
	if err != nil {
		return nil, err
	}
	if fo == nil {
		return connect(ctx, opts, deadline, retryBy)
	}
	return dialFailover(ctx, fo, deadline, retryBy)
}

// dialFailover makes the failover client of fo after a first contact (a
// PING of the primary the Sentinels name) that is tried again as
// firstContact says, as for a plain address.
func dialFailover(ctx context.Context, fo *redis.FailoverOptions, deadline, retryBy time.Time) (redis.UniversalClient, error) {
	// A probe of its own for each attempt: a failed one would answer the
	// next attempts from its pool's last dial error for a while.
	n, took, err := firstContact(ctx, deadline, retryBy, func(actx context.Context) error {
		p := *fo
		p.SentinelAddrs = slices.Clone(fo.SentinelAddrs) // go-redis reorders them
		p.MaxRetries, p.DialerRetries, p.PoolSize = -1, 1, 1
		probe := redis.NewFailoverClient(&p)
		defer probe.Close()
		return probe.Ping(actx).Err()
	})
	which := fmt.Sprintf("primary %q of Sentinels %s", fo.MasterName, strings.Join(fo.SentinelAddrs, ","))
	if errors.Is(err, errWaitOver) {
		//lint:ignore ST1005 Redis is a name; the message is a whole line on stderr
		return nil, fmt.Errorf("Redis %s did not answer: %w", which, errWaitOver)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach Redis %s: %s%s", which, sentinelError(err), attempts(n, took))
	}
	return redis.NewFailoverClient(fo), nil
}

// sentinelError is err on one line: go-redis joins the error of every
// Sentinel with newlines, mostly the same one. A refused password says
// which one to check.
func sentinelError(err error) string {
	lines := strings.Split(err.Error(), "\n")
	out := []string{lines[0]}
	for _, l := range lines[1:] {
		if l != "" && !strings.HasSuffix(out[0], l) && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	msg := strings.Join(out, "; ")
	if strings.Contains(msg, "all sentinels") && (strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH")) {
		msg += " (the Sentinels' own password: -sentinel-user, -sentinel-password, $" + envSentinelUser + ", $" + envSentinelPass + ")"
	}
	return msg
}

// replicaCount returns how many replicas the primary serving name has
// connected (INFO replication), or -1 when it cannot tell.
func replicaCount(ctx context.Context, rdb redis.UniversalClient, name string) int {
	var c redis.Cmdable = rdb
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, name)
		if err != nil {
			return -1
		}
		c = n
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}
