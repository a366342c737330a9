package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSemaphoreCommand: lualock lock -semaphore 2 runs at most two commands
// at once (each records itself in a file while it runs), all six run, the
// permits are all back at the end, and the command sees its permit id.
func TestSemaphoreCommand(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	dir := t.TempDir()
	const n = 6
	var ps []*proc
	for i := range n {
		ps = append(ps, s.start(t, nil, "lock", "-q", "-semaphore", "2", name, "--", "sh", "-c",
			`: > "$1/in.$2"; c=$(ls "$1" | grep -c '^in\.'); echo "$c" >> "$1/max.$2"; echo "$LUALOCK_PERMIT" > "$1/id.$2"; sleep 0.2; rm "$1/in.$2"`,
			"sh", dir, strconv.Itoa(i)))
	}
	for _, p := range ps {
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr.String())
		}
	}
	for i := range n {
		b, err := os.ReadFile(filepath.Join(dir, "max."+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := strconv.Atoi(strings.TrimSpace(string(b))); c < 1 || c > 2 {
			t.Fatalf("command %d ran with %d commands inside, want at most 2", i, c)
		}
		id, _ := os.ReadFile(filepath.Join(dir, "id."+strconv.Itoa(i)))
		if len(strings.TrimSpace(string(id))) != 32 {
			t.Fatalf("LUALOCK_PERMIT = %q, want 32 hex characters", id)
		}
	}
	if v, err := s.rdb.Get(context.Background(), name).Result(); err != nil || v != "2" {
		t.Fatalf("available permits %q (%v) at the end, want 2", v, err)
	}
}

// TestSemaphoreCommandHolderDies: a lualock killed with SIGKILL, with its
// supervisor, holding the only permit: the next one gets it when the
// permit's lease (the watchdog's, 1s here) runs out.
func TestSemaphoreCommandHolderDies(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	env := []string{"LUALOCK_WATCHDOG_LEASE=1s"}
	pidFile := filepath.Join(t.TempDir(), "pid")
	holder := s.start(t, env, "lock", "-semaphore", "1", name, "--", "sh", "-c", `echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 30`, "sh", pidFile)
	cmdPID := readPIDs(t, pidFile)[0]
	time.Sleep(500 * time.Millisecond) // renewed at least once
	killHolderAndSupervisor(t, holder, cmdPID)
	killed := time.Now()
	holder.wait(t, 5*time.Second)
	p, code := s.run(t, nil, "lock", "-semaphore", "1", "-wait", "10s", name, "--", "true")
	if code != 0 {
		t.Fatalf("second lualock: exit %d: %s", code, p.stderr.String())
	}
	if took := time.Since(killed); took > 2*time.Second+500*time.Millisecond {
		t.Errorf("the permit came back %v after its holder died, want within the 1s lease (+1.5s slack)", took)
	}
	// -wait 0 with the permit taken, and bad flags.
	busy := s.start(t, nil, "lock", "-semaphore", "1", name, "--", "sh", "-c", `: > "$1"; sleep 30`, "sh", readyFile(t)+"2")
	waitFor(t, "the second holder", 5*time.Second, func() bool {
		v, _ := s.rdb.Get(context.Background(), name).Result()
		return v == "0"
	})
	if p, code := s.run(t, nil, "lock", "-semaphore", "1", "-n", name, "--", "true"); code != exitNotObtained {
		t.Errorf("-n with no permit left: exit %d, want %d: %s", code, exitNotObtained, p.stderr.String())
	}
	busy.signal(t, syscall.SIGTERM)
	busy.wait(t, 5*time.Second)
	if _, code := s.run(t, nil, "lock", "-semaphore", "1", "-fair", name, "--", "true"); code != exitUsage {
		t.Errorf("-semaphore with -fair: exit %d, want %d", code, exitUsage)
	}
}
