package failover

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
}

type sentinelDeployment struct{ d *harness.Sentinel }

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
func (c clusterDeployment) client(t *testing.T) redis.UniversalClient {
	cc := c.c.Client(func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true })
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func startSentinel(t *testing.T) deployment {
	return sentinelDeployment{harness.StartSentinel(t, harness.SentinelOptions{})}
}

func startCluster(t *testing.T) deployment {
	return clusterDeployment{harness.StartReplicatedCluster(t, harness.ReplicatedClusterOptions{})}
}
