package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// Replicated deployments: a Sentinel-managed primary (-sentinel, -master)
// and replica acknowledgement (-ack, lualock.Options.ReplicaAck).
const (
	envSentinel    = "LUALOCK_SENTINEL"        // default for -sentinel
	envMaster      = "LUALOCK_SENTINEL_MASTER" // default for -master
	envReplicaAck  = "LUALOCK_REPLICA_ACK"     // default for -ack
	envAckTimeout  = "LUALOCK_REPLICA_ACK_TIMEOUT"
	defaultAckWait = time.Second // lualock.Options' default ReplicaAckTimeout
)

// deployFlags are -sentinel, -master and -ack.
type deployFlags struct {
	sentinels, master string
	ack               string
}

func newDeployFlags(fs *flag.FlagSet) *deployFlags {
	d := &deployFlags{}
	fs.StringVar(&d.sentinels, "sentinel", "", "Sentinel `ADDRS` (host:port,host:port,...): reach the primary they name for -master instead of -addr (default $"+envSentinel+")")
	fs.StringVar(&d.master, "master", "", "the master `NAME` the Sentinels know the primary by (default $"+envMaster+")")
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
// Sentinels' are none.
func (d *deployFlags) failover(opts *redis.Options) (*redis.FailoverOptions, error) {
	addrs, master := d.sentinels, d.master
	if addrs == "" {
		addrs = os.Getenv(envSentinel)
	}
	if master == "" {
		master = os.Getenv(envMaster)
	}
	if addrs == "" {
		if master != "" {
			return nil, errors.New("-master without -sentinel")
		}
		return nil, nil
	}
	if master == "" {
		return nil, errors.New("-sentinel needs -master, the name the Sentinels know the primary by")
	}
	fo := &redis.FailoverOptions{MasterName: master, ContextTimeoutEnabled: true}
	for _, a := range strings.Split(addrs, ",") {
		a = strings.TrimSpace(a)
		_, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("-sentinel: %q is not host:port", a)
		}
		fo.SentinelAddrs = append(fo.SentinelAddrs, a)
	}
	if opts != nil {
		fo.Username, fo.Password, fo.DB, fo.TLSConfig = opts.Username, opts.Password, opts.DB, opts.TLSConfig
	}
	return fo, nil
}

// dial connects as connect does, or, when Sentinels are named, to the
// primary they name: one PING through them, without retries, within
// connectTimeout and by deadline when set.
func (d *deployFlags) dial(ctx context.Context, opts *redis.Options, deadline, retryBy time.Time) (redis.UniversalClient, error) {
	fo, err := d.failover(opts)
	if err != nil {
		return nil, err
	}
	if fo == nil {
		return connect(ctx, opts, deadline, retryBy)
	}
	limit := time.Now().Add(connectTimeout)
	if !deadline.IsZero() && deadline.Before(limit) {
		limit = deadline
	}
	pctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	rdb := redis.NewFailoverClient(fo)
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		if limit.Equal(deadline) && !time.Now().Before(deadline) {
			//lint:ignore ST1005 Redis is a name; the message is a whole line on stderr
			return nil, fmt.Errorf("Redis primary %q of Sentinels %s did not answer: %w", fo.MasterName, strings.Join(fo.SentinelAddrs, ","), errWaitOver)
		}
		return nil, fmt.Errorf("cannot reach Redis primary %q through Sentinels %s: %w", fo.MasterName, strings.Join(fo.SentinelAddrs, ","), err)
	}
	return rdb, nil
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
