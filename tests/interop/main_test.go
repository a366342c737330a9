// Package interop runs lualock (the library and the lualock command) beside
// the real Redisson Java client on one Redis, standalone and a 3-master
// cluster (tests/harness): mutual exclusion both ways, wake-up latency both
// ways, fair arrival order across languages, re-entry, the watchdog, and
// Redisson's forceUnlock reaching a Go holder. On a Sentinel deployment
// (sentinel_test.go) both sides wait for the replica after their
// acquisitions, Redisson with its own WAIT and lualock with its replica
// acknowledgement, still exclude each other, and keep their holds through
// a failover. Redisson runs in a small Java
// agent of this project's own (agent/Agent.java), compiled by the test
// against the jars that LUALOCK_REDISSON_JARS names; without them the tests
// skip loudly, or fail when LUALOCK_REQUIRE_REDISSON=1 (CI).
//
// The pub/sub tests of the lualock command (cli_pubsub_test.go) need no
// Java: they publish releases as Redisson does, from a script.
package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lualock/lualock/tests/harness"
)

// lualockBin is the lualock command built for the tests.
var lualockBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lualock-interop-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lualockBin = filepath.Join(dir, "lualock")
	if b, err := exec.Command("go", "build", "-o", lualockBin, "../../cmd/lualock").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ../../cmd/lualock: %v\n%s", err, b)
		os.Exit(1)
	}
	code := harness.Run(m)
	for _, f := range cleanups {
		f()
	}
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := harness.FindLeaks(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
