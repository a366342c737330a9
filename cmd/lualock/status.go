package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/internal/keys"
)

const statusTimeout = 10 * time.Second

// lockStatus is the output of status; with -json it is printed as is.
type lockStatus struct {
	Name   string `json:"name"`
	Locked bool   `json:"locked"`
	// LeaseMS is the remaining lease in milliseconds: -1 for a lock without
	// expiry, absent when not locked.
	LeaseMS *int64 `json:"lease_ms,omitempty"`
	// Mode is a read-write lock's mode, "read" or "write"; absent for the
	// other locks. Its holders are then readers (C:H) and the writer
	// (C:H:write).
	Mode    string   `json:"mode,omitempty"`
	Holders []holder `json:"holders"`
	// Available is a semaphore's count of available permits; absent for a
	// lock. Its holders are then the permits taken (field: the permit's
	// id, holds 1), with their deadlines in Permits.
	Available *int64   `json:"available,omitempty"`
	Permits   []waiter `json:"permits,omitempty"`
	// Queue lists the waiters of a fair lock, first first; empty for a
	// reentrant lock or a fair lock nobody waits for.
	Queue []waiter `json:"queue"`
	// ServerTime is Redis's TIME when the status was read, in Unix ms; the
	// queue's remaining times count from it.
	ServerTime int64 `json:"server_time_ms"`
	// ReplicaAck is the replica acknowledgement that lock and unlock use
	// with the same flags and environment: one, all or off, with its
	// timeout; Replicas the replicas NAME's primary has connected (-1:
	// unknown), which an acquisition waits for unless it is off.
	ReplicaAck string `json:"replica_ack"`
	Replicas   int    `json:"replicas"`
}

type holder struct {
	Field string `json:"field"` // owner field C:H: client id and holder id
	Holds int64  `json:"holds"` // hold count (re-entries)
	// Lualock says who the holder is when it is a lualock process: host,
	// pid, command and since when. Absent for other holders (Redisson, the
	// library).
	Lualock *holderInfo `json:"lualock,omitempty"`
}

type waiter struct {
	ID string `json:"id"` // the waiter's owner field
	// DeadlineMS is the Unix time in ms after which the other waiters purge
	// this one from the queue unless it retried; absent without an entry.
	DeadlineMS  *int64 `json:"deadline_ms,omitempty"`
	RemainingMS *int64 `json:"remaining_ms,omitempty"` // DeadlineMS minus the server time
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "[-addr URL] [-json] NAME", stderr)
	addr := addrFlag(fs)
	deploy := newDeployFlags(fs)
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	fs.Bool("fair", false, "accepted and unnecessary: status always shows a fair lock's queue")
	name, code := parseFlags(fs, args, stdout, nil)
	if code >= 0 {
		return code
	}
	if err := lualock.CheckName(name); err != nil {
		return usagef(stderr, "status: %v", clean(err))
	}
	opts, _, err := redisOptions(fs, *addr)
	if err != nil {
		return usagef(stderr, "status: bad -addr: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	var copts lualock.Options
	if err := deploy.options(&copts); err != nil {
		return usagef(stderr, "status: %v", err)
	}
	if _, err := deploy.failover(opts); err != nil {
		return usagef(stderr, "status: %v", err)
	}
	rdb, err := deploy.dial(ctx, opts, time.Time{}, time.Time{})
	if err != nil {
		return errorf(stderr, exitError, "%v", err)
	}
	defer rdb.Close()
	st, err := readStatus(ctx, rdb, name)
	if err != nil {
		return errorf(stderr, exitError, "status %s: %v", name, err)
	}
	st.ReplicaAck, st.Replicas = ackSetting(copts), replicaCount(ctx, rdb, name)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return errorf(stderr, exitError, "%v", err)
		}
		return exitOK
	}
	printStatus(stdout, st)
	return exitOK
}

