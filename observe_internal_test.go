package lualock

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestClient_events_noAllocs: the event path of every primitive (an
// acquisition that returned, a hold or a permit that ended) allocates
// nothing with an Observer and a Logger set, for a success, a give-up and
// a loss. Counted on the path alone, without Redis, so that no other
// goroutine's allocations blur the count.
func TestClient_events_noAllocs(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	var n int
	c, err := New(rdb, Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observer: Observer{
			Acquire: func(AcquireEvent) { n++ },
			HoldEnd: func(HoldEndEvent) { n++ },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	since := time.Now()
	l := c.NewFairLock("events")
	permit := subject{kind: KindPermit, name: "sem", owner: "00112233445566778899aabbccddeeff"}
	if a := testing.AllocsPerRun(100, func() {
		l.acquireEnded(ctx, since, 0, true, nil)
		l.ended(ErrNotHeld, since)
		c.acquired(ctx, permit, since, -1, false, nil)
		c.holdEnded(permit, ErrNotHeld, since)
		c.acquired(ctx, subject{kind: KindMultiLock, name: "a+b"}, since, 0, false, ErrNotObtained)
	}); a != 0 {
		t.Errorf("the event path allocates %.1f times", a)
	}
	if n != 5*101 {
		t.Errorf("the Observer saw %d events, want %d", n, 5*101)
	}
}
