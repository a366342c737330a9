package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// When lualock dies while its command runs (kill -9 included), the
// supervisor, which outlives it for exactly this, kills the command's
// processes and then gives the hold back itself, so that the next waiter
// gets NAME at once instead of when the lease runs out. The holder tells the
// supervisor what it holds in one control line, "hold JSON" (a handover),
// once the command has started.
//
// The supervisor gives a lock back with the library's own idempotent
// release: a client with the holder's client id makes the same kind of
// handle, whose owner field is then the holder's (lualock makes one handle
// per client); if that field still holds the lock, the handle takes it
// over (an acquisition that asks for the hold count the owner already has
// changes nothing but the lease, which it sets to what is left of it) and
// Unlock releases it. A permit is given back by its id (ReleaseID). If the
// supervisor is killed too, nothing gives the hold back and the lease is
// the bound, as for any holder that dies.

// handover is what the supervisor needs to give the hold back.
type handover struct {
	Addr      string             `json:"addr"`                // the resolved -addr, password included: never printed
	Sentinels *sentinelSet       `json:"sentinels,omitempty"` // -sentinel and the rest, when given: the primary they name
	PubSub    lualock.PubSubMode `json:"pubsub"`
	FairWait  time.Duration      `json:"fair_wait"`
	Kind      string             `json:"kind"` // one of the kind* constants
	Name      string             `json:"name"`
	Client    string             `json:"client"` // the holder's client id
	Field     string             `json:"field"`  // the hold's owner field (a lock)
	Permit    string             `json:"permit"` // the permit's id (a semaphore)
}

// The kinds of hold lualock lock takes.
const (
	kindLock      = "lock"
	kindFair      = "fair"
	kindRead      = "read"
	kindWrite     = "write"
	kindFenced    = "fenced"
	kindSemaphore = "semaphore"
)

// kindOf names the kind of hold the flags of a ask for.
func kindOf(a *lockArgs) string {
	switch {
	case a.permits > 0:
		return kindSemaphore
	case a.fair:
		return kindFair
	case a.read:
		return kindRead
	case a.write:
		return kindWrite
	case a.fenced:
		return kindFenced
	}
	return kindLock
}

// handoverLine is the control line that hands h to the supervisor.
func handoverLine(h handover) string {
	b, _ := json.Marshal(h) // plain fields: cannot fail; JSON has no raw newline
	return "hold " + string(b)
}

// parseHandover reads the JSON of a "hold" control line.
func parseHandover(s string) (*handover, error) {
	var h handover
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// giveBack releases h after lualock died, within releaseTimeout, and says
// on stderr only when it could not (a hold found gone needs no word).
func (h *handover) giveBack(stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := h.release(ctx)
	if err != nil && !errors.Is(err, lualock.ErrNotHeld) && !errors.Is(err, lualock.ErrLockLost) {
		fmt.Fprintf(stderr, "lualock: lualock died holding %s; its supervisor could not release it: %v (it expires when its lease runs out)\n", h.Name, clean(err))
	}
}

// release gives the hold back; see the comment at the top of this file.
func (h *handover) release(ctx context.Context) error {
	opts, err := parseAddr(h.Addr)
	if err != nil {
		return err
	}
	var rdb redis.UniversalClient
	if h.Sentinels != nil {
		rdb, err = dialFailover(ctx, failoverOptions(*h.Sentinels, opts), time.Time{}, time.Now().Add(connectTimeout))
	} else {
		rdb, err = connect(ctx, opts, time.Time{}, time.Now().Add(connectTimeout))
	}
	if err != nil {
		return err
	}
	defer rdb.Close()
	client, err := lualock.New(rdb, lualock.Options{ClientID: h.Client, PubSub: h.PubSub, FairWait: h.FairWait})
	if err != nil {
		return err
	}
	defer client.Close()
	if h.Kind == kindSemaphore {
		defer rdb.Del(context.WithoutCancel(ctx), holderKey(h.Name, h.Permit))
		return client.NewPermitExpirableSemaphore(h.Name).ReleaseID(ctx, h.Permit)
	}
	a := &lockArgs{name: h.Name, fair: h.Kind == kindFair, read: h.Kind == kindRead, write: h.Kind == kindWrite, fenced: h.Kind == kindFenced}
	lock, _ := newKindLock(client, a)
	if lock.Field() != h.Field {
		return fmt.Errorf("the handle's owner field is %s, the hold's %s", lock.Field(), h.Field)
	}
	// The holder's record goes with the hold.
	defer rdb.Del(context.WithoutCancel(ctx), holderKey(h.Name, h.Field))
	st, err := lock.Status(ctx)
	if err != nil || st.Holds == 0 {
		return err // not held any more: nothing to give back
	}
	lease := st.Lease
	if lease == lualock.NoExpiry {
		lease = defaultWatchdogLease
	}
	if err := lock.TryLockLease(ctx, 0, max(lease, time.Millisecond)); err != nil {
		return err
	}
	return lock.Unlock(ctx)
}
