package pipe_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lualock/lualock/internal/pipe"
	"github.com/lualock/lualock/tests/harness"
)

// fakeServer answers HELLO with +OK, ECHO x with $x, and SPLIT with an
// array of 3 integers sent in two parts, 300ms apart.
func fakeServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				go func() { <-t.Context().Done(); nc.Close() }()
				r := bufio.NewReader(nc)
				for {
					args, err := readCmd(r)
					if err != nil {
						return
					}
					switch strings.ToUpper(args[0]) {
					case "HELLO":
						nc.Write([]byte("+OK\r\n"))
					case "ECHO":
						nc.Write([]byte("$" + strconv.Itoa(len(args[1])) + "\r\n" + args[1] + "\r\n"))
					case "SPLIT":
						nc.Write([]byte("*3\r\n:1\r\n"))
						time.Sleep(300 * time.Millisecond)
						nc.Write([]byte(":2\r\n:3\r\n"))
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func readCmd(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	args := make([]string, n)
	for i := range args {
		if _, err := r.ReadString('\n'); err != nil {
			return nil, err
		}
		a, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args[i] = strings.TrimSuffix(a, "\r\n")
	}
	return args, nil
}

// TestLead_staysToTheReplysEnd: a lead whose context is cancelled while it
// waits for the rest of a reply it began reading stays until that reply
// ends, so that the next calls get their own replies, not its rest.
func TestLead_staysToTheReplysEnd(t *testing.T) {
	addr := fakeServer(t)
	p := newPipe(t, addr, func(c *pipe.Config) { c.Name = "" })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	v, _, err := do(ctx, p, "SPLIT")
	t.Logf("SPLIT (cancelled at 100ms): %v, %v", v, err)
	if err != nil || !reflect.DeepEqual(v, []any{int64(1), int64(2), int64(3)}) {
		t.Errorf("SPLIT: %#v, %v; want the whole reply, read to its end", v, err)
	}
	for _, s := range []string{"b", "c", "d"} {
		v, _, err := do(context.Background(), p, "ECHO", s)
		t.Logf("ECHO %s: %#v, %v", s, v, err)
		if v != s {
			t.Errorf("ECHO %s got %#v", s, v)
		}
	}
}

// TestLead_staysToTheReplysEnd_redis is TestLead_staysToTheReplysEnd on a
// server, with a reply large enough to take several reads, cancelled at
// any point of it.
func TestLead_staysToTheReplysEnd_redis(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "big", strings.Repeat("x", 8<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newPipe(t, rdb.Options().Addr, nil)
	for i := range 60 {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(time.Duration(i%15)*time.Millisecond, cancel)
		start := time.Now()
		_, _, err := do(cctx, p, "GET", "big")
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("%d: GET big after %v: %v", i, time.Since(start), err)
		}
		s := strconv.Itoa(i)
		v, _, err2 := do(ctx, p, "ECHO", s)
		if v != s {
			if str, ok := v.(string); ok && len(str) > 40 {
				v = str[:40] + "..."
			}
			t.Fatalf("iteration %d: GET big: %v; then ECHO %s got %#v, %v", i, err, s, v, err2)
		}
	}
}

// TestLead_deadline: a lead whose context has a deadline leaves at it,
// even when its read wakes before the context's own timer has ended the
// context (the deadline counts), not a read timeout later.
func TestLead_deadline(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.ReadTimeout = 5 * time.Second })
	mustDo(t, p, "PING")
	late := 0
	for i := range 30 {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		start := time.Now()
		_, _, err := do(dctx, p, "BLPOP", "k", "0")
		el := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || dctx.Err() == nil {
			t.Errorf("%d: BLPOP past its deadline: %v, with the context's Err %v; want DeadlineExceeded from both", i, err, dctx.Err())
		}
		cancel()
		if el > time.Second {
			late++
			t.Logf("%d: BLPOP with a 5ms deadline returned after %v: %v", i, el, err)
		}
		if err := rdb.LPush(ctx, "k", "x").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if late > 0 {
		t.Errorf("%d of 30 calls returned late", late)
	}
}

// TestLead_deadlineAfterData: a lead that reads data (a left call's
// reply) before its own deadline still leaves at that deadline, not a
// read timeout after the data.
func TestLead_deadlineAfterData(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.ReadTimeout = 3 * time.Second })
	mustDo(t, p, "PING")
	actx, acancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, acancel)
	t0 := time.Now()
	_, _, err := do(actx, p, "BLPOP", "a", "0") // A leads, leaves at 50ms: gone
	t.Logf("A: %v after %v", err, time.Since(t0))
	bctx, bcancel := context.WithTimeout(ctx, 1200*time.Millisecond)
	defer bcancel()
	time.AfterFunc(time.Second-time.Since(t0), func() { rdb.LPush(ctx, "a", "x") }) // A's reply: data read
	start := time.Now()
	_, _, err = do(bctx, p, "BLPOP", "b", "0") // B leads behind A
	el := time.Since(start)
	t.Logf("B (deadline 1.2s): %v after %v", err, el)
	if el > 2500*time.Millisecond {
		t.Errorf("B returned %v after its context's deadline", el-1200*time.Millisecond)
	}
}