// readStatus reads the lock hash, its TTL and the fair lock's queue in one
// MULTI, so that they describe one moment. It only reads.
func readStatus(ctx context.Context, rdb redis.UniversalClient, name string) (*lockStatus, error) {
	var (
		typ       *redis.StatusCmd
		fields    *redis.MapStringStringCmd
		pttl      *redis.DurationCmd
		queue     *redis.StringSliceCmd
		deadlines *redis.ZSliceCmd
		now       *redis.TimeCmd
	)
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		typ = p.Type(ctx, name)
		fields = p.HGetAll(ctx, name)
		pttl = p.PTTL(ctx, name)
		queue = p.LRange(ctx, keys.Of(name).Queue, 0, -1)
		deadlines = p.ZRangeWithScores(ctx, keys.Of(name).Timeouts, 0, -1)
		now = p.Time(ctx)
		return nil
	})
	if t := typ.Val(); typ.Err() == nil && t == "string" {
		return readSemaphoreStatus(ctx, rdb, name)
	}
	if t := typ.Val(); typ.Err() == nil && t != "hash" && t != "none" {
		return nil, fmt.Errorf("key %q is a %s, not a lock (a hash) nor a semaphore (a string)", name, t)
	}
	if err != nil {
		return nil, err
	}
	st := &lockStatus{Name: name, Holders: []holder{}, Queue: []waiter{}, ServerTime: now.Val().UnixMilli()}
	for f, v := range fields.Val() {
		if f == "mode" && (v == "read" || v == "write") {
			st.Mode = v // a read-write lock
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("holder %q has hold count %q, not a number", f, v)
		}
		st.Holders = append(st.Holders, holder{Field: f, Holds: n})
	}
	sort.Slice(st.Holders, func(i, j int) bool { return st.Holders[i].Field < st.Holders[j].Field })
	// Who the holders are, when they are lualock processes: a second read,
	// since the keys depend on the fields.
	if err := readRecords(ctx, rdb, st, func(h holder) string { return recordField(st.Mode, h.Field) }); err != nil {
		return nil, err
	}
	if typ.Val() == "hash" {
		st.Locked = true
		ms := int64(-1) // PTTL -1: no expiry, reported by go-redis as -1ns
		if d := pttl.Val(); d >= 0 {
			ms = d.Milliseconds()
		}
		st.LeaseMS = &ms
	}
	scores := map[string]int64{}
	for _, z := range deadlines.Val() {
		if m, ok := z.Member.(string); ok {
			scores[m] = int64(z.Score)
		}
	}
	for _, id := range queue.Val() {
		w := waiter{ID: id}
		if d, ok := scores[id]; ok {
			rem := d - st.ServerTime
			w.DeadlineMS, w.RemainingMS = &d, &rem
		}
		st.Queue = append(st.Queue, w)
	}
	return st, nil
}

// readSemaphoreStatus reads a semaphore: its available permits and, for a
// permit-expirable one, the permits taken with their deadlines and the
// records of the lualock processes that hold them. It only reads.
func readSemaphoreStatus(ctx context.Context, rdb redis.UniversalClient, name string) (*lockStatus, error) {
	var (
		avail   *redis.StringCmd
		permits *redis.ZSliceCmd
		now     *redis.TimeCmd
	)
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		avail = p.Get(ctx, name)
		permits = p.ZRangeWithScores(ctx, keys.Suffix(name, "timeout"), 0, -1)
		now = p.Time(ctx)
		return nil
	})
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(avail.Val(), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("key %q is a string, not a lock (a hash) nor a semaphore (a count of permits)", name)
	}
	st := &lockStatus{Name: name, Available: &n, Holders: []holder{}, Queue: []waiter{}, ServerTime: now.Val().UnixMilli()}
	for _, z := range permits.Val() {
		raw, _ := z.Member.(string)
		id := hex.EncodeToString([]byte(raw))
		d := int64(z.Score)
		rem := d - st.ServerTime
		st.Permits = append(st.Permits, waiter{ID: id, DeadlineMS: &d, RemainingMS: &rem})
		st.Holders = append(st.Holders, holder{Field: id, Holds: 1})
	}
	st.Locked = len(st.Holders) > 0
	if err := readRecords(ctx, rdb, st, func(h holder) string { return h.Field }); err != nil {
		return nil, err
	}
	return st, nil
}

