package track

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// A node that stops answering (a hung server, a partition without a
// reset) is taken for dead Timeout after the oldest command it left
// unanswered, even while holds keep coming and going: the checks sent
// for them do not move that bound, and ticks that find every new hold
// already released send nothing and leave the pings to probe the link.
func TestHungNode_redialedDespiteChurn(t *testing.T) {
	// Answers the handshake, then nothing.
	addr, accepted := fakeNode(t, func(cmd []value) string {
		if strings.EqualFold(cmd[0].str, "HELLO") || strings.EqualFold(cmd[0].str, "CLIENT") {
			return "+OK\r\n"
		}
		return ""
	})
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
