//go:build unix

package main

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/lualock/lualock/tests/harness"
)

// Through Sentinels, a blip at lualock's first contact (a Sentinel's
// connection closed before any answer, twice) does not fail lualock lock
// either: it tries again within -wait, or within 5s with -n or without
// -wait; status still fails at once. And kill -9 of a lualock that holds
// through Sentinels is handed over by its supervisor on the primary they
// name.
func TestSentinelRetriesAndHandsOver(t *testing.T) {
	d := harness.StartSentinel(t, harness.SentinelOptions{})
	s := newServer(t) // REDIS_URL: a standalone server, which -sentinel replaces
	for _, flags := range [][]string{{"-n"}, {"-wait", "10s"}, nil} {
		addr, accepted := blipServer(t, d.SentinelAddrs()[0], 2)
		args := append(append([]string{"lock", "-sentinel", addr, "-master", d.Master()}, flags...), lockName(t), "--", "echo", "ran")
		p, code := s.run(t, nil, args...)
		if code != 0 || p.stdout.String() != "ran\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and the command run", flags, code, p.stdout.String(), p.stderr.String())
		}
		if n := accepted.Load(); n < 3 {
			t.Errorf("%v: %d connections to the Sentinel, want the 2 dropped ones and more", flags, n)
		}
	}
	// status: one attempt (go-redis may still dial again in the
	// background before it exits, so the connections are not counted).
	addr, _ := blipServer(t, d.SentinelAddrs()[0], 1)
	p, code := s.run(t, nil, "status", "-sentinel", addr, "-master", d.Master(), lockName(t))
	if stderr := p.stderr.String(); code != exitError || !strings.Contains(stderr, "cannot reach Redis primary") || strings.Contains(stderr, "attempts") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("status through a blip: exit %d, stderr %q; want %d and one line, after one attempt", code, stderr, exitError)
	}

	sentinels := strings.Join(d.SentinelAddrs(), ",")
	flags := []string{"-sentinel", sentinels, "-master", d.Master()}
	name := handOver(t, s, flags, flags)
	if s.exists(t, name) {
		t.Errorf("lock %s went to REDIS_URL's server", name)
	}
}

// Sentinels with a password (requirepass): -sentinel-password or
// $LUALOCK_SENTINEL_PASSWORD reaches them; the password shows in no
// output and not in the supervisor's command line; a wrong or missing one
// is one line on stderr and exit 1.
func TestSentinelPassword(t *testing.T) {
	const pass = "s3nt1nel-pw"
	d := harness.StartSentinel(t, harness.SentinelOptions{SentinelPassword: pass})
	s := newServer(t)
	name := lockName(t)
	sentinels := strings.Join(d.SentinelAddrs(), ",")
	env := []string{"LUALOCK_SENTINEL=" + sentinels, "LUALOCK_SENTINEL_MASTER=" + d.Master()}
	// The command prints its parent's (the supervisor's) command line.
	show := `tr '\0' ' ' < /proc/$PPID/cmdline; echo`
	if runtime.GOOS != "linux" {
		show = "true"
	}
	withPass := append([]string{envSentinelPass + "=" + pass}, env...)
	p, code := s.run(t, withPass, "lock", name, "--", "sh", "-c", show+`; "$1" status "$2"`, "sh", bin, name)
	out := p.stdout.String()
	if code != 0 || !strings.Contains(out, "  holds 1\n") {
		t.Errorf("lock, status with $%s: exit %d, stdout %q, stderr %q", envSentinelPass, code, out, p.stderr.String())
	}
	if runtime.GOOS == "linux" && !strings.Contains(out, superviseCmd) {
		t.Errorf("the command did not print the supervisor's command line: %q", out)
	}
	if strings.Contains(out, pass) || strings.Contains(p.stderr.String(), pass) {
		t.Errorf("the password shows: stdout %q, stderr %q", out, p.stderr.String())
	}
	if s.exists(t, name) {
		t.Errorf("lock %s went to REDIS_URL's server", name)
	}
	p, code = s.run(t, env, "status", "-sentinel-password", pass, name)
	if out := p.stdout.String() + p.stderr.String(); code != 0 || !strings.Contains(out, ": not locked\n") || strings.Contains(out, pass) {
		t.Errorf("status -sentinel-password: exit %d, output %q; want 0, not locked, and no password", code, out)
	}
	for _, tc := range []struct {
		what, env, want string
	}{
		{"a wrong password", envSentinelPass + "=not-" + pass, "WRONGPASS"},
		{"no password", "", "NOAUTH"},
	} {
		e := append([]string{tc.env}, env...)
		p, code := s.run(t, e, "status", name)
		stderr := p.stderr.String()
		if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "-sentinel-password") {
			t.Errorf("status with %s: exit %d, stderr %q; want %d and one line that says %s and names -sentinel-password", tc.what, code, stderr, exitError, tc.want)
		}
		if strings.Contains(stderr, pass) {
			t.Errorf("status with %s: stderr shows the password: %q", tc.what, stderr)
		}
	}
	p, code = s.run(t, nil, "status", "-sentinel-password", pass, name)
	if code != exitUsage || !strings.Contains(p.stderr.String(), "without -sentinel") || strings.Contains(p.stderr.String(), pass) {
		t.Errorf("status -sentinel-password without -sentinel: exit %d, stderr %q; want %d", code, p.stderr.String(), exitUsage)
	}
}

// The Sentinels' credentials and the primary's (from -addr or
// $REDIS_URL) go to their own fields of the failover options.
func TestSentinelCredentials(t *testing.T) {
	t.Setenv(envSentinelUser, "")
	t.Setenv(envSentinelPass, "spw")
	t.Setenv(envSentinel, "")
	t.Setenv(envMaster, "")
	opts, err := parseAddr("redis://dataUser:dpw@127.0.0.1:7000/2")
	if err != nil {
		t.Fatal(err)
	}
	d := &deployFlags{sentinels: "127.0.0.1:26379,127.0.0.1:26380", master: "m", sentinelUser: "suser"}
	fo, err := d.failover(opts)
	if err != nil {
		t.Fatal(err)
	}
	if fo.SentinelUsername != "suser" || fo.SentinelPassword != "spw" || fo.Username != "dataUser" || fo.Password != "dpw" || fo.DB != 2 || fo.MasterName != "m" || len(fo.SentinelAddrs) != 2 {
		t.Errorf("failover options %+v", fo)
	}
	_ = os.Unsetenv(envSentinelPass)
}
