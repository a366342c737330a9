package main

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// guard is the overlap detector of one lock: a flag set with a CAS on entry
// to the critical section and cleared on exit, and a counter incremented
// non-atomically inside it (read, work, write). Two holders at once show up
// as a failed CAS and, usually, as lost increments.
type guard struct {
	inside   atomic.Int32
	entries  atomic.Int64
	overlaps atomic.Int64
	counter  int64 // only touched inside the critical section
}

func (g *guard) enter() {
	if !g.inside.CompareAndSwap(0, 1) {
		g.overlaps.Add(1)
	}
	g.entries.Add(1)
}

func (g *guard) exit() { g.inside.Store(0) }

// read and write split the non-atomic increment around the held time.
func (g *guard) read() int64   { return g.counter }
func (g *guard) write(v int64) { g.counter = v + 1 }
func (g *guard) bump()         { g.write(g.read()) }

// overlap is one run in which the detector fired.
type overlap struct {
	workload, library string
	round             int
	locks             []string // "lock #i: ..." for each lock that overlapped
}

// check reports loudly, at once, any guard that saw an overlap or lost an
// increment, and records it: the run goes on measuring, the report names
// every overlap at its top, and the bench exits with status 3 once the
// report is written (see main). A library that breaks mutual exclusion is
// the finding of the run, not a reason to publish nothing about it.
func (e *env) check(workload, library string, guards ...*guard) {
	var bad []string
	for i, g := range guards {
		if g == nil {
			continue
		}
		o, n, c := g.overlaps.Load(), g.entries.Load(), g.counter
		if o != 0 || c != n {
			bad = append(bad, fmt.Sprintf("lock #%d: %d overlapping entries, counter %d after %d entries", i, o, c, n))
		}
	}
	e.rec(workload, library, "overlaps", float64(len(bad)))
	if len(bad) == 0 {
		return
	}
	msg := fmt.Sprintf("\n%s\nOVERLAP DETECTED: two holders were inside one critical section\n  workload: %s\n  library:  %s\n  round:    %d\n  %s\n%s\n",
		strings.Repeat("!", 72), workload, library, e.round, strings.Join(bad, "\n  "), strings.Repeat("!", 72))
	fmt.Fprint(os.Stderr, msg)
	e.mu.Lock()
	e.overlaps = append(e.overlaps, overlap{workload: workload, library: library, round: e.round, locks: bad})
	e.mu.Unlock()
}
