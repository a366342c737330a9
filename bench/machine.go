package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// load is what the whole machine did while the bench ran, so that a reader
// can tell a quiet run from one that shared the CPU with other work.
type load struct {
	ok          bool
	busy, steal float64 // seconds of CPU, all cores (from /proc/stat)
	self        time.Duration
	redis       float64 // seconds (INFO cpu)
	at          time.Time
}

// procStat reads the aggregate cpu line of /proc/stat, in seconds
// (USER_HZ is 100 on Linux).
func procStat() (busy, steal float64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	v := make([]float64, 8)
	for i := range v {
		v[i], _ = strconv.ParseFloat(f[i+1], 64)
		v[i] /= 100
	}
	// user nice system idle iowait irq softirq steal
	return v[0] + v[1] + v[2] + v[5] + v[6], v[7], true
}

func (e *env) sampleLoad() load {
	busy, steal, ok := procStat()
	l := load{ok: ok, busy: busy, steal: steal, self: cpuTime(), at: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if info, err := e.info(ctx, "cpu"); err == nil {
		l.redis = redisCPU(info)
	} else {
		l.ok = false
	}
	return l
}

// otherLoad returns the average share of one core used by processes other
// than the bench and its Redis, and the steal share, between two samples.
func otherLoad(a, b load) (other, steal float64, ok bool) {
	if !a.ok || !b.ok {
		return 0, 0, false
	}
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0, 0, false
	}
	o := (b.busy - a.busy) - (b.self - a.self).Seconds() - (b.redis - a.redis)
	return max(o, 0) / wall, (b.steal - a.steal) / wall, true
}
