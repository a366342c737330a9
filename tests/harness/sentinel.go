package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults used when the corresponding SentinelOptions field is zero.
const (
	DefaultSentinelMaster       = "lualock"
	DefaultSentinelDownAfter    = time.Second
	DefaultSentinelFailoverWait = time.Second
	DefaultSentinelReadyTimeout = 30 * time.Second
)

// SentinelOptions configures StartSentinelE. The zero value is a primary,
// one replica and three Sentinels (quorum 2) watching them under the
// master name DefaultSentinelMaster.
type SentinelOptions struct {
	// Replicas is the number of replicas (default 1).
	Replicas int
	// Master is the name the Sentinels know the primary by.
	Master string
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary may not answer before a failover starts (default 1s: a
	// Sentinel that has not reached a newly promoted primary within it
	// starts another failover, which a loaded test machine saw at 500ms).
	DownAfter time.Duration
	// FailoverTimeout is the Sentinels' failover-timeout (default 1s).
	FailoverTimeout time.Duration
	// ReadyTimeout bounds the start and each Failover (default 30s).
	ReadyTimeout time.Duration
	// SentinelPassword, when set, is the Sentinels' requirepass: clients
	// of the Sentinels (and the Sentinels among themselves) must give it.
	// The data nodes keep no password.
	SentinelPassword string
}

// Node is a data node of a Sentinel deployment: a redis-server reached by
// everyone (clients, Sentinels, the other nodes' replication links)
// through its own Proxy, whose address the node announces. Delaying or
// cutting the proxy's replication links makes a replica of this node lag
// or lose what the link carried (Proxy.SetLinkDelay, Proxy.CutLink).
type Node struct {
	*Server
	Proxy *Proxy
}

// Addr is the node's address as everyone sees it: its proxy's.
func (n *Node) Addr() string { return n.Proxy.Addr() }

// Sentinel is a Sentinel deployment owned by this process: data nodes (one
// primary at a time) and three Sentinels.
type Sentinel struct {
	opts      SentinelOptions
	nodes     []*Node
	sentinels []*Server
}

// StartSentinelE starts the data nodes (each behind its proxy, announcing
// the proxy's address; the replicas replicating through the primary's
// proxy, diskless) and three Sentinels (redis-server sentinel.conf
// --sentinel; quorum 2, opts' down-after and failover timeout, and short
// periods of their own for INFO, hello and pings), and waits until every
// Sentinel knows the replicas and the other Sentinels. The caller must Stop
// it.
func StartSentinelE(opts SentinelOptions) (d *Sentinel, err error) {
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Master == "" {
		opts.Master = DefaultSentinelMaster
	}
	if opts.DownAfter <= 0 {
		opts.DownAfter = DefaultSentinelDownAfter
	}
	if opts.FailoverTimeout <= 0 {
		opts.FailoverTimeout = DefaultSentinelFailoverWait
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultSentinelReadyTimeout
	}
	d = &Sentinel{opts: opts}
	defer func() {
		if err != nil {
			d.Stop()
		}
	}()
	var primary string
	for i := 0; i <= opts.Replicas; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		proxy, err := StartProxy("127.0.0.1:" + strconv.Itoa(port))
		if err != nil {
			return nil, err
		}
		_, pport, _ := strings.Cut(proxy.Addr(), ":")
		args := []string{
			"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", pport,
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		}
		if i > 0 {
			h, p, _ := strings.Cut(primary, ":")
			args = append(args, "--replicaof", h, p)
		}
		srv, err := Start(Options{Port: port, Args: args})
		if err != nil {
			proxy.Close()
			return nil, err
		}
		d.nodes = append(d.nodes, &Node{Server: srv, Proxy: proxy})
		if i == 0 {
			primary = proxy.Addr()
		}
	}
	h, p, _ := strings.Cut(primary, ":")
	conf := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 2\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		opts.Master, h, p, opts.DownAfter.Milliseconds(), opts.FailoverTimeout.Milliseconds())
	if opts.SentinelPassword != "" {
		conf += "requirepass " + opts.SentinelPassword + "\n"
	}
	for range 3 {
		s, err := Start(Options{sentinelConf: conf, password: opts.SentinelPassword})
		if err != nil {
			return nil, err
		}
		d.sentinels = append(d.sentinels, s)
		// Short periods: INFO every 200ms (replicas and promotions seen at
		// once), hellos every 200ms (Sentinels find each other), and a TILT
		// only after 5s without a timer tick (a loaded test machine). The
		// ping period stays 1s: five of them bound how old a replica's INFO
		// may be for a promotion, and during a failover replicas get INFO
		// every second whatever the setting (a shorter ping period aborts
		// failovers with -failover-abort-no-good-slave).
		if _, err := commandStringAuth(s.Addr(), opts.SentinelPassword, time.Second, "SENTINEL", "DEBUG",
			"info-period", "200", "publish-period", "200", "ask-period", "200",
			"tilt-trigger", "5000", "tilt-period", "1000", "slave-reconf-timeout", "2000",
			"min-link-reconnect-period", "200"); err != nil {
			return nil, fmt.Errorf("harness: SENTINEL DEBUG on %s: %w", s.Addr(), err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.ReadyTimeout)
	defer cancel()
	if err := d.WaitStable(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// StartSentinel starts a private Sentinel deployment for tb and stops it in
// tb.Cleanup. It skips or fails per Require; a start error fails the test.
func StartSentinel(tb testing.TB, opts SentinelOptions) *Sentinel {
	tb.Helper()
	Require(tb)
	d, err := StartSentinelE(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, s := range d.sentinels {
				tb.Logf("sentinel %s log tail:\n%s", s.Addr(), s.LogTail(logTailLines))
			}
		}
		d.Stop()
	})
	return d
}

// Master is the name the Sentinels know the primary by.
func (d *Sentinel) Master() string { return d.opts.Master }

// SentinelAddrs are the Sentinels' addresses.
func (d *Sentinel) SentinelAddrs() []string {
	a := make([]string, len(d.sentinels))
	for i, s := range d.sentinels {
		a[i] = s.Addr()
	}
	return a
}

// Sentinels are the Sentinel processes (to kill or pause one).
func (d *Sentinel) Sentinels() []*Server { return append([]*Server(nil), d.sentinels...) }

// Nodes are the data nodes, the first one the initial primary.
func (d *Sentinel) Nodes() []*Node { return append([]*Node(nil), d.nodes...) }

// Client returns a go-redis failover client of the deployment (the caller
// closes it); opts may adjust its options.
func (d *Sentinel) Client(opts ...func(*redis.FailoverOptions)) *redis.Client {
	o := &redis.FailoverOptions{MasterName: d.opts.Master, SentinelAddrs: d.SentinelAddrs(), SentinelPassword: d.opts.SentinelPassword}
	for _, f := range opts {
		f(o)
	}
	return redis.NewFailoverClient(o)
}

// SetLinkDelay delays every replication link by d (see Proxy.SetLinkDelay).
func (d *Sentinel) SetLinkDelay(delay time.Duration) {
	for _, n := range d.nodes {
		n.Proxy.SetLinkDelay(delay)
	}
}

// Primary returns the node the Sentinels name as the primary (the first
// Sentinel that answers).
func (d *Sentinel) Primary(ctx context.Context) (*Node, error) {
	var last error
	for _, s := range d.sentinels {
		addr, err := d.masterAddr(ctx, s)
		if err != nil {
			last = err
			continue
		}
		if n := d.node(addr); n != nil {
			return n, nil
		}
		last = fmt.Errorf("harness: sentinel %s names %s, not a node of the deployment", s.Addr(), addr)
	}
	return nil, last
}

func (d *Sentinel) node(addr string) *Node {
	for _, n := range d.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

func (d *Sentinel) sentinelClient(s *Server) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), Password: d.opts.SentinelPassword})
}

