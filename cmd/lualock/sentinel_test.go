package main

import (
	"strings"
	"testing"

	"github.com/lualock/lualock/tests/harness"
)

// TestSentinel: lock and status reach the primary a Sentinel deployment
// names (-sentinel and -master, or their environment variables), and
// status says the replica acknowledgement in effect and the primary's
// replicas.
func TestSentinel(t *testing.T) {
	d := harness.StartSentinel(t, harness.SentinelOptions{})
	s := newServer(t) // REDIS_URL: the standalone server, which -sentinel replaces
	name := lockName(t)
	sentinels := strings.Join(d.SentinelAddrs(), ",")
	p, code := s.run(t, []string{"LUALOCK_SENTINEL=" + sentinels, "LUALOCK_SENTINEL_MASTER=" + d.Master()},
		"lock", name, "--", bin, "status", name)
	out := p.stdout.String()
	if code != 0 || !strings.Contains(out, "  holds 1\n") || !strings.Contains(out, "replica acknowledgement: one (timeout 1s); replicas of the primary: 1\n") {
		t.Errorf("lock on the Sentinels' primary: exit %d, stdout %q, stderr %q", code, out, p.stderr.String())
	}
	// The standalone server behind REDIS_URL never saw the lock.
	if n, err := s.rdb.Exists(t.Context(), name).Result(); err != nil || n != 0 {
		t.Errorf("the lock went to REDIS_URL's server: EXISTS %d, %v", n, err)
	}
	p, code = s.run(t, nil, "status", "-sentinel", sentinels, name)
	if code != exitUsage || !strings.Contains(p.stderr.String(), "-sentinel needs -master") {
		t.Errorf("status -sentinel without -master: exit %d, stderr %q", code, p.stderr.String())
	}
}
