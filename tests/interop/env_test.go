package interop

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/tests/harness"
)

// backend is one Redis the suite runs on.
type backend struct {
	name    string
	cluster bool
	rdb     redis.UniversalClient
	addrs   []string // host:port of the server or of every cluster node
	cli     []string // the lualock command's flags to reach it; nil: -addr addrs[0]
}

// connFlags are the lualock command's flags that reach the backend.
func (b backend) connFlags() []string {
	if b.cli != nil {
		return b.cli
	}
	return []string{"-addr", b.addrs[0]}
}

// backends returns the shared standalone server and the shared 3-master
// cluster of the harness (which skips, or fails under
// LUALOCK_REQUIRE_REDIS=1, without redis-server).
func backends(t *testing.T) []func(t *testing.T) backend {
	return []func(t *testing.T) backend{
		func(t *testing.T) backend {
			s := harness.SharedStandalone(t)
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rdb.Close() })
			return backend{name: "standalone", rdb: rdb, addrs: []string{s.Addr()}}
		},
		func(t *testing.T) backend {
			cl := harness.SharedCluster(t)
			rdb := cl.Client(func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true })
			t.Cleanup(func() { _ = rdb.Close() })
			return backend{name: "cluster", cluster: true, rdb: rdb, addrs: cl.Addrs()}
		},
	}
}

var backendNames = []string{"standalone", "cluster"}

// uniqueName returns a lock name no other test uses.
func uniqueName(t *testing.T) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// channel is the release channel of the lock name.
func channel(name string) string { return "redisson_lock__channel:{" + name + "}" }

// queueKey is the fair lock's queue.
func queueKey(name string) string { return "redisson_lock_queue:{" + name + "}" }

// numSub returns the number of plain and sharded subscribers of ch, summed
// over a cluster's masters.
func numSub(t *testing.T, rdb redis.UniversalClient, ch string) (plain, sharded int64) {
	t.Helper()
	plain, sharded, err := harness.NumSub(context.Background(), rdb, ch)
	if err != nil {
		t.Fatal(err)
	}
	return plain, sharded
}

// waitUntil polls cond every 2ms for up to limit and fails the test with
// what when it does not hold by then.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waiterChannel waits until the fair lock name has want waiters queued and
// returns the channel of the last one, or for the reentrant lock returns
// the lock's channel.
func waiterChannel(t *testing.T, rdb redis.UniversalClient, name string, fair bool, want int64) string {
	t.Helper()
	if !fair {
		return channel(name)
	}
	ctx := context.Background()
	waitUntil(t, 10*time.Second, "the waiter queued", func() bool { return rdb.LLen(ctx, queueKey(name)).Val() == want })
	return channel(name) + ":" + rdb.LIndex(ctx, queueKey(name), want-1).Val()
}

// subscribed waits until ch has at least one subscriber of either kind.
func subscribed(t *testing.T, rdb redis.UniversalClient, ch string) {
	t.Helper()
	waitUntil(t, 10*time.Second, "a subscriber on "+ch, func() bool {
		p, s := numSub(t, rdb, ch)
		return p+s > 0
	})
}

func newClient(t *testing.T, rdb redis.UniversalClient, o lualock.Options) *lualock.Client {
	t.Helper()
	c, err := lualock.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func newLock(c *lualock.Client, name string, fair bool) *lualock.Lock {
	if fair {
		return c.NewFairLock(name)
	}
	return c.NewLock(name)
}

func kindArg(fair bool) string {
	if fair {
		return "f"
	}
	return "r"
}

// cli is one run of the lualock command.
type cli struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	exited chan struct{}
	code   int
}

// startCLI starts lualock with args and extra environment entries; the
// test's cleanup kills it (by its pid) if it still runs.
func startCLI(t *testing.T, env []string, args ...string) *cli {
	t.Helper()
	c := &cli{cmd: exec.Command(lualockBin, args...), exited: make(chan struct{})}
	c.cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "LUALOCK_") || strings.HasPrefix(e, "REDIS_URL=")
	}), env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = c.cmd.Wait()
		c.code = c.cmd.ProcessState.ExitCode()
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.code = 128 + int(ws.Signal())
		}
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

// wait waits up to limit for the command to exit and returns its code, or
// -1 when it still runs.
func (c *cli) wait(limit time.Duration) int {
	select {
	case <-c.exited:
		return c.code
	case <-time.After(limit):
		return -1
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}
