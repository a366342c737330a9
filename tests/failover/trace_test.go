package failover

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// trace records what a client sent that replica acknowledgement depends
// on: its INFO replication reads (role, replicas, replication id) and its
// WAITs (replies), with the time of each, and marks the test sets.
type trace struct {
	mu     sync.Mutex
	start  time.Time
	events []string
	waits  int // WAITs since the last cut
	// The WAITs sent in all, and the replicas the last one asked for and
	// got.
	sent, asked, got int64
}

func newTrace() *trace { return &trace{start: time.Now()} }

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, fmt.Sprintf("%8.3fs ", time.Since(tr.start).Seconds())+fmt.Sprintf(format, args...))
}

func (tr *trace) mark(what string) { tr.add("-- %s", what) }

// cut returns the events since the last cut and the WAITs among them.
func (tr *trace) cut() (string, int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s, n := strings.Join(tr.events, "\n"), tr.waits
	tr.events, tr.waits = nil, 0
	return s, n
}

// lastWait returns the WAITs sent so far, and the replicas the last one
// asked for and got.
func (tr *trace) lastWait() (sent, asked, got int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.sent, tr.asked, tr.got
}

func (tr *trace) DialHook(next redis.DialHook) redis.DialHook { return next }
func (tr *trace) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		switch strings.ToLower(cmd.Name()) {
		case "info":
			s, _ := cmd.(*redis.StringCmd)
			if s == nil || err != nil {
				tr.add("INFO: %v", err)
				break
			}
			v := s.Val()
			tr.add("INFO role %s replicas %s replid %.8s", field(v, "role"), field(v, "connected_slaves"), field(v, "master_replid"))
		case "wait":
			tr.mu.Lock()
			tr.waits++
			tr.sent++
			tr.asked, _ = strconv.ParseInt(fmt.Sprint(cmd.Args()[1]), 10, 64)
			tr.got = cmd.(*redis.IntCmd).Val()
			tr.mu.Unlock()
			tr.add("WAIT %v -> %v", cmd.Args()[1:], cmd.(*redis.IntCmd).Val())
		case "evalsha", "evalsha_ro":
			if err != nil {
				tr.add("EVALSHA %v", err)
			}
		}
		return err
	}
}
func (tr *trace) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func field(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return "?"
}

// hooked adds h to rdb or, on a cluster client, to each node's client
// (the connections pinned for WAIT are the nodes'; a hook on both would
// see the cluster client's commands twice).
func hooked(rdb redis.UniversalClient, h redis.Hook) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
		return
	}
	rdb.AddHook(h)
}
