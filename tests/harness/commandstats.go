package harness

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// CommandCalls returns how many times the server of rdb ran cmd (INFO
// commandstats; the calls inside scripts included), failing tb when INFO
// cannot be read.
func CommandCalls(tb testing.TB, rdb *redis.Client, cmd string) int64 {
	tb.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			v, _, _ = strings.Cut(v, ",")
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// ServerCPU returns the CPU time the server of rdb has used, user and
// system, in seconds (INFO cpu), failing tb when INFO cannot be read.
func ServerCPU(tb testing.TB, rdb *redis.Client) float64 {
	tb.Helper()
	s, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(s, "\r\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				total += x
			}
		}
	}
	return total
}