func (d *Sentinel) masterAddr(ctx context.Context, s *Server) (string, error) {
	sc := d.sentinelClient(s)
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(ctx, d.opts.Master).Result()
	if err != nil {
		return "", err
	}
	if len(a) != 2 {
		return "", fmt.Errorf("harness: sentinel %s: master address %q", s.Addr(), a)
	}
	return a[0] + ":" + a[1], nil
}

// Crash ends node n as a host crash would: what its replication links
// still carried is lost (Proxy.CutLink), then the server is SIGKILLed.
// Restart brings it back (Rejoin makes it a replica again).
func (d *Sentinel) Crash(n *Node) {
	n.Proxy.CutLink()
	n.Kill()
}

// Failover crashes the primary, waits until every Sentinel names another
// node that says it is the primary, brings the crashed node back as a
// replica of the new one and waits until the deployment is stable again
// (WaitStable). It returns the old and the new primary.
func (d *Sentinel) Failover(ctx context.Context) (old, promoted *Node, err error) {
	old, err = d.Primary(ctx)
	if err != nil {
		return nil, nil, err
	}
	d.Crash(old)
	if promoted, err = d.WaitPromoted(ctx, old); err != nil {
		return old, nil, err
	}
	if err := d.Rejoin(ctx, old, promoted); err != nil {
		return old, promoted, err
	}
	return old, promoted, d.WaitStable(ctx)
}

