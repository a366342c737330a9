package harness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Defaults used when the corresponding ClusterOptions field is zero.
const (
	DefaultClusterMasters      = 3
	DefaultClusterNodeTimeout  = 5 * time.Second
	DefaultClusterReadyTimeout = 30 * time.Second
)

// ClusterOptions configures StartClusterE. The zero value is three masters,
// no replicas.
type ClusterOptions struct {
	// Masters is the number of master nodes (default and minimum 3).
	Masters int
	// NodeTimeout is --cluster-node-timeout (default 5s).
	NodeTimeout time.Duration
	// ReadyTimeout bounds the whole start: nodes, redis-cli --cluster create
	// and the wait for cluster_state:ok everywhere (default 30s).
	ReadyTimeout time.Duration
	// ServerBinary and CLIBinary default to redis-server / redis-cli on PATH.
	ServerBinary, CLIBinary string
	// Args are extra redis-server arguments for every node.
	Args []string
}

// Cluster is a Redis Cluster of masters (no replicas) owned by this process.
type Cluster struct {
	nodes []*Server
}

// StartClusterE starts the nodes (each redis-server --cluster-enabled yes on
// its own free port, with its own dir and an explicit --cluster-port), joins
// them with `redis-cli --cluster create ... --cluster-replicas 0
// --cluster-yes`, and waits until every node reports cluster_state:ok, all
// 16384 slots assigned and every node known. The caller must Stop it.
func StartClusterE(opts ClusterOptions) (*Cluster, error) {
	if opts.Masters == 0 {
		opts.Masters = DefaultClusterMasters
	}
	if opts.Masters < 3 {
		return nil, fmt.Errorf("harness: a cluster needs at least 3 masters, got %d", opts.Masters)
	}
	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = DefaultClusterNodeTimeout
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultClusterReadyTimeout
	}
	cliName := opts.CLIBinary
	if cliName == "" {
		cliName = "redis-cli"
	}
	cli, err := exec.LookPath(cliName)
	if err != nil {
		return nil, fmt.Errorf("harness: %s not on PATH: %w", cliName, err)
	}
	deadline := time.Now().Add(opts.ReadyTimeout)

	// Start the nodes concurrently.
	c := &Cluster{nodes: make([]*Server, opts.Masters)}
	errs := make([]error, opts.Masters)
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = Start(Options{
				Binary:      opts.ServerBinary,
				Args:        opts.Args,
				cluster:     true,
				nodeTimeout: opts.NodeTimeout,
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Stop()
		return nil, fmt.Errorf("harness: start cluster nodes: %w", err)
	}

	// Join them.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("harness: %s %v: %w\n%s", cli, args, err, out)
	}

	if err := c.waitReady(deadline); err != nil {
		var logs string
		for _, n := range c.nodes {
			logs += fmt.Sprintf("\n--- last lines of %s ---\n%s", n.LogPath(), n.LogTail(10))
		}
		c.Stop()
		return nil, fmt.Errorf("harness: cluster not ready after %v: %w%s", opts.ReadyTimeout, err, logs)
	}
	return c, nil
}

// waitReady polls CLUSTER INFO on every node until all agree the cluster is
// complete.
func (c *Cluster) waitReady(deadline time.Time) error {
	want := strconv.Itoa(len(c.nodes))
	for {
		err := func() error {
			for _, n := range c.nodes {
				info, err := commandString(n.Addr(), time.Second, "CLUSTER", "INFO")
				if err != nil {
					return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr(), err)
				}
				state := infoField(info, "cluster_state")
				slots := infoField(info, "cluster_slots_assigned")
				known := infoField(info, "cluster_known_nodes")
				if state != "ok" || slots != "16384" || known != want {
					return fmt.Errorf("%s: cluster_state:%s cluster_slots_assigned:%s cluster_known_nodes:%s",
						n.Addr(), state, slots, known)
				}
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addrs returns the nodes' "127.0.0.1:PORT" addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		if n != nil {
			addrs = append(addrs, n.Addr())
		}
	}
	return addrs
}

// NoMaintNotifications turns go-redis's maintenance-notification
// handshake off. In its default (auto) mode, a Redis before 8 refuses it
// and go-redis then writes the client's options, which every *redis.Conn
// of the client shares under a lock of its own: two connections pinned
// at once (replica acknowledgement) race there. Redis 7 sends no such
// notifications anyway.
func NoMaintNotifications() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// Nodes returns the node servers (e.g. to Kill one). Do not Stop them
// individually on a shared cluster.
func (c *Cluster) Nodes() []*Server { return append([]*Server(nil), c.nodes...) }

// Client returns a new go-redis cluster client seeded with all node
// addresses; the caller must Close it. opts may adjust the options.
func (c *Cluster) Client(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs(), MaintNotificationsConfig: NoMaintNotifications()}
	for _, f := range opts {
		f(o)
	}
	return redis.NewClusterClient(o)
}

// Stop stops every node by pid (concurrently) and waits for them to exit.
// It is idempotent.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.Stop()
			}()
		}
	}
	wg.Wait()
}
