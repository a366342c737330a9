package lualock

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/luart"
)

// TestNew_retryPolicies: the acquire scripts run with no retry of luart's
// (the acquisition loop is their only retry), the other calls with
// luagen's default policy; both through Options.Scripter when set. The
// classification itself is luart.Transient's, tested there.
func TestNew_retryPolicies(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	for name, o := range map[string]Options{"client": {}, "Options.Scripter": {Scripter: struct{ redis.Scripter }{rdb}}} {
		c, err := New(rdb, o)
		if err != nil {
			t.Fatal(err)
		}
		if got := luart.RetryOf(c.env.scripts); got != (luart.Retry{Attempts: 1}) {
			t.Errorf("%s: acquire scripts' policy %+v, want Attempts 1", name, got)
		}
		if got := luart.RetryOf(c.env.calls); got != luart.DefaultRetry() {
			t.Errorf("%s: other calls' policy %+v, want DefaultRetry", name, got)
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestTransientPoolErrors: luart matches go-redis's pool errors by their
// text, as its module supports go-redis versions that do not export them;
// with the go-redis of this module the exported values are transient.
func TestTransientPoolErrors(t *testing.T) {
	for _, err := range []error{redis.ErrPoolTimeout, redis.ErrPoolExhausted, &luart.Error{Script: "x", Err: redis.ErrPoolTimeout}} {
		if !luart.Transient(err) {
			t.Errorf("luart.Transient(%v) = false", err)
		}
	}
}

// TestRelayable: a plain client and a cluster client relay the
// watchdog's renewals on the hold tracker's connections as they are;
// behind Sentinel, whose switch of primary the tracker's connection does
// not follow, a failover client relays them only through primaryGate
// (TestSentinelRelay_onlyToGoRedisPrimary), a failover cluster client
// never.
func TestRelayable(t *testing.T) {
	addrs := []string{"127.0.0.1:1"}
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
		want bool
	}{
		{"plain", redis.NewClient(&redis.Options{Addr: addrs[0]}), true},
		{"cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}), true},
		{"failover", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: addrs}), false},
		{"failover cluster", redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: addrs}), false},
	} {
		if got := relayable(c.rdb); got != c.want {
			t.Errorf("%s client: relayable %v, want %v", c.name, got, c.want)
		}
		_ = c.rdb.Close()
	}
}