// WaitPromoted waits until every Sentinel names a primary other than old
// and that node says it is a primary.
func (d *Sentinel) WaitPromoted(ctx context.Context, old *Node) (*Node, error) {
	for {
		var got *Node
		agree := true
		for _, s := range d.sentinels {
			addr, err := d.masterAddr(ctx, s)
			n := d.node(addr)
			if err != nil || n == nil || n == old || got != nil && n != got {
				agree = false
				break
			}
			got = n
		}
		if agree && got != nil {
			if info, err := commandString(got.Server.Addr(), time.Second, "INFO", "replication"); err == nil && infoField(info, "role") == "master" {
				return got, nil
			}
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return nil, fmt.Errorf("harness: no failover away from %s: %w", old.Addr(), err)
		}
	}
}

// Rejoin restarts n (empty, as a crashed host without persistence) as a
// replica of primary (--replicaof on its command line), with its proxy's
// links restored.
func (d *Sentinel) Rejoin(ctx context.Context, n, primary *Node) error {
	n.Proxy.RestoreLink()
	// Started as a replica, never as an empty primary: clients that still
	// reach its address must not take locks on it meanwhile.
	n.setReplicaOf(primary.Addr())
	return n.Restart()
}

// WaitStable waits until every Sentinel names the same primary, that node
// says it is the primary and has every other running node online as its
// replica (each with its link up), and every Sentinel knows those replicas
// and the two other Sentinels: a failover can start from here.
func (d *Sentinel) WaitStable(ctx context.Context) error {
	var last error
	for {
		if last = d.stable(ctx); last == nil {
			return nil
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("harness: sentinel deployment not stable: %w (%w)", last, err)
		}
	}
}

func (d *Sentinel) stable(ctx context.Context) error {
	primary, err := d.Primary(ctx)
	if err != nil {
		return err
	}
	info, err := commandString(primary.Server.Addr(), time.Second, "INFO", "replication")
	if err != nil {
		return err
	}
	if infoField(info, "role") != "master" {
		return fmt.Errorf("%s is not a primary yet", primary.Addr())
	}
	var want []string
	for _, n := range d.nodes {
		if n == primary || !n.Running() {
			continue
		}
		want = append(want, n.Addr())
		ri, err := commandString(n.Server.Addr(), time.Second, "INFO", "replication")
		if err != nil {
			return err
		}
		if infoField(ri, "master_link_status") != "up" || infoField(ri, "master_host")+":"+infoField(ri, "master_port") != primary.Addr() {
			return fmt.Errorf("replica %s: link %s to %s:%s", n.Addr(), infoField(ri, "master_link_status"), infoField(ri, "master_host"), infoField(ri, "master_port"))
		}
		_, port, _ := strings.Cut(n.Addr(), ":")
		if !strings.Contains(info, "port="+port+",state=online") {
			return fmt.Errorf("primary %s does not have %s online", primary.Addr(), n.Addr())
		}
	}
	for _, s := range d.sentinels {
		addr, err := d.masterAddr(ctx, s)
		if err != nil {
			return err
		}
		if addr != primary.Addr() {
			return fmt.Errorf("sentinel %s names %s, not %s", s.Addr(), addr, primary.Addr())
		}
		sc := d.sentinelClient(s)
		m, err0 := sc.Master(ctx, d.opts.Master).Result()
		reps, err := sc.Replicas(ctx, d.opts.Master).Result()
		sents, err2 := sc.Sentinels(ctx, d.opts.Master).Result()
		_ = sc.Close()
		if err = errors.Join(err0, err, err2); err != nil {
			return err
		}
		// A Sentinel that still sees the primary down (it has not reached
		// the promoted node yet) would start another failover.
		if m["flags"] != "master" {
			return fmt.Errorf("sentinel %s: master flags %q", s.Addr(), m["flags"])
		}
		if len(sents) < 2 {
			return fmt.Errorf("sentinel %s knows %d other sentinels", s.Addr(), len(sents))
		}
		for _, w := range want {
			ok := false
			for _, r := range reps {
				if r["ip"]+":"+r["port"] == w && r["flags"] == "slave" && r["master-link-status"] == "ok" {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("sentinel %s does not see replica %s up", s.Addr(), w)
			}
		}
	}
	return nil
}

// Stop stops the Sentinels, the nodes and their proxies.
func (d *Sentinel) Stop() {
	for _, s := range d.sentinels {
		s.Stop()
	}
	for _, n := range d.nodes {
		n.Stop()
		n.Proxy.Close()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
