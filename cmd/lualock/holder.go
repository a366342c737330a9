package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/internal/keys"
)

// A lualock process tells who it is while it holds a lock in the key
// keys.Holder(NAME, FIELD) (lualock_holder:{NAME}:FIELD), a JSON holderInfo
// with the hold's lease as its expiry. It shares the lock's hash tag, so it
// lives in the lock's cluster slot, and it is never a field of the lock's
// hash, which Redisson reads.

// holderInfo is what a lualock process says about itself while it holds a
// lock.
type holderInfo struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Command string `json:"command"`
	Since   string `json:"since"` // when it got the lock, RFC 3339, UTC
}

func holderKey(name, field string) string { return keys.Holder(name, field) }

// holderWriter keeps a lock's holderInfo key while the hold lasts.
type holderWriter struct {
	rdb    redis.UniversalClient
	key    string
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startHolderInfo writes the holder key key (holderKey of the lock's name
// and the hold's owner field, or of the semaphore's name and the permit's
// id), with lease as its expiry, and, when renew is set (a hold under the
// watchdog), renews that expiry every third of it until stop or the end of
// the hold (hold, the hold's context). Failures are ignored: the key only
// informs.
func startHolderInfo(rdb redis.UniversalClient, key string, hold context.Context, command []string, lease time.Duration, renew bool) *holderWriter {
	host, _ := os.Hostname()
	info := holderInfo{Host: host, PID: os.Getpid(), Command: shellJoin(command), Since: time.Now().UTC().Format(time.RFC3339Nano)}
	b, _ := json.Marshal(info)
	w := &holderWriter{rdb: rdb, key: key, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	_ = rdb.Set(sctx, w.key, b, lease).Err()
	scancel()
	go func() {
		defer close(w.done)
		if !renew {
			return
		}
		t := time.NewTicker(max(lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hold.Done():
				return
			case <-t.C:
				rctx, rcancel := context.WithTimeout(ctx, lease/3+time.Millisecond)
				_ = rdb.PExpire(rctx, w.key, lease).Err()
				rcancel()
			}
		}
	}()
	return w
}

// stop ends the renewal and deletes the key.
func (w *holderWriter) stop() {
	w.once.Do(func() {
		w.cancel()
		<-w.done
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = w.rdb.Del(ctx, w.key).Err()
	})
}

// shellJoin quotes args as a POSIX shell would read them back.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@%+") == "" {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// waitNotice tells on stderr, while lualock waits, who holds the lock, how
// long its lease has left and, for a fair lock, lualock's place in the
// queue: once when the wait begins and again when the holder or the place
// changes. It reads the lock's status every noticeEvery.
type waitNotice struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	told   bool
	once   sync.Once
}

const noticeEvery = time.Second

func startWaitNotice(rdb redis.UniversalClient, client *lualock.Client, lock *lualock.Lock, a *lockArgs, stderr io.Writer) *waitNotice {
	ctx, cancel := context.WithCancel(context.Background())
	n := &waitNotice{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		last, early := "", 0
		for {
			next := noticeEvery
			st, err := readStatus(ctx, rdb, a.name)
			if err == nil {
				msg, key := waitMessage(st, client.ID(), lock.Field(), a)
				if strings.HasSuffix(key, unqueued) && early < 20 {
					// A fair waiter not in the queue yet: look again soon
					// (for a second at most), to tell its place.
					early++
					key, next = "", 50*time.Millisecond
				}
				if key != "" && key != last {
					last = key
					n.mu.Lock()
					if ctx.Err() == nil {
						fmt.Fprintln(stderr, msg)
						n.told = true
					}
					n.mu.Unlock()
				}
			}
			t := time.NewTimer(next)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return n
}

// waitMessage describes the wait for st of a lualock lock with flags a;
// key changes when the message is worth printing again, and is empty when
// there is nothing to tell (the lock is free, or already ours, or a reader
// finds only readers, which it does not wait for: it is about to enter).
// A read-write lock's message says why a reader or a writer waits: a writer
// holds it, or readers do.
func waitMessage(st *lockStatus, clientID, field string, a *lockArgs) (msg, key string) {
	if !st.Locked {
		return "", ""
	}
	var who []string
	for _, h := range st.Holders {
		if strings.HasPrefix(h.Field, clientID+":") {
			return "", "" // ours: obtained
		}
		if st.Mode == "write" && !strings.HasSuffix(h.Field, writeSuffix) {
			continue // the writer's own read holds: the writer is the reason
		}
		who = append(who, describeHolder(h))
	}
	if st.Mode == "read" && a.read {
		return "", "" // readers share: not a reason to wait
	}
	if len(who) == 0 {
		who = []string{"an unknown holder (not a lock hash field)"}
	}
	lease := "no expiry"
	if st.LeaseMS != nil && *st.LeaseMS >= 0 {
		lease = fmt.Sprintf("lease %v left", time.Duration(*st.LeaseMS)*time.Millisecond)
	}
	held := "held by"
	switch st.Mode {
	case "write":
		held = "held for writing by the writer"
	case "read":
		held = "held for reading by"
		if len(who) > 1 {
			held += fmt.Sprintf(" %d readers:", len(who))
		}
	}
	msg = fmt.Sprintf("lualock: lock %s is %s %s, %s; waiting", st.Name, held, strings.Join(who, ", "), lease)
	key = st.Mode + "|" + strings.Join(who, ",")
	if a.fair {
		i := slices.IndexFunc(st.Queue, func(w waiter) bool { return w.ID == field })
		if i < 0 {
			return msg, key + unqueued
		}
		msg += fmt.Sprintf(" (place %d of %d in the queue)", i+1, len(st.Queue))
		key += fmt.Sprintf("|%d", i+1)
	}
	return msg, key
}

// writeSuffix ends a read-write lock's writer field C:H:write; the holder
// record of that hold is keyed by the owner field C:H.
const writeSuffix = ":write"

// unqueued is waitMessage's key for a fair waiter not in the queue yet.
const unqueued = "\x00unqueued"

// describeHolder names a holder for people: the lualock process behind it
// when it is one, else its owner field.
func describeHolder(h holder) string {
	if h.Lualock == nil {
		return h.Field + " (not a lualock process)"
	}
	return fmt.Sprintf("pid %d on %s (%s) since %s", h.Lualock.PID, h.Lualock.Host, h.Lualock.Command, h.Lualock.Since)
}

// said reports whether a notice was printed.
func (n *waitNotice) said() bool {
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.told
}

// stop ends the notices; none is printed once it returns.
func (n *waitNotice) stop() {
	if n == nil {
		return
	}
	n.once.Do(func() {
		n.mu.Lock()
		n.cancel()
		n.mu.Unlock()
		<-n.done
	})
}
