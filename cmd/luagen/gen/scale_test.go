package gen

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// largeScript returns a script of about n lines with n distinct string
// constants and numbers, in the shape of the generated scripts some
// projects ship (one branch per case), and the folder that holds it.
func largeScript(n int) fstest.MapFS {
	var b strings.Builder
	b.WriteString("-- @key k the key\n-- @arg a string the case\n-- @return int\nlocal n = 0\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "if ARGV[1] == 'v%d' then n = n + redis.call('incrby', KEYS[1], %d) end\n", i, i)
	}
	b.WriteString("return n\n")
	return fstest.MapFS{"lua/big.lua": {Data: []byte(b.String())}}
}

// BenchmarkLintGenerateLarge lints and generates one 50 000-line script
// (about 3 MB, 50 000 distinct constants), as luagen generate does, through
// GenerateLint (the target is under 2 s).
func BenchmarkLintGenerateLarge(b *testing.B) {
	fsys := largeScript(50000)
	cfg := Config{Src: "lua", Package: "generated"}
	cpu0 := cpuTime()
	for b.Loop() {
		if _, _, err := GenerateLint(fsys, cfg); err != nil {
			b.Fatal(err)
		}
	}
	// On a shared machine the wall time (ns/op) counts the waits for a
	// core; the process's CPU time per run is what the code costs.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}

// TestLintScalesLinearly checks that linting a script four times longer
// takes about four times as long, not sixteen: the best of three runs of
// each size, with a ratio bound of 8 that a quadratic pass (ratio 16)
// cannot meet. It measures the process's CPU time where the platform
// reports it (no other test runs meanwhile), so that a loaded machine,
// which stretches wall time unevenly (ratios of 12 to 18 for a linear
// pass at a load of 25 on 2 cores), does not decide it.
func TestLintScalesLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: timing")
	}
	cfg := Config{Src: "lua"}
	best := func(n int) time.Duration {
		fsys := largeScript(n)
		var runs []time.Duration
		for range 3 {
			start, cpu0 := time.Now(), cpuTime()
			Lint(fsys, cfg)
			if cpu := cpuTime() - cpu0; cpu0 != 0 {
				runs = append(runs, cpu)
			} else {
				runs = append(runs, time.Since(start))
			}
		}
		return slices.Min(runs)
	}
	best(1000) // warm up
	small, large := best(5000), best(20000)
	ratio := float64(large) / float64(small)
	t.Logf("5 000 lines: %v, 20 000 lines: %v, ratio %.1f", small, large, ratio)
	if ratio > 8 {
		t.Errorf("linting 4x the lines took %.1fx the time (%v vs %v): not linear", ratio, large, small)
	}
}
