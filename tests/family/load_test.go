package family

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"
)

// rwOverlap: many readers and writers take the read-write lock through the
// scripts at once, 2000 acquisitions in all, each resending some of its
// calls as after a lost reply. An in-process detector counts the holders
// inside: a writer must be alone, a reader must see no writer. Readers must
// have shared the lock at least once. At the end nothing is left: no lock,
// no timeout key. Bounded: 2000 acquisitions on a real server (400 on
// miniredis, whose Lua is slower by two orders), 90 s.
func rwOverlap(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	const readers, writers = 8, 4
	// -short: a quarter of the acquisitions (miniredis runs the Lua in
	// this process, under -race: 40 and 20 took 19s of the quick loop).
	perReader, perWriter := backends.Scale(200, 50), backends.Scale(100, 25)
	if b.Mini() {
		perReader, perWriter = backends.Scale(40, 10), backends.Scale(20, 5)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var d detector
	var resends atomic.Int64
	var latches atomic.Int64
	errs := make(chan error, readers+writers)
	var wg sync.WaitGroup
	run := func(i int, writer bool, count int) {
		defer wg.Done()
		field := fmt.Sprintf("load%d:%d", i, i)
		rnd := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
		for range count {
			// Acquire, polling (the runtime waits on the channel).
			sleep := 100 * time.Microsecond
			for {
				var v int64
				var err error
				if writer {
					v, err = writeAcquire(rdb, n, field, 1, lease)
				} else {
					v, err = readAcquire(rdb, n, field, 1, lease)
				}
				if err != nil {
					errs <- fmt.Errorf("%s acquire: %w", field, err)
					return
				}
				if v == 0 {
					break
				}
				select {
				case <-ctx.Done():
					errs <- fmt.Errorf("%s: %w", field, ctx.Err())
					return
				case <-time.After(sleep):
				}
				sleep = min(2*sleep, 4*time.Millisecond)
			}
			if rnd.IntN(8) == 0 { // the reply was lost: sent again
				resends.Add(1)
				var v int64
				var err error
				if writer {
					v, err = writeAcquire(rdb, n, field, 1, lease)
				} else {
					v, err = readAcquire(rdb, n, field, 1, lease)
				}
				if err != nil || v != 0 {
					errs <- fmt.Errorf("%s resent acquire = %d, %v; want 0", field, v, err)
					return
				}
			}
			d.enter(writer)
			time.Sleep(time.Duration(rnd.IntN(200)) * time.Microsecond)
			d.leave(writer)
			latch := fmt.Sprintf("%s%032x", n.latchPfx, latches.Add(1))
			sends := 1
			if rnd.IntN(8) == 0 {
				sends = 2
				resends.Add(1)
			}
			for range sends {
				var got *int64
				var err error
				if writer {
					got, err = writeRelease(rdb, n, latch, field, 1, lease, pub(b))
				} else {
					got, err = readRelease(rdb, n, latch, field, 1, pub(b))
				}
				if err != nil || got == nil || *got != 1 {
					errs <- fmt.Errorf("%s release = %v, %v; want 1", field, got, err)
					return
				}
			}
			if !writer {
				time.Sleep(time.Duration(rnd.IntN(1000)) * time.Microsecond) // let writers in
			}
		}
	}
	start := time.Now()
	for i := range readers + writers {
		wg.Add(1)
		if i < readers {
			go run(i, false, perReader)
		} else {
			go run(i, true, perWriter)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if o := d.overlaps.Load(); o != 0 {
		t.Fatalf("%d overlaps: a writer with another holder, or a reader with a writer", o)
	}
	if d.maxR.Load() < 2 {
		t.Errorf("at most %d reader inside at once: readers never shared the lock", d.maxR.Load())
	}
	backends.WantGone(t, rdb, n.name)
	for i := range readers {
		backends.WantGone(t, rdb, n.timeoutKey(fmt.Sprintf("load%d:%d", i, i), 1))
	}
	t.Logf("%d acquisitions (%d readers, %d writers) in %v, %d resent calls, up to %d readers at once, no overlap",
		readers*perReader+writers*perWriter, readers, writers, time.Since(start).Round(time.Millisecond), resends.Load(), d.maxR.Load())
}

// detector counts, in process, the holders inside a read-write lock: a
// writer must be alone, a reader must see no writer. maxR is the most
// readers inside at once.
type detector struct{ inR, inW, maxR, overlaps atomic.Int64 }

// enter counts a holder in, and an overlap if it is not allowed beside
// the others.
func (d *detector) enter(writer bool) {
	if writer {
		if d.inW.Add(1) != 1 || d.inR.Load() != 0 {
			d.overlaps.Add(1)
		}
		return
	}
	r := d.inR.Add(1)
	for m := d.maxR.Load(); r > m && !d.maxR.CompareAndSwap(m, r); m = d.maxR.Load() {
	}
	if d.inW.Load() != 0 {
		d.overlaps.Add(1)
	}
}

// leave counts a holder out.
func (d *detector) leave(writer bool) {
	if writer {
		d.inW.Add(-1)
	} else {
		d.inR.Add(-1)
	}
}
