package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lualock/lualock"
)

// rwlockWorkload: readers of one read-write lock, alone and with a writer
// waiting among them.
const rwlockWorkload = "rwlock-readers"

// rwReaderPause is each reader's pause between its read holds.
const rwReaderPause = time.Millisecond

// rwlock runs rwReaders goroutines, each a ReadWriteLock owner of one key,
// doing read lock+unlock loops for rwDur, each pausing rwReaderPause
// between its holds: first alone (library label "readers"), then with one
// writer that takes the write lock again and again, holding it 1 ms
// ("readers + writer"). It records the readers' ops/s in both, and the
// writer's acquisitions and its waits: what a writer costs the readers,
// and how long readers keep it waiting (the lock is not fair: readers keep
// entering while it is in read mode; without the readers' pause the lock
// would never leave read mode, and the writer would starve). A write wait
// that lasts the whole run is counted as starved, not as an error.
func (e *env) rwlock() {
	const readers = 8
	for _, withWriter := range []bool{false, true} {
		lib := "readers"
		if withWriter {
			lib = "readers + writer"
		}
		inst := vLualock.mustOpen(e, openOpts{})
		c := inst.(*lualockInst).c
		key := e.key(fmt.Sprintf("rw%d", e.seq.Add(1)))
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.rwDur+30*time.Second)
		var reads, writes, starved atomic.Int64
		var overlaps atomic.Int64
		var inR, inW atomic.Int64
		var waitMu sync.Mutex
		var waits []time.Duration
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var errs atomic.Int64
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := c.NewReadWriteLock(key).ReadLock()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := l.Lock(ctx); err != nil {
						errs.Add(1)
						return
					}
					inR.Add(1)
					if inW.Load() != 0 {
						overlaps.Add(1)
					}
					inR.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						errs.Add(1)
						return
					}
					reads.Add(1)
					time.Sleep(rwReaderPause)
				}
			}()
		}
		if withWriter {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := c.NewReadWriteLock(key).WriteLock()
				for {
					select {
					case <-stop:
						return
					default:
					}
					t0 := time.Now()
					err := l.TryLock(ctx, e.cfg.rwDur)
					if errors.Is(err, lualock.ErrNotObtained) {
						starved.Add(1)
						continue
					}
					if err != nil {
						select {
						case <-stop: // the window ended while it waited
						default:
							errs.Add(1)
						}
						return
					}
					waitMu.Lock()
					waits = append(waits, time.Since(t0))
					waitMu.Unlock()
					if inW.Add(1) != 1 || inR.Load() != 0 {
						overlaps.Add(1)
					}
					time.Sleep(time.Millisecond)
					inW.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						errs.Add(1)
						return
					}
					writes.Add(1)
				}
			}()
		}
		start := time.Now()
		time.Sleep(e.cfg.rwDur)
		close(stop)
		wg.Wait()
		took := time.Since(start)
		cancel()
		inst.close()
		e.rec(rwlockWorkload, lib, "reader_ops_per_s", float64(reads.Load())/took.Seconds())
		if withWriter {
			e.rec(rwlockWorkload, lib, "writer_ops_per_s", float64(writes.Load())/took.Seconds())
			e.recPercentiles(rwlockWorkload, lib, "writer_wait", "ms", waits)
			e.rec(rwlockWorkload, lib, "writer_starved", float64(starved.Load()))
		}
		e.rec(rwlockWorkload, lib, "errors", float64(errs.Load()))
		if o := overlaps.Load(); o != 0 {
			fatalf("%s / %s: %d overlaps of a writer with another holder", rwlockWorkload, lib, o)
		}
	}
}

// reportRWLock is section 7: readers' throughput alone and with a writer.
func (e *env) reportRWLock(m *md) {
	wl := rwlockWorkload
	alone := e.med(wl, "readers", "reader_ops_per_s")
	if math.IsNaN(alone) {
		return
	}
	m.p("## 7. Read-write lock: readers, and readers with a writer waiting")
	m.p("")
	m.p("8 goroutines, each a `ReadWriteLock` owner of one key, take and release the read lock in a loop for %v, pausing %v between holds; then the same with one more owner that takes the write lock (TryLock, waiting up to the run's length), holds it 1 ms and releases it, again and again. The read-write lock is not fair: readers keep entering while it is in read mode, so the writer waits for a moment without readers (without the readers' pause it would starve; a wait that lasts the whole run counts as *starved*). Read and write lock+unlock against PING are rows of section 1.", e.cfg.rwDur, rwReaderPause)
	m.p("")
	var rows [][]string
	for _, lib := range []string{"readers", "readers + writer"} {
		rows = append(rows, []string{lib, e.cell(wl, lib, "reader_ops_per_s"), e.cell(wl, lib, "writer_ops_per_s"),
			e.cell(wl, lib, "writer_wait_n"), e.cell(wl, lib, "writer_wait_p50_ms"), e.cell(wl, lib, "writer_wait_p99_ms"), e.cell(wl, lib, "writer_starved"), e.cell(wl, lib, "errors")})
	}
	m.table([]string{"run", "reader lock+unlock/s", "writer lock+unlock/s", "writer waits (n)", "writer wait p50 ms", "writer wait p99 ms", "errors"}, rows)
	with := e.med(wl, "readers + writer", "reader_ops_per_s")
	m.p("With a writer among them the readers do %s lock+unlock pairs per second, %s of what they do alone (%s/s).", num(with), ratio(with, alone), num(alone))
	m.p("")
}
