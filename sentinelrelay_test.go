package lualock_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// Behind Sentinel (a go-redis failover client) the watchdog renews a
// watched lock on the hold tracker's connection while that connection
// reaches the primary go-redis uses: the renewals wake no check. When
// go-redis moves to another primary and the tracker's connection stays
// up to the old one (a primary cut off from the Sentinels still answers
// as a primary), the renewals go through go-redis to the new primary,
// which does not have the lock, and the holder is told: carried on the
// tracker's connection they would have renewed the old copy forever.
//
// The failover client is go-redis's mark (Addr "FailoverClient") on a
// dialer the test moves from server A to server B, as go-redis's
// failover client moves when Sentinel names a new primary, dropping its
// connections to the old one (here: CLIENT KILL of every connection to A
// but the tracker's). The gate compares run_ids: A and B are two server
// processes.
func TestSentinelRelay_onlyToGoRedisPrimary(t *testing.T) {
	a, b := harness.StartStandalone(t), harness.StartStandalone(t)
	var target atomic.Value
	target.Store(a.Addr())
	rdb := redis.NewClient(&redis.Options{
		Addr: "FailoverClient",
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, target.Load().(string))
		},
		MaintNotificationsConfig: harness.NoMaintNotifications(),
	})
	t.Cleanup(func() { _ = rdb.Close() })
	var rounds atomic.Int64
	c, err := lualock.New(rdb, lualock.Options{
		WatchdogLease: 900 * time.Millisecond, // a round every 300ms
		Observer:      lualock.Observer{Renew: func(lualock.RenewEvent) { rounds.Add(1) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := a.Client()
	t.Cleanup(func() { _ = admin.Close() })

	l := c.NewLock("relay-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the tracker's connection", func() bool { return c.Stats().TrackingConns == 1 })

	// Relayed: renewals that announce nothing to the tracker, so no
	// check follows them.
	checks0, renewals0 := harness.CommandCalls(t, admin, "evalsha_ro"), harness.CommandCalls(t, admin, "evalsha")
	r0 := rounds.Load()
	waitFor(t, ctx, "four renewal rounds", func() bool { return rounds.Load() >= r0+4 })
	checks, renewals := harness.CommandCalls(t, admin, "evalsha_ro")-checks0, harness.CommandCalls(t, admin, "evalsha")-renewals0
	if renewals < 4 {
		t.Fatalf("%d renewals on A over four rounds", renewals)
	}
	if checks > 1 {
		t.Errorf("%d checks after %d renewals: the renewals were not carried by the tracker's connection", checks, renewals)
	}
	if l.Context().Err() != nil {
		t.Fatalf("the hold ended while relayed: %v", context.Cause(l.Context()))
	}

	// go-redis moves to B; the tracker's connection stays up to A.
	target.Store(b.Addr())
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["id"] == "" || strings.Contains(f["flags"], "t") {
			continue // the tracker's (tracking on)
		}
		_ = admin.Do(ctx, "CLIENT", "KILL", "ID", f["id"], "SKIPME", "yes").Err()
	}
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("the hold was never told lost after go-redis moved to a primary without the lock: renewals went on on the old one")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lualock.ErrLockLost) || !strings.Contains(cause.Error(), "renewal") {
		t.Errorf("cause %v, want ErrLockLost told by a renewal", cause)
	}
	bc := b.Client()
	t.Cleanup(func() { _ = bc.Close() })
	if n := harness.CommandCalls(t, bc, "evalsha"); n == 0 {
		t.Error("no renewal reached B")
	}
	if n, err := admin.Exists(ctx, l.Name()).Result(); err != nil || n != 1 {
		t.Errorf("EXISTS on A = %d, %v; want the old copy still there (the loss came from B)", n, err)
	}
}

// waitFor polls cond every 10ms until it holds, or fails the test when
// ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
