package loss_test

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

// A renewal written on the tracking connection whose reply is late (past
// half the round, when the watchdog sends it through the client too) may
// still run after that: a re-entry with a fixed lease, which pauses the
// watchdog, waits for it, so the stale renewal cannot stretch the fixed
// lease afterwards. The tracking connection's write of the renewal is
// held back 1.5 s (less than the tracker's 3 s Timeout); the lease is 3 s
// (a round a second, half a round for the relayed reply).
func TestLoss_lateRelayedRenewalKeepsFixedLease(t *testing.T) {
	s, err := harness.Start(harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	held := &holdRenewal{delay: 1500 * time.Millisecond, delivered: make(chan struct{})}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &holdingConn{Conn: conn, h: held}, nil
	}})
	t.Cleanup(func() { _ = rdb.Close() })
	direct := renewalCalls()
	rdb.AddHook(direct)
	var rounds atomic.Int64
	c := newClient(t, rdb, lualock.Options{WatchdogLease: 3 * time.Second,
		Observer: lualock.Observer{Renew: func(e lualock.RenewEvent) {
			if e.Err == nil {
				rounds.Add(1)
			}
		}}})
	ctx := context.Background()
	name := backends.UniqueName(t)
	l := c.NewLock(name)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	r0 := rounds.Load()
	backends.WaitFor(t, "a renewal", 30*time.Second, func() bool { return rounds.Load() > r0 })
	if n := direct.N.Load(); n != 0 {
		t.Fatalf("the client sent %d renewals itself: the tracking connection is not carrying them", n)
	}
	held.armed.Store(true)
	backends.WaitFor(t, "the client's renewal of the held relayed call", 30*time.Second, func() bool { return direct.N.Load() > 0 })
	const fixed = time.Second
	if err := l.LockLease(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.delivered:
	case <-time.After(10 * time.Second):
		t.Fatal("the held renewal was not written in 10s")
	}
	time.Sleep(200 * time.Millisecond) // the server runs the held call meanwhile
	pttl, err := rdb.PTTL(ctx, name).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl > fixed {
		t.Errorf("PTTL %v after a re-entry with a %v lease: a renewal sent before it stretched the fixed lease", pttl, fixed)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// holdRenewal holds back, once armed, the next write of a lock renewal
// on a tracking connection.
type holdRenewal struct {
	delay     time.Duration
	armed     atomic.Bool
	delivered chan struct{} // closed after the held write
}

// holdingConn is a connection whose writes holdRenewal may hold back.
type holdingConn struct {
	net.Conn
	h        *holdRenewal
	tracking bool // it sent CLIENT TRACKING: the hold tracker's
}

func (c *holdingConn) Write(p []byte) (int, error) {
	c.tracking = c.tracking || bytes.Contains(p, []byte("TRACKING"))
	if !c.tracking || !bytes.Contains(p, []byte(generated.LockRenewSHA1)) || !c.h.armed.CompareAndSwap(true, false) {
		return c.Conn.Write(p)
	}
	defer close(c.h.delivered)
	time.Sleep(c.h.delay)
	return c.Conn.Write(p)
}
