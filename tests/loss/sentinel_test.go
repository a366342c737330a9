package loss_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// startSentinel starts a redis-server of its own and a Sentinel that
// monitors it (stopped by the test's cleanup, by pid), and returns a
// go-redis failover client through the Sentinel.
func startSentinel(t testing.TB) redis.UniversalClient {
	t.Helper()
	rdb, _ := startSentinelPrimary(t)
	return rdb
}

// startSentinelPrimary is startSentinel that also returns the primary the
// Sentinel monitors, for a test that restarts it.
func startSentinelPrimary(t testing.TB) (redis.UniversalClient, *harness.Server) {
	t.Helper()
	s, err := harness.Start(harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nsentinel monitor lualock 127.0.0.1 %d 1\n", port, dir, s.Port())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // the process we started, by its pid
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	if !backends.Eventually(10*time.Second, func() bool {
		a, err := sc.GetMasterAddrByName(context.Background(), "lualock").Result()
		return err == nil && len(a) == 2
	}) {
		t.Fatal("the Sentinel did not name the master within 10s")
	}
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "lualock", SentinelAddrs: []string{addr}})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, s
}

// Behind Sentinel (a go-redis failover client) the tracker follows the
// primary the Sentinel names: every cause ends every kind of hold, as on
// the other backends.
func TestLoss_sentinel(t *testing.T) {
	rdb := startSentinel(t)
	c := newClient(t, rdb, lualock.Options{})
	other := newClient(t, rdb, lualock.Options{})
	for _, cs := range causes() {
		t.Run(cs.name, func(t *testing.T) {
			for _, k := range kinds() {
				t.Run(k.name, func(t *testing.T) {
					name := backends.UniqueName(t)
					h := k.take(t, c, name)
					cs.change(t, rdb, other, k, name, h)
					wantLost(t, h, cs.name)
				})
			}
		})
	}
}
