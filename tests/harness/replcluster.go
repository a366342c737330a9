package harness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/keys"
)

// DefaultReplicatedNodeTimeout is a ReplicatedCluster's
// cluster-node-timeout: how long a master may not answer before its
// replica takes over.
const DefaultReplicatedNodeTimeout = time.Second

// ReplicatedClusterOptions configures StartReplicatedClusterE. The zero
// value is three masters with one replica each.
type ReplicatedClusterOptions struct {
	// Masters is the number of masters (default and minimum 3).
	Masters int
	// NodeTimeout is --cluster-node-timeout (default 1s).
	NodeTimeout time.Duration
	// ReadyTimeout bounds the start and each wait (default 30s).
	ReadyTimeout time.Duration
}

// ReplicatedCluster is a Redis Cluster whose masters have a replica each,
// owned by this process. Every node is reached through its own Proxy (it
// announces the proxy's address with cluster-announce-port), so a
// replica's replication link crosses its master's proxy and can be delayed
// or cut there (Proxy.SetLinkDelay, Proxy.CutLink).
type ReplicatedCluster struct {
	opts  ReplicatedClusterOptions
	nodes []*Node
}

// StartReplicatedClusterE starts the nodes (each behind its proxy), joins
// them with redis-cli --cluster create --cluster-replicas 1 and waits until
// the cluster is ok and every master has its replica online. The caller
// must Stop it.
func StartReplicatedClusterE(opts ReplicatedClusterOptions) (c *ReplicatedCluster, err error) {
	if opts.Masters == 0 {
		opts.Masters = DefaultClusterMasters
	}
	if opts.Masters < 3 {
		return nil, fmt.Errorf("harness: a cluster needs at least 3 masters, got %d", opts.Masters)
	}
	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = DefaultReplicatedNodeTimeout
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultClusterReadyTimeout
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("harness: redis-cli not on PATH: %w", err)
	}
	c = &ReplicatedCluster{opts: opts, nodes: make([]*Node, 2*opts.Masters)}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = startProxiedNode(opts.NodeTimeout)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("harness: start cluster nodes: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.ReadyTimeout)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("harness: %s %v: %w\n%s", cli, args, err, out)
	}
	if err := c.WaitStable(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// startProxiedNode starts a cluster node on a port of its choosing behind
// a proxy whose address it announces.
func startProxiedNode(nodeTimeout time.Duration) (*Node, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	proxy, err := StartProxy("127.0.0.1:" + strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	_, pport, _ := strings.Cut(proxy.Addr(), ":")
	srv, err := Start(Options{Port: port, cluster: true, nodeTimeout: nodeTimeout, Args: []string{
		"--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", pport,
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
	}})
	if err != nil {
		proxy.Close()
		return nil, err
	}
	return &Node{Server: srv, Proxy: proxy}, nil
}

// StartReplicatedCluster starts a private replicated cluster for tb and
// stops it in tb.Cleanup. It skips or fails per Require; a start error
// fails the test.
func StartReplicatedCluster(tb testing.TB, opts ReplicatedClusterOptions) *ReplicatedCluster {
	tb.Helper()
	Require(tb, "redis-server", "redis-cli")
	c, err := StartReplicatedClusterE(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// Nodes are the nodes, masters and replicas.
func (c *ReplicatedCluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Addrs are the nodes' addresses (their proxies').
func (c *ReplicatedCluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr()
	}
	return a
}

// Client returns a go-redis cluster client seeded with every node (the
// caller closes it); opts may adjust its options.
func (c *ReplicatedCluster) Client(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs(), MaintNotificationsConfig: NoMaintNotifications()}
	for _, f := range opts {
		f(o)
	}
	return redis.NewClusterClient(o)
}

// SetLinkDelay delays every replication link by d (see Proxy.SetLinkDelay).
func (c *ReplicatedCluster) SetLinkDelay(d time.Duration) {
	for _, n := range c.nodes {
		n.Proxy.SetLinkDelay(d)
	}
}

// Crash ends n as a host crash would (see Sentinel.Crash).
func (c *ReplicatedCluster) Crash(n *Node) {
	n.Proxy.CutLink()
	n.Kill()
}

// Primary returns the master that serves key, as the running nodes agree.
func (c *ReplicatedCluster) Primary(ctx context.Context, key string) (*Node, error) {
	slot := keys.Slot(key)
	var got *Node
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		m, err := c.owner(ctx, n, slot)
		if err != nil {
			return nil, err
		}
		if got != nil && m != got {
			return nil, fmt.Errorf("nodes disagree on the master of slot %d: %s and %s", slot, got.Addr(), m.Addr())
		}
		got = m
	}
	if got == nil {
		return nil, errors.New("no node running")
	}
	return got, nil
}

// owner returns the master of slot in n's view.
func (c *ReplicatedCluster) owner(ctx context.Context, n *Node, slot int) (*Node, error) {
	rdb := redis.NewClient(&redis.Options{Addr: n.Server.Addr(), MaxRetries: -1})
	defer rdb.Close()
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER SHARDS: %w", n.Addr(), err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if slot < int(r.Start) || slot > int(r.End) {
				continue
			}
			for _, x := range sh.Nodes {
				if x.Role != "master" {
					continue
				}
				addr := x.IP + ":" + strconv.FormatInt(x.Port, 10)
				for _, m := range c.nodes {
					if m.Addr() == addr {
						return m, nil
					}
				}
				return nil, fmt.Errorf("%s names %s for slot %d, not a node of the cluster", n.Addr(), addr, slot)
			}
		}
	}
	return nil, fmt.Errorf("%s: slot %d unassigned", n.Addr(), slot)
}

