package failover

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// deployment is a replicated Redis whose primaries the rounds crash: a
// Sentinel deployment or a cluster whose masters have replicas.
type deployment interface {
	// primary is the node that serves key now.
	primary(ctx context.Context, key string) (*harness.Node, error)
	// crash ends n as a host crash (what its links carried is lost).
	crash(n *harness.Node)
	setLinkDelay(d time.Duration)
	// promoted waits until another node serves key, and returns it.
	promoted(ctx context.Context, old *harness.Node, key string) (*harness.Node, error)
	// rejoin brings old back as a replica of promoted and waits until a
	// failover can start again.
	rejoin(ctx context.Context, old, promoted *harness.Node) error
	// client is a new client of the deployment; the test closes it.
	client(t *testing.T) redis.UniversalClient
	// nodes are the data nodes.
	nodes() []*harness.Node
	// watch starts watching the promotion of a replica of old.
	watch(ctx context.Context, old *harness.Node) *promotion
	// replicas is how many replicas an acquisition acknowledged in mode
	// waits for on a steady deployment.
	replicas(mode lualock.ReplicaAck) int64
}

type sentinelDeployment struct {
	d *harness.Sentinel
	n int64 // replicas
}

func (s sentinelDeployment) primary(ctx context.Context, _ string) (*harness.Node, error) {
	return s.d.Primary(ctx)
}
func (s sentinelDeployment) crash(n *harness.Node)        { s.d.Crash(n) }
func (s sentinelDeployment) setLinkDelay(d time.Duration) { s.d.SetLinkDelay(d) }
func (s sentinelDeployment) promoted(ctx context.Context, old *harness.Node, _ string) (*harness.Node, error) {
	return s.d.WaitPromoted(ctx, old)
}
func (s sentinelDeployment) rejoin(ctx context.Context, old, promoted *harness.Node) error {
	if err := s.d.Rejoin(ctx, old, promoted); err != nil {
		return err
	}
	return s.d.WaitStable(ctx)
}
func (s sentinelDeployment) nodes() []*harness.Node { return s.d.Nodes() }
func (s sentinelDeployment) watch(ctx context.Context, old *harness.Node) *promotion {
	return watchPromotion(ctx, s.d.Nodes(), old, s.d.SentinelAddrs(), s.d.Master())
}
func (s sentinelDeployment) replicas(mode lualock.ReplicaAck) int64 {
	if mode == lualock.ReplicaAckAll {
		return s.n
	}
	return 1
}
func (s sentinelDeployment) client(t *testing.T) redis.UniversalClient {
	c := s.d.Client(func(o *redis.FailoverOptions) { o.ContextTimeoutEnabled = true })
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type clusterDeployment struct{ c *harness.ReplicatedCluster }

func (c clusterDeployment) primary(ctx context.Context, key string) (*harness.Node, error) {
	return c.c.Primary(ctx, key)
}
func (c clusterDeployment) crash(n *harness.Node)        { c.c.Crash(n) }
func (c clusterDeployment) setLinkDelay(d time.Duration) { c.c.SetLinkDelay(d) }
func (c clusterDeployment) promoted(ctx context.Context, old *harness.Node, key string) (*harness.Node, error) {
	return c.c.WaitPromoted(ctx, old, key)
}
func (c clusterDeployment) rejoin(ctx context.Context, old, _ *harness.Node) error {
	if err := c.c.Rejoin(old); err != nil {
		return err
	}
	return c.c.WaitStable(ctx)
}
func (c clusterDeployment) nodes() []*harness.Node { return c.c.Nodes() }
func (c clusterDeployment) watch(ctx context.Context, old *harness.Node) *promotion {
	return watchPromotion(ctx, c.c.Nodes(), old, nil, "")
}
func (c clusterDeployment) replicas(lualock.ReplicaAck) int64 { return 1 }
func (c clusterDeployment) client(t *testing.T) redis.UniversalClient {
	cc := c.c.Client(func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true })
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func startSentinel(t *testing.T, replicas int) deployment {
	return sentinelDeployment{harness.StartSentinel(t, harness.SentinelOptions{Replicas: replicas}), int64(replicas)}
}

func startCluster(t *testing.T) deployment {
	return clusterDeployment{harness.StartReplicatedCluster(t, harness.ReplicatedClusterOptions{})}
}

// promotion records when a replica of a crashed primary first answers
// ROLE as a primary (the failover is visible to a client that reaches it)
// and, on Sentinel, when a Sentinel first names a primary other than the
// crashed one (the earliest a client that follows the Sentinels can know).
type promotion struct {
	done  chan struct{}
	at    time.Time // set before done closes; zero: not seen
	named time.Time // the same, zero without Sentinels
}

// watchPromotion starts polling, every millisecond until ctx ends, the
// nodes that replicate old now (call it before the crash), on their own
// addresses (not through their proxies), and the Sentinels (none: nil).
func watchPromotion(ctx context.Context, nodes []*harness.Node, old *harness.Node, sentinels []string, master string) *promotion {
	p := &promotion{done: make(chan struct{})}
	var scs []*redis.SentinelClient
	for _, a := range sentinels {
		scs = append(scs, redis.NewSentinelClient(&redis.Options{Addr: a, PoolSize: 1, MaxRetries: -1}))
	}
	var cands []*redis.Client
	for _, n := range nodes {
		if n == old || !n.Running() {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: n.Server.Addr(), PoolSize: 1, MaxRetries: -1,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, MaintNotificationsConfig: harness.NoMaintNotifications()})
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && field(info, "role") == "slave" && field(info, "master_host")+":"+field(info, "master_port") == old.Addr() {
			cands = append(cands, c)
		} else {
			_ = c.Close()
		}
	}
	go func() {
		defer close(p.done)
		defer func() {
			for _, c := range cands {
				_ = c.Close()
			}
			for _, c := range scs {
				_ = c.Close()
			}
		}()
		for ctx.Err() == nil && len(cands) > 0 && (p.at.IsZero() || len(scs) > 0 && p.named.IsZero()) {
			for _, c := range cands {
				if role, err := c.Do(ctx, "ROLE").Slice(); p.at.IsZero() && err == nil && len(role) > 0 && role[0] == "master" {
					p.at = time.Now()
				}
			}
			for _, c := range scs {
				if a, err := c.GetMasterAddrByName(ctx, master).Result(); p.named.IsZero() && err == nil && len(a) == 2 && a[0]+":"+a[1] != old.Addr() {
					p.named = time.Now()
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return p
}

// when returns the time the promoted node was seen a primary and the
// time a Sentinel named it (zero if never), once the watch has ended.
func (p *promotion) when() (answered, named time.Time) {
	<-p.done
	return p.at, p.named
}