// readRecords reads the records of st's holders that are lualock
// processes, each keyed by holderKey of st's name and field(holder).
func readRecords(ctx context.Context, rdb redis.UniversalClient, st *lockStatus, field func(holder) string) error {
	if len(st.Holders) == 0 {
		return nil
	}
	keys := make([]string, len(st.Holders))
	for i, h := range st.Holders {
		keys[i] = holderKey(st.Name, field(h))
	}
	infos, err := mget(ctx, rdb, keys)
	if err != nil {
		return err
	}
	for i, v := range infos {
		var hi holderInfo
		if v != "" && json.Unmarshal([]byte(v), &hi) == nil {
			st.Holders[i].Lualock = &hi
		}
	}
	return nil
}

// mget reads string keys of one slot ("" for a missing one).
func mget(ctx context.Context, rdb redis.UniversalClient, keys []string) ([]string, error) {
	vals, err := rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			out[i] = s
		}
	}
	return out, nil
}

func printStatus(w io.Writer, st *lockStatus) {
	if st.Available != nil {
		printSemaphore(w, st)
		return
	}
	switch {
	case !st.Locked:
		fmt.Fprintf(w, "lock %s: not locked\n", st.Name)
	case *st.LeaseMS < 0:
		fmt.Fprintf(w, "lock %s: locked, no expiry\n", st.Name)
	default:
		fmt.Fprintf(w, "lock %s: locked, lease %v remaining\n", st.Name, time.Duration(*st.LeaseMS)*time.Millisecond)
	}
	if st.Mode != "" {
		fmt.Fprintf(w, "read-write lock, %s mode\n", st.Mode)
	}
	for _, h := range st.Holders {
		fmt.Fprintf(w, "  holder %s  holds %d\n", h.Field, h.Holds)
		if i := h.Lualock; i != nil {
			fmt.Fprintf(w, "    lualock pid %d on %s since %s: %s\n", i.PID, i.Host, i.Since, i.Command)
		}
	}
	if len(st.Queue) > 0 {
		fmt.Fprintf(w, "fair queue: %d waiting\n", len(st.Queue))
	}
	for i, q := range st.Queue {
		if q.DeadlineMS == nil {
			fmt.Fprintf(w, "  %d. %s  (no deadline)\n", i+1, q.ID)
			continue
		}
		at := time.UnixMilli(*q.DeadlineMS).UTC().Format("2006-01-02T15:04:05.000Z")
		fmt.Fprintf(w, "  %d. %s  deadline %s (in %v)\n", i+1, q.ID, at, time.Duration(*q.RemainingMS)*time.Millisecond)
	}
	if st.ReplicaAck == "" {
		return
	}
	replicas := "unknown"
	if st.Replicas >= 0 {
		replicas = strconv.Itoa(st.Replicas)
	}
	fmt.Fprintf(w, "replica acknowledgement: %s; replicas of the primary: %s\n", st.ReplicaAck, replicas)
}

// recordField is the owner field under which a lualock process keeps the
// record of the hold in lock hash field f (mode: the read-write lock's mode,
// or ""): a writer's holds are counted in C:H:write, its record is C:H's.
// A writer's own read holds (C:H beside C:H:write) share that record.
func recordField(mode, f string) string {
	if mode != "" {
		return strings.TrimSuffix(f, writeSuffix)
	}
	return f
}

func printSemaphore(w io.Writer, st *lockStatus) {
	fmt.Fprintf(w, "semaphore %s: %d permits available, %d taken\n", st.Name, *st.Available, len(st.Permits))
	for i, p := range st.Permits {
		left := "no expiry"
		switch ms := *p.RemainingMS; {
		case ms < 0:
			left = "expired (given back at the next call)"
		case ms < int64(100*365*24*time.Hour/time.Millisecond):
			left = fmt.Sprintf("lease %v left", time.Duration(ms)*time.Millisecond)
		}
		fmt.Fprintf(w, "  permit %s  %s\n", p.ID, left)
		if r := st.Holders[i].Lualock; r != nil {
			fmt.Fprintf(w, "    lualock pid %d on %s since %s: %s\n", r.PID, r.Host, r.Since, r.Command)
		}
	}
}