// WaitPromoted waits until the running nodes agree that a node other than
// old serves key and that node says it is a master.
func (c *ReplicatedCluster) WaitPromoted(ctx context.Context, old *Node, key string) (*Node, error) {
	for {
		m, err := c.Primary(ctx, key)
		if err == nil && m != old {
			if info, err := commandString(m.Server.Addr(), time.Second, "INFO", "replication"); err == nil && infoField(info, "role") == "master" {
				return m, nil
			}
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return nil, fmt.Errorf("harness: no failover away from %s: %w", old.Addr(), err)
		}
	}
}

// Rejoin restarts n (empty; it keeps its nodes.conf, so it rejoins the
// cluster and becomes a replica of the master that replaced it), with its
// proxy's links restored.
func (c *ReplicatedCluster) Rejoin(n *Node) error {
	n.Proxy.RestoreLink()
	return n.Restart()
}

// WaitStable waits until every node runs, says cluster_state:ok and knows
// every node, and every master serving slots has a replica online with its
// link up: a failover can start from here.
func (c *ReplicatedCluster) WaitStable(ctx context.Context) error {
	var last error
	for {
		if last = c.stable(); last == nil {
			return nil
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("harness: replicated cluster not stable: %w (%w)", last, err)
		}
	}
}

func (c *ReplicatedCluster) stable() error {
	want := strconv.Itoa(len(c.nodes))
	masters := 0
	for _, n := range c.nodes {
		if !n.Running() {
			return fmt.Errorf("%s is not running", n.Addr())
		}
		info, err := commandString(n.Server.Addr(), time.Second, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_known_nodes") != want {
			return fmt.Errorf("%s: cluster_state:%s cluster_known_nodes:%s", n.Addr(), infoField(info, "cluster_state"), infoField(info, "cluster_known_nodes"))
		}
		// Every node knows which nodes are replicas: the cluster bus
		// carries a node's role a little after the node knows it, and
		// a node's CLUSTER NODES is what names a master's replicas.
		nodes, err := commandString(n.Server.Addr(), time.Second, "CLUSTER", "NODES")
		if err != nil {
			return err
		}
		if r := replicaLines(nodes); r != c.opts.Masters {
			return fmt.Errorf("%s: CLUSTER NODES names %d replicas, want %d", n.Addr(), r, c.opts.Masters)
		}
		ri, err := commandString(n.Server.Addr(), time.Second, "INFO", "replication")
		if err != nil {
			return err
		}
		switch infoField(ri, "role") {
		case "master":
			if infoField(ri, "connected_slaves") != "1" || !strings.Contains(ri, ",state=online,") {
				return fmt.Errorf("master %s has no replica online", n.Addr())
			}
			masters++
		default:
			if infoField(ri, "master_link_status") != "up" {
				return fmt.Errorf("replica %s: link %s", n.Addr(), infoField(ri, "master_link_status"))
			}
		}
	}
	if masters != c.opts.Masters {
		return fmt.Errorf("%d masters with a replica, want %d", masters, c.opts.Masters)
	}
	return nil
}

// Stop stops the nodes and their proxies.
func (c *ReplicatedCluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.Stop()
				n.Proxy.Close()
			}()
		}
	}
	wg.Wait()
}

// replicaLines counts the replicas, not failed, that a CLUSTER NODES
// reply names.
func replicaLines(nodes string) int {
	r := 0
	for _, l := range strings.Split(nodes, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "slave") && !slices.Contains(flags, "fail") && !slices.Contains(flags, "fail?") {
			r++
		}
	}
	return r
}