// TestDo_stress: many goroutines, random cancels and deadlines, a server
// paused now and then; every reply must be the call's own, and no call
// may outlive its context by anything near the read timeout.
func TestDo_stress(t *testing.T) {
	s, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.ReadTimeout = 2 * time.Second })
	stopPauses := pauseNowAndThen(s, 200*time.Millisecond, 30*time.Millisecond)
	var mu sync.Mutex
	var wrong, late, errs, oks int
	other := map[string]int{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				n := 8
				if (g+i)%10 == 0 {
					n = 20000 + (g*7919+i*104729)%40000
				}
				val := fmt.Sprintf("%d:%d:", g, i) + strings.Repeat("v", n)
				ctx := context.Background()
				var cancel context.CancelFunc = func() {}
				var end time.Time
				d := time.Duration((g*31+i*17)%3000) * time.Microsecond
				switch i % 3 {
				case 1:
					ctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(d, cancel)
					end = time.Now().Add(d)
				case 2:
					ctx, cancel = context.WithTimeout(ctx, d)
					end = time.Now().Add(d)
				}
				v, _, err := do(ctx, p, "ECHO", val)
				now := time.Now()
				cancel()
				mu.Lock()
				switch {
				case err == nil && v != val:
					wrong++
					if wrong < 4 {
						sv, _ := v.(string)
						if len(sv) > 30 {
							sv = sv[:30]
						}
						t.Errorf("ECHO %.30s got %.30q (%T)", val, sv, v)
					}
				case err == nil:
					oks++
				default:
					errs++
					if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						other[err.Error()[:min(60, len(err.Error()))]]++
					}
				}
				if !end.IsZero() && now.Sub(end) > time.Second {
					late++
					if late < 4 {
						t.Logf("a call returned %v after its context ended: %v", now.Sub(end), err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stopPauses()
	t.Logf("ok %d, errors %d, wrong replies %d, late %d; other errors %v", oks, errs, wrong, late, other)
	if late > 0 {
		t.Errorf("%d calls late", late)
	}
	if oks == 0 {
		t.Error("no call succeeded")
	}
}

// TestLead_cancelBeforeDeadline: a lead whose context has a deadline and
// is cancelled before it leaves at the cancel (its AfterFunc, armed once
// the reply is slow), not at the deadline.
func TestLead_cancelBeforeDeadline(t *testing.T) {
	_, rdb := server(t)
	ctx := context.Background()
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.ReadTimeout = 2 * time.Second })
	mustDo(t, p, "PING")
	for _, dl := range []time.Duration{5 * time.Second, 10 * time.Second} {
		cctx, cancel := context.WithTimeout(ctx, dl)
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, _, err := do(cctx, p, "BLPOP", "k", "0")
		el := time.Since(start)
		t.Logf("deadline %v, cancelled at 50ms: %v after %v", dl, err, el)
		if !errors.Is(err, context.Canceled) || el > dl/2 {
			t.Errorf("%v after %v, want context.Canceled soon after the cancel", err, el)
		}
		rdb.LPush(ctx, "k", "x")
	}
}

// TestWrite_deadline: a caller whose command is being written when the
// server stops reading leaves the write at its context's deadline, not
// at the write timeout (the connection breaks: the server reads nothing).
func TestWrite_deadline(t *testing.T) {
	s, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.WriteTimeout = 10 * time.Second })
	mustDo(t, p, "PING")
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer s.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := do(ctx, p, "ECHO", strings.Repeat("x", 64<<20))
	el := time.Since(start)
	t.Logf("64MB ECHO, 100ms deadline, paused server: %v after %v", err, el)
	if el > 5*time.Second {
		t.Errorf("returned %v after its deadline", el-100*time.Millisecond)
	}
}

