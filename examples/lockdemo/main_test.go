package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// runDemo runs the demo on the embedded miniredis and returns its output.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(args, &out); err != nil {
		t.Fatalf("run %q: %v\noutput:\n%s", args, err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	return out.String()
}

// checkOutput checks that every worker took the lock rounds times and that
// the demo reported no overlap (run fails on one).
func checkOutput(t *testing.T, out string, workers, rounds int) {
	t.Helper()
	if !strings.Contains(out, "no overlapping holds") {
		t.Errorf("summary does not report exclusive holds")
	}
	for i := range workers {
		w := workerName(i)
		if n := strings.Count(out, w+" acquired"); n != rounds {
			t.Errorf("%s acquired %d times, want %d", w, n, rounds)
		}
		if n := strings.Count(out, w+" released"); n != rounds {
			t.Errorf("%s released %d times, want %d", w, n, rounds)
		}
	}
	// Holds alternate: acquired, released, acquired, ... by the same worker.
	var holder string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "+") {
			continue
		}
		switch f[2] {
		case "acquired":
			if holder != "" {
				t.Errorf("%s acquired while %s held the lock: %q", f[1], holder, line)
			}
			holder = f[1]
		case "released":
			if holder != f[1] {
				t.Errorf("%s released a lock held by %q: %q", f[1], holder, line)
			}
			holder = ""
		}
	}
	for _, want := range []string{"wait       p50", "handoff    p50", "order"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}

func TestDemo(t *testing.T) {
	out := runDemo(t, "-workers", "4", "-rounds", "2", "-hold", "20ms")
	checkOutput(t, out, 4, 2)
}

func TestDemoFair(t *testing.T) {
	// With -fair each worker asks once the one before it is in the queue,
	// and a holder releases once every other worker with rounds left is
	// queued: by causality, not by timing, they queue in start order, and
	// the lock must go round-robin, to the worker that asked first.
	out := runDemo(t, "-fair", "-workers", "4", "-rounds", "2", "-hold", "20ms")
	checkOutput(t, out, 4, 2)
	if !strings.Contains(out, "order      1 2 3 4 1 2 3 4\n") {
		t.Errorf("fair lock handoffs were not round-robin in start order")
	}
	if !strings.Contains(out, "FIFO       kept") {
		t.Errorf("fair lock did not keep FIFO order")
	}
}

func TestDemoDetectsOverlap(t *testing.T) {
	d := newDemo(config{workers: 2}, &bytes.Buffer{}, nil, nil)
	if err := d.acquired(0, d.start, d.start); err != nil {
		t.Fatal(err)
	}
	if err := d.acquired(1, d.start, d.start); err == nil || !strings.Contains(err.Error(), "mutual exclusion violated") {
		t.Fatalf("second acquisition while held: got %v, want a mutual exclusion error", err)
	}
	d.releasing(0)
	if err := d.acquired(1, d.start, d.start); err != nil {
		t.Fatalf("acquisition after release: %v", err)
	}
}

func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-workers", "0"},
		{"-rounds", "-1"},
		{"-hold", "-1s"},
		{"extra"},
		{"-addr", "nonsense"},
	} {
		err := run(args, &bytes.Buffer{})
		if !errors.Is(err, errUsage) {
			t.Errorf("run %q: got %v, want a usage error", args, err)
		}
	}
}

// The embedded miniredis must expire keys on the wall clock, as Redis does:
// otherwise a lock whose holder vanished would never be freed.
func TestEmbeddedRedisExpiresKeys(t *testing.T) {
	rdb, _, closeRedis, err := openRedis("")
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	before, _ := rdb.Time(ctx).Result()
	time.Sleep(120 * time.Millisecond)
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("key with a 50ms TTL still exists after 120ms (exists=%d, err=%v)", n, err)
	}
	after, _ := rdb.Time(ctx).Result()
	if d := after.Sub(before); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("TIME advanced %v over a 120ms sleep", d)
	}
}
