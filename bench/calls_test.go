package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stuckMutex's lock blocks until its context ends; its unlock succeeds.
type stuckMutex struct{ pingMutex }

func (stuckMutex) lock(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestCalls_do_stall(t *testing.T) {
	t.Parallel()
	var cs calls
	start := time.Now()
	err := cs.lock(context.Background(), stuckMutex{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("lock: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d < callTimeout || d > callTimeout+time.Second {
		t.Errorf("lock returned after %v, want about %v", d, callTimeout)
	}
	if cs.errs.Load() != 1 || cs.stalls.Load() != 1 {
		t.Errorf("errors %d, stalls %d; want 1, 1", cs.errs.Load(), cs.stalls.Load())
	}
}

func TestCalls_do_endOfRun(t *testing.T) {
	t.Parallel()
	var cs calls
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := cs.lock(ctx, stuckMutex{}); err == nil {
		t.Fatal("lock: no error")
	}
	if cs.errs.Load() != 0 {
		t.Errorf("the run's own end counted as %d errors", cs.errs.Load())
	}
}

func TestSlot_stall(t *testing.T) {
	t.Parallel()
	var cs calls
	s := newSlot(time.Now().Add(time.Minute))
	stop := watch([]*slot{s})
	defer stop()
	if err := s.lock(&cs, stuckMutex{}); err == nil {
		t.Fatal("lock: no error")
	}
	if cs.errs.Load() != 1 || cs.stalls.Load() != 1 {
		t.Errorf("errors %d, stalls %d; want 1, 1", cs.errs.Load(), cs.stalls.Load())
	}
	if err := s.unlock(&cs, stuckMutex{}); err != nil || s.ctx.Err() != nil {
		t.Errorf("after a stall: unlock %v, context %v; want a fresh context", err, s.ctx.Err())
	}
}

func TestStatName(t *testing.T) {
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"INFO", "commandstats"}, "info"},
		{[]any{"client", "LIST"}, "client|list"},
		{[]any{"scan", 0, "match", "x"}, "scan"},
	} {
		if got := statName(c.args); got != c.want {
			t.Errorf("statName(%v) = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want string
	}{
		{1, 1, "1.00×"}, {0.0123, 1, "0.0123×"}, {16.34, 1, "16.3×"}, {356, 1, "356×"}, {0, 1, "0×"}, {1, 0, "–"},
	} {
		if got := ratio(c.a, c.b); got != c.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

func TestRotate(t *testing.T) {
	vs := []variant{{name: "a"}, {name: "b"}, {name: "c"}}
	for r, want := range []string{"abc", "bca", "cab", "abc"} {
		got := ""
		for _, v := range rotate(vs, r) {
			got += v.name
		}
		if got != want {
			t.Errorf("rotate(abc, %d) = %s, want %s", r, got, want)
		}
	}
}