// TestDo_readonlyScript: a script that writes, on a server a failover made
// a replica, gets READONLY, which drops the connection.
func TestDo_readonlyScript(t *testing.T) {
	_, rdb := server(t)
	_, primary := server(t)
	ctx := context.Background()
	host, port, _ := net.SplitHostPort(primary.Options().Addr)
	if err := rdb.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.ReplicaOf(ctx, "NO", "ONE")
	p := newPipe(t, rdb.Options().Addr, nil)
	id := clientID(t, p)
	v, _, err := do(ctx, p, "EVAL", "return redis.call('SET', 'k', 'v')", "0")
	if rerr, ok := v.(pipe.ReplyError); err != nil || !ok || !strings.HasPrefix(string(rerr), "READONLY") {
		t.Fatalf("a writing script on a replica: %#v, %v; want READONLY", v, err)
	}
	if got := clientID(t, p); got == id {
		t.Fatalf("still on connection %d after READONLY", id)
	}
}

// TestClose_race: Close while many calls are under way, dialing included;
// every call returns, and no goroutine is left (goleak).
func TestClose_race(t *testing.T) {
	_, rdb := server(t)
	for round := range 20 {
		p := pipe.New(pipe.Config{
			Dial: func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", rdb.Options().Addr)
			},
			ReadTimeout: 2 * time.Second,
		})
		var wg sync.WaitGroup
		for g := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g%4)*time.Millisecond+500*time.Microsecond)
					if g%2 == 0 {
						cancel()
						ctx, cancel = context.WithCancel(context.Background())
						time.AfterFunc(time.Duration(i%3)*time.Millisecond, cancel)
					}
					s := fmt.Sprint(g, ":", i)
					v, _, err := do(ctx, p, "ECHO", s)
					cancel()
					if err == nil && v != s {
						t.Errorf("ECHO %s: %v", s, v)
					}
					if errors.Is(err, pipe.ErrClosed) || p.Closed() {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 3 * time.Millisecond)
		done := make(chan struct{})
		go func() { p.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close hung")
		}
		wg.Wait()
		if n := p.Pending(); n != 0 {
			t.Logf("round %d: %d pending after Close", round, n)
		}
	}
}

// TestDo_pausesPastTheTimeout: calls with and without contexts across
// pauses longer than the read timeout; each returns within a bound.
func TestDo_pausesPastTheTimeout(t *testing.T) {
	s, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.ReadTimeout = 200 * time.Millisecond })
	stopPauses := pauseNowAndThen(s, 150*time.Millisecond, 250*time.Millisecond)
	var mu sync.Mutex
	var worst time.Duration
	kinds := map[string]int{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end := time.Now().Add(2 * time.Second)
			for i := 0; time.Now().Before(end); i++ {
				ctx := context.Background()
				cancel := context.CancelFunc(func() {})
				switch (g + i) % 3 {
				case 1:
					ctx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*time.Millisecond)
				case 2:
					ctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(time.Duration(i%5)*time.Millisecond, cancel)
				}
				val := fmt.Sprint(g, ":", i)
				start := time.Now()
				v, _, err := do(ctx, p, "ECHO", val)
				el := time.Since(start)
				cancel()
				mu.Lock()
				if el > worst {
					worst = el
				}
				if err == nil && v != val {
					t.Errorf("ECHO %s: %v", val, v)
				}
				k := "ok"
				if err != nil {
					k = err.Error()
					if i := strings.LastIndex(k, ": "); i >= 0 {
						k = k[i+2:]
					}
				}
				kinds[k]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stopPauses()
	t.Logf("worst call %v; outcomes %v", worst, kinds)
	if worst > 3*time.Second {
		t.Errorf("a call took %v", worst)
	}
}

// TestDo_deadDetectedThroughLeads: on a server that stops answering,
// callers whose contexts end before the read timeout each lead in turn;
// the timeout still counts from the last reply, so the connection is
// taken for dead.
func TestDo_deadDetectedThroughLeads(t *testing.T) {
	s, rdb := server(t)
	p := newPipe(t, rdb.Options().Addr, func(c *pipe.Config) { c.ReadTimeout = 500 * time.Millisecond })
	mustDo(t, p, "PING")
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer s.Resume()
	kinds := map[string]int{}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, _, err := do(ctx, p, "PING")
		cancel()
		kinds[fmt.Sprint(err)]++
	}
	t.Logf("3s of a paused server, ReadTimeout 500ms, 100ms calls: %v; pending %d", kinds, p.Pending())
	if len(kinds) == 1 && kinds["context canceled"] > 0 {
		t.Errorf("the dead connection was never failed")
	}
}

// pauseNowAndThen pauses s for pause every every, until the returned
// function is called; it returns once s runs again.
func pauseNowAndThen(s *harness.Server, every, pause time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			_ = s.Pause()
			time.Sleep(pause)
			_ = s.Resume()
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
