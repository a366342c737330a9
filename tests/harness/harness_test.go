//go:build !windows

package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/lualock/lualock/tests/harness"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	code := harness.Run(m) // m.Run, then stop every server we started
	if code == 0 {
		if err := harness.FindLeaks(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// pidGone reports whether no process with this pid exists (kill(pid, 0)).
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestStandalone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := harness.StartStandalone(t)
	pid := s.PID()
	if pid <= 0 || pidGone(pid) {
		t.Fatalf("PID() = %d, want a live pid", pid)
	}

	rdb := s.Client()
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k = %q, %v", got, err)
	}

	// Crash: the pid disappears and the address stops answering.
	s.Kill()
	if !pidGone(pid) {
		t.Fatalf("pid %d still exists after Kill", pid)
	}
	if s.Running() || s.PID() != 0 {
		t.Fatal("server reports running after Kill")
	}
	quick := s.Client(func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
	defer quick.Close()
	if err := quick.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded after Kill")
	}

	// Restart: same address, new process, no data.
	addr := s.Addr()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("address changed on restart: %s -> %s", addr, s.Addr())
	}
	pid2 := s.PID()
	if pid2 == 0 || pid2 == pid {
		t.Fatalf("PID after restart = %d (before %d)", pid2, pid)
	}
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after restart: err = %v, want redis.Nil (data gone)", err)
	}
	if err := rdb.Set(ctx, "k2", "v2", 0).Err(); err != nil {
		t.Fatalf("SET after restart: %v", err)
	}

	// Restart of a running server also wipes it.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after second restart = %d, %v", n, err)
	}

	// Stop: pid reaped, dir removed, idempotent, no restart.
	pid3, dir := s.PID(), s.Dir()
	s.Stop()
	s.Stop()
	if !pidGone(pid3) {
		t.Fatalf("pid %d still exists after Stop", pid3)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("dir %s still exists after Stop: %v", dir, err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

func TestStartRefusesDefaultPort(t *testing.T) {
	t.Parallel()
	if s, err := harness.Start(harness.Options{Port: 6379}); err == nil {
		s.Stop()
		t.Fatal("Start on 6379 succeeded")
	}
}

func TestStartFailureIncludesLog(t *testing.T) {
	t.Parallel()
	harness.Require(t)
	s, err := harness.Start(harness.Options{Args: []string{"--no-such-option", "x"}})
	if err == nil {
		s.Stop()
		t.Fatal("Start with a bad option succeeded")
	}
	t.Logf("expected error: %v", err)
	if want := "no-such-option"; !contains(err.Error(), want) {
		t.Fatalf("error does not include the log (%q missing): %v", want, err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestParallelStarts(t *testing.T) {
	t.Parallel()
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			s := harness.StartStandalone(t)
			rdb := s.Client()
			defer rdb.Close()
			if err := rdb.Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestShared(t *testing.T) {
	t.Parallel()
	a, b := harness.SharedStandalone(t), harness.SharedStandalone(t)
	if a != b {
		t.Fatal("SharedStandalone returned two servers")
	}
	rdb := a.Client()
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	c := harness.StartCluster(t)
	t.Logf("cluster of %d masters ready in %v: %v", len(c.Addrs()), time.Since(start).Round(time.Millisecond), c.Addrs())
	if len(c.Addrs()) != 3 {
		t.Fatalf("Addrs() = %v, want 3", c.Addrs())
	}

	rdb := c.Client()
	defer rdb.Close()
	const n = 100
	for i := range n {
		key := fmt.Sprintf("key:%d", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	for i := range n {
		key := fmt.Sprintf("key:%d", i)
		if got, err := rdb.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v", key, got, err)
		}
	}

	// The keys really are spread over all masters.
	total := int64(0)
	for _, node := range c.Nodes() {
		nc := node.Client()
		size, err := nc.DBSize(ctx).Result()
		nc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if size == 0 {
			t.Errorf("node %s holds no keys", node.Addr())
		}
		total += size
	}
	if total != n {
		t.Errorf("keys across nodes = %d, want %d", total, n)
	}

	// Stop leaves none of the pids behind.
	var pids []int
	for _, node := range c.Nodes() {
		pids = append(pids, node.PID())
	}
	c.Stop()
	for _, pid := range pids {
		if pid == 0 || !pidGone(pid) {
			t.Errorf("node pid %d still exists after Stop", pid)
		}
	}
}

func TestSharedCluster(t *testing.T) {
	t.Parallel()
	c := harness.SharedCluster(t)
	if c != harness.SharedCluster(t) {
		t.Fatal("SharedCluster returned two clusters")
	}
	rdb := c.Client()
	defer rdb.Close()
	if err := rdb.Set(context.Background(), "shared:{x}", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
}
