package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lualock/lualock/tests/harness"
)

// The command finishes under the lock, then the network holds the release
// up past the lease (a proxy blacks the link out from just before the
// command exits until 1.5 leases later): nothing took the lock away, so
// lualock exits with the command's status (7), not 3, with a warning on
// stderr, for every kind of hold that renews.
func TestReleaseHeldUpPastLease(t *testing.T) {
	s := newServer(t)
	for _, flag := range []string{"", "-write", "-fenced"} {
		t.Run(strings.TrimPrefix(flag+"plain", "-"), func(t *testing.T) {
			px, err := harness.StartProxy(s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer px.Close()
			via := &server{addr: px.Addr(), rdb: s.rdb}
			name := lockName(t)
			ready, goOn := readyFile(t), filepath.Join(t.TempDir(), "go")
			args := []string{"lock"}
			if flag != "" {
				args = append(args, flag)
			}
			const lease = 2 * time.Second
			args = append(args, name, "--", "sh", "-c", `: > "$1"; while [ ! -e "$2" ]; do sleep 0.01; done; exit 7`, "sh", ready, goOn)
			p := via.start(t, []string{"LUALOCK_WATCHDOG_LEASE=" + lease.String()}, args...)
			waitFile(t, ready)
			px.Blackhole()
			if err := os.WriteFile(goOn, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			time.Sleep(lease + lease/2)
			px.Restore()
			code := p.wait(t, 20*time.Second)
			stderr := p.stderr.String()
			t.Logf("exit %d, stderr %q", code, stderr)
			if code != 7 {
				t.Errorf("exit %d, want the command's 7", code)
			}
			if strings.Contains(stderr, " lost: ") {
				t.Errorf("stderr %q reports a loss", stderr)
			}
			if !strings.Contains(stderr, "lualock: ") {
				t.Errorf("stderr %q has no warning about the release", stderr)
			}
		})
	}
}
