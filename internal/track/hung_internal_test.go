package track

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A node that stops answering (a hung server, a partition without a
// reset) is taken for dead Timeout after the oldest command it left
// unanswered, even while holds keep coming and going: the checks sent
// for them do not move that bound, and ticks that find every new hold
// already released send nothing and leave the pings to probe the link.
func TestHungNode_redialedDespiteChurn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Answers the handshake, then nothing.
				r := bufio.NewReader(c)
				for {
					v, err := readValue(r)
					if err != nil {
						return
					}
					if len(v.elems) > 0 && strings.EqualFold(v.elems[0].str, "HELLO") || len(v.elems) > 0 && strings.EqualFold(v.elems[0].str, "CLIENT") {
						_, _ = c.Write([]byte("+OK\r\n"))
					}
				}
			}()
		}
	}()

	addr := ln.Addr().String()
	var d net.Dialer
	tr := New(Dialer{
		Addr: func(context.Context, string) (string, error) { return addr, nil },
		Dial: func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) },
	}, Config{Ping: 50 * time.Millisecond, Timeout: 100 * time.Millisecond})
	defer tr.Close()
	spec := &Spec{Name: "check", SHA1: "sha", Source: "return {}"}
	nop := func(uint64, Loss) {}

	// A long-lived watch keeps the node; short ones churn beside it,
	// some released before their first check, some after.
	var keep Watch
	tr.Add(&keep, Target{Spec: spec, Key: "kept", Field: "f"}, 0, nop)
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		var w Watch
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tr.Add(&w, Target{Spec: spec, Key: "churn", Field: "f"}, uint64(i), nop)
			if i%2 == 0 {
				time.Sleep(2 * time.Millisecond) // held past the gather window
			}
			w.Stop()
		}
	}()
	defer func() { close(stop); churn.Wait() }()

	deadline := time.After(20 * time.Second)
	for accepted.Load() < 2 {
		select {
		case <-deadline:
			t.Fatalf("the node that stopped answering was not redialed in 20s of churn (%d connections)", accepted.Load())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
