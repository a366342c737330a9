package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lualock/lualock/internal/pipe"
)

// TestDo_spin: calls made one at a time get their own replies whether
// their reads spin or not; with a spin long enough for a loopback reply
// some reads are served by it (after the run of lone calls that allows
// it), and without one none is.
func TestDo_spin(t *testing.T) {
	_, rdb := server(t)
	addr := rdb.Options().Addr
	for _, spin := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(fmt.Sprint(spin), func(t *testing.T) {
			p := newPipe(t, addr, func(c *pipe.Config) { c.Spin = spin })
			for i := range 50 {
				want := fmt.Sprint("echo-", i)
				if v := mustDo(t, p, "ECHO", want); v != want {
					t.Fatalf("ECHO %s: %v", want, v)
				}
			}
			_, n := p.SpinStats()
			switch {
			case spin == 0 && n != 0:
				t.Errorf("%d reads spun without a spin", n)
			case spin > 0 && runtime.NumCPU() > 1 && n == 0:
				t.Errorf("no read of 50 lone calls was served by a %v spin", spin)
			}
			t.Logf("spin %v: %d of 50 reads served by it", spin, n)
		})
	}
}

// TestDo_spinConcurrent: with concurrent calls, whose reads do not spin,
// and lone ones between them, whose reads may, each call gets its own
// reply.
func TestDo_spinConcurrent(t *testing.T) {
	_, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.Spin = 200 * time.Microsecond })
	for round := range 4 {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 100 {
					want := fmt.Sprint(round, ":", g, ":", i)
					v, _, err := do(context.Background(), p, "ECHO", want)
					if err != nil || v != want {
						t.Errorf("ECHO %s: %v, %v", want, v, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		for i := range 20 { // lone calls: a run long enough to spin
			want := fmt.Sprint(round, ":lone:", i)
			if v := mustDo(t, p, "ECHO", want); v != want {
				t.Fatalf("ECHO %s: %v", want, v)
			}
		}
	}
}

// TestDo_spinPaused: a lone call whose reply does not come within the
// spin sleeps and leaves when its context ends, as without one; the
// connection stays in step: the next call gets its own reply.
func TestDo_spinPaused(t *testing.T) {
	s, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.Spin = 5 * time.Millisecond })
	for i := range 20 {
		if v := mustDo(t, p, "ECHO", fmt.Sprint(i)); v != fmt.Sprint(i) {
			t.Fatalf("ECHO %d: %v", i, v)
		}
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = s.Resume()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, _, err := do(ctx, p, "ECHO", "paused")
		res <- err
	}()
	time.Sleep(20 * time.Millisecond) // past the spin: the lead sleeps
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("a call to a paused server, cancelled: %v, want context.Canceled", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	for i := range 20 {
		want := fmt.Sprint("after-", i)
		if v := mustDo(t, p, "ECHO", want); v != want {
			t.Fatalf("ECHO %s after the pause: %v", want, v)
		}
	}
}

// TestDo_spinBacksOff: lone calls whose replies come later than the spin
// (a script that keeps the server busy for 2ms) stop trying it: each spin
// that finds nothing doubles the run of lone calls the next one waits for.
func TestDo_spinBacksOff(t *testing.T) {
	_, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.Spin = 50 * time.Microsecond })
	const calls = 200
	for range calls {
		if v := mustDo(t, p, "EVAL", busy2ms, "0"); v != int64(1) {
			t.Fatalf("EVAL: %v", v)
		}
	}
	tried, served := p.SpinStats()
	t.Logf("%d lone calls of 2ms: %d spins tried, %d served", calls, tried, served)
	// Without the backoff every call after the first 8 would try: 192.
	// With it, about 5 (after 8, 16, 32 and 64 more lone calls, then each
	// 64), and a few more if a loaded machine let a lead find its reply
	// waiting.
	if tried == 0 || tried > 40 {
		t.Errorf("%d spins tried over %d lone calls slower than the spin, want between 1 and 40", tried, calls)
	}
}

// busy2ms is a script that keeps the server busy for 2ms.
const busy2ms = `local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= 2000
return 1`
