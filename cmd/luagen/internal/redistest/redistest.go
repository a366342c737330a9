// Package redistest starts a throwaway redis-server for the tests of the
// generator's module, which cannot use lualock's test harness: that lives
// in the lualock module, whose requirements (a newer go-redis) must not
// enter this module's.
package redistest

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Start starts a redis-server for one test on a free loopback port (never
// 6379), without persistence, and returns its address; Cleanup stops it.
// Without redis-server on PATH the test is skipped, or fails when
// LUALOCK_REQUIRE_REDIS=1.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("LUALOCK_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on PATH and LUALOCK_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH")
	}
	for try := 0; try < 5; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port == 6379 {
			continue
		}
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--daemonize", "no")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(out)
			ok := false
			for sc.Scan() {
				if !ok && strings.Contains(sc.Text(), "Ready to accept connections") {
					ok = true
					ready <- true
				}
			}
			if !ok {
				ready <- false
			}
		}()
		select {
		case ok := <-ready:
			if ok {
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				})
				return "127.0.0.1:" + strconv.Itoa(port)
			}
		case <-time.After(30 * time.Second):
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatal("redis-server did not start on a free loopback port in 5 tries")
	return ""
}

// Client starts a redis-server and connects to it; Cleanup closes both.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: Start(t)})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return c
}
