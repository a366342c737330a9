package interop

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// foreignRelease deletes the lock and publishes "0" on a channel with the
// command ARGV[1], in one script, as Redisson's unlock does (Redisson 3.22+
// on a Redis 7 cluster: spublish; otherwise publish).
var foreignRelease = redis.NewScript(`redis.call('del', KEYS[1]); return redis.call(ARGV[1], KEYS[2], '0')`)

// foreignField is the owner field of a foreign (Redisson-like) holder.
const foreignField = "6b8f1e52-0000-4000-8000-000000000001:1"

// TestCLI_pubsub reproduces, without Java, a waiter that listened with the
// wrong pub/sub kind, for the lualock command: a foreign holder (HSET N <uuid>:1 1; PEXPIRE N 30000), "lualock
// lock N -- date +%s%N" waiting, then a script that deletes N and publishes
// "0" on the release channel (the fair lock: the waiter's own channel) with
// PUBLISH or SPUBLISH. With the default -pubsub the command starts within
// wakeBound of an SPUBLISH release on the cluster (Redisson 3.22+) and of a
// PUBLISH release on standalone Redis, and does not hear the other kind;
// -pubsub plain hears PUBLISH on the cluster (Redisson before 3.22), and
// both (here from LUALOCK_PUBSUB) hears either. A release not heard leaves
// the command waiting for its fallback timer (10s): it is stopped after
// deafFor.
//
// The command's start is read from its own output (date), so the bound
// covers lualock's wake-up, its lock, and the start of a process: under
// load a process start alone takes hundreds of milliseconds, so wakeBound
// grows by what a whole lualock run on a free lock took in the same test
// (cliCost), and lualock may take up to heardBy to exit, still well before
// the fallback timer.
func TestCLI_pubsub(t *testing.T) {
	const deafFor = 500 * time.Millisecond
	for i, newBackend := range backends(t) {
		t.Run(backendNames[i], func(t *testing.T) {
			b := newBackend(t)
			bound := wakeBound + cliCost(t, b)
			auto := "publish"
			if b.cluster {
				auto = "spublish"
			}
			cases := []struct {
				flag, env string // -pubsub, LUALOCK_PUBSUB
				cmd       string // the release's command
				fair      bool
				hears     bool
			}{
				{"", "", auto, false, true},
				{"", "", auto, true, true},
				{"", "", other(auto), false, false},
				{"plain", "", "publish", false, true},
				{"plain", "", "publish", true, true},
				{"plain", "", "spublish", false, false},
				{"sharded", "", "spublish", true, true},
				{"", "both", "publish", false, true},
				{"", "both", "spublish", false, true},
				{"both", "plain", "spublish", true, true}, // the flag wins over the environment
			}
			var lat []time.Duration
			for _, c := range cases {
				what := fmt.Sprintf("-pubsub %q LUALOCK_PUBSUB %q fair=%v, %s release", c.flag, c.env, c.fair, c.cmd)
				d, woke := cliWait(t, b, c.flag, c.env, c.cmd, c.fair, c.hears, deafFor)
				switch {
				case c.hears && !woke:
					t.Errorf("%s: lualock did not exit within %v", what, heardBy)
				case c.hears && d > bound:
					t.Errorf("%s: the command started %v after the release, want within %v", what, d, bound)
				case c.hears:
					lat = append(lat, d)
				case woke:
					t.Errorf("%s: the command started %v after a release of a kind it should not hear", what, d)
				}
			}
			t.Logf("command start after a heard foreign release: p50 %v, max %v (%d releases)", pct(lat, 0.5).Round(10*time.Microsecond), pct(lat, 1).Round(10*time.Microsecond), len(lat))
		})
	}
}

// heardBy is how long a lualock that heard a release may take to exit:
// far less than its 10s fallback timer, far more than a loaded machine
// takes to start its command and exit.
const heardBy = 5 * time.Second

// cliCost runs lualock once on a free lock of b (start, connect, lock, run
// true, release, exit) and returns how long that took: what the machine's
// load costs a process start in this test.
func cliCost(t *testing.T, b backend) time.Duration {
	t.Helper()
	start := time.Now()
	p := startCLI(t, nil, "lock", "-addr", b.addrs[0], uniqueName(t)+":canary", "--", "true")
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("canary run of lualock: exit %d: %s", code, p.stderr.String())
	}
	cost := time.Since(start)
	t.Logf("canary: a whole lualock run on a free lock took %v", cost)
	return cost
}

func other(cmd string) string {
	if cmd == "publish" {
		return "spublish"
	}
	return "publish"
}

// cliWait runs one case of TestCLI_pubsub: it returns how long after the
// foreign release the command started, and whether it started within
// wakeBound (deafFor when it should not hear the release).
func cliWait(t *testing.T, b backend, flag, env, cmd string, fair, hears bool, deafFor time.Duration) (time.Duration, bool) {
	t.Helper()
	ctx := context.Background()
	rdb := b.rdb
	name := uniqueName(t)
	if err := rdb.HSet(ctx, name, foreignField, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(ctx, name, 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Del(ctx, name)
	args := []string{"lock", "-addr", b.addrs[0]}
	if fair {
		args = append(args, "-fair")
	}
	if flag != "" {
		args = append(args, "-pubsub", flag)
	}
	var envs []string
	if env != "" {
		envs = append(envs, "LUALOCK_PUBSUB="+env)
	}
	p := startCLI(t, envs, append(args, name, "--", "date", "+%s%N")...)
	ch := waiterChannel(t, rdb, name, fair, 1)
	subscribed(t, rdb, ch)
	time.Sleep(30 * time.Millisecond) // let the waiter's retry after subscribing pass
	released := time.Now()
	if err := foreignRelease.Run(ctx, rdb, []string{name, ch}, cmd).Err(); err != nil {
		t.Fatal(err)
	}
	limit := heardBy
	if !hears {
		limit = deafFor
	}
	code := p.wait(limit)
	if code < 0 {
		_ = p.cmd.Process.Kill()
		p.wait(10 * time.Second)
		return 0, false
	}
	if code != 0 {
		t.Fatalf("lualock %v exited %d: %s", args, code, p.stderr.String())
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(p.stdout.String()), 10, 64)
	if err != nil {
		t.Fatalf("date output %q: %v", p.stdout.String(), err)
	}
	return time.Unix(0, ns).Sub(released), true
}

// TestCLI_pubsubUsage: a bad -pubsub or LUALOCK_PUBSUB is a usage error
// (exit 2, one line naming the choices), before anything reaches Redis.
func TestCLI_pubsubUsage(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"lock", "-pubsub", "spublish", "x", "--", "true"}},
		{[]string{"LUALOCK_PUBSUB=shard"}, []string{"lock", "x", "--", "true"}},
		{nil, []string{"unlock", "-force", "-pubsub", "", "x"}},
		{[]string{"LUALOCK_PUBSUB=x"}, []string{"unlock", "-force", "x"}},
	} {
		// An address where nothing listens: the usage error must come first.
		p := startCLI(t, c.env, append(c.args[:1:1], append([]string{"-addr", "127.0.0.1:1"}, c.args[1:]...)...)...)
		if code := p.wait(10 * time.Second); code != 2 {
			t.Errorf("%v %v: exit %d, want 2 (stderr %q)", c.env, c.args, code, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), "auto, plain, sharded or both") {
			t.Errorf("%v %v: stderr %q, want the choices named", c.env, c.args, p.stderr.String())
		}
	}
}
