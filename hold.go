package lualock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lualock/lualock/internal/renew"
)

// holdState is where a handle's ownership of its lock stands.
//
//	free ──acquired──▶ held ──beginRelease──▶ releasing ──released──▶ free | held | lost
//	                    │  ▲                     │  ▲
//	                    │  └─────released────────┘  └──beginRelease── unsettled
//	                    ├──lose──▶ lost ──(each Unlock)──▶ free        ▲
//	                    └──end───▶ lapsed                              │
//	releasing ──released (no reply)──────────────────────────────────┘
//
// held, lapsed and unsettled may take more holds (re-entry); lost and
// unsettled are left by the handle's next Unlock (or, for unsettled, its
// next Lock, which settles the release first).
type holdState uint8

const (
	// free: the handle holds nothing.
	free holdState = iota
	// held: the handle holds the lock, renewed by the watchdog or under a
	// fixed lease that its timer follows.
	held
	// lapsed: the hold's Context ended while the handle still counts holds
	// (its fixed lease ran out, the client closed, or a loss came while a
	// release of the last hold was unsettled): nothing renews it; its
	// Unlock tells what Redis says.
	lapsed
	// releasing: an Unlock waits for its release's reply. A loss reported
	// meanwhile is kept as pending: the reply decides whether it stands
	// (a renewal racing the last release finds the lock gone, Redisson
	// #7272).
	releasing
	// unsettled: a release got no reply; the next Unlock, or the next
	// Lock before it re-enters, sends it again under the same latch.
	unsettled
	// lost: the lock was taken away; each outstanding hold's Unlock, and a
	// re-entry, report the cause.
	lost
)

var holdStateNames = [...]string{"free", "held", "lapsed", "releasing", "unsettled", "lost"}

func (s holdState) String() string { return holdStateNames[s] }

// holdEnv is what a hold needs from its handle: a watchdog entry, the
// hold watcher and the end event.
type holdEnv interface {
	// renew puts hold gen, whose lease was set at start, under the
	// watchdog; false when the client has closed.
	renew(gen uint64, start time.Time) (watchdogEntry, bool)
	// watch starts the hold watcher of hold gen (nil when none).
	watch(gen uint64) *holdWatcher
	// ended reports the end of a hold that began at since.
	ended(cause error, since time.Time)
}

// hold is the ownership state of a handle: a state machine whose
// transition methods check the state they start from. Its lifetime (the
// Context with cause, the fixed lease's expiry, the watchdog entry, the
// end event: lifetime.go) is the current hold's, from the first hold's
// acquisition to its end; it also owns the hold watcher. Its mutex is
// never held across a call to Redis.
type hold struct {
	env           holdEnv
	watchdogLease time.Duration
	unlockLatch   time.Duration // Options.UnlockLatch

	mu        sync.Mutex
	state     holdState
	holds     int           // hold count the handle has in Redis
	gen       uint64        // counts holds from first lock to last unlock
	lease     time.Duration // lease of the current hold
	latch     string        // releasing, unsettled: the unlock latch of the release
	cause     error         // lost: the loss; releasing: a loss reported meanwhile (pending)
	life      lifetime      // the current hold's lifetime
	watcher   *holdWatcher  // the hold tracker's watch of the hold (nil: none)
	acquiring int           // acquire calls of this handle under way
}

// notHeld is the Context of a handle that holds nothing.
var notHeld = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotHeld)
	return ctx
}()

// context returns the current hold's lifetime context, made on first use
// (most holds never ask for it).
func (h *hold) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == free {
		return notHeld
	}
	return h.life.context()
}

// snapshot is what an acquisition attempt needs to know before it runs.
type snapshot struct {
	state holdState
	holds int
	cause error // lost: the loss
}

func (h *hold) snapshot() snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return snapshot{h.state, h.holds, h.cause}
}

// lostCause is the error of a lost hold.
func (h *hold) lostCause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == lost {
		return h.cause
	}
	return ErrLockLost
}

func (h *hold) generation() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// enter and exit count the acquire calls of the handle under way; exit
// reports whether another one is still waiting (as the same owner, in the
// same place in a queue).
func (h *hold) enter() {
	h.mu.Lock()
	h.acquiring++
	h.mu.Unlock()
}

func (h *hold) exit() (others bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acquiring--
	return h.acquiring > 0
}

// acquired records an acquisition that left want holds, whose lease
// (0: the watchdog's) was set at start or later: free to held for a first
// hold (want 1); a re-entry keeps the state (held or lapsed). It returns
// ErrClosed, recording nothing, when the hold needs the watchdog and the
// client has closed. A re-entry into a hold whose loss was reported while
// it ran stays lost: it counts the new hold (each Unlock reports the
// loss) but nothing renews, watches or times it, and it returns the loss.
func (h *hold) acquired(want int, lease time.Duration, start time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := want == 1
	if !first && h.state == lost {
		h.holds = want
		return h.cause
	}
	gen := h.gen
	if first {
		gen++
	}
	var entry watchdogEntry
	if lease == 0 && !h.life.watched {
		e, ok := h.env.renew(gen, start)
		if !ok {
			return ErrClosed
		}
		entry = e
	}
	h.holds, h.gen = want, gen
	if first {
		h.state = held
		h.latch, h.cause = "", nil
		if h.life.onEnd == nil {
			h.life.onEnd = h.env.ended // once per handle
		}
		h.life.begin(start)
		h.unwatch() // an earlier hold's, were it left
		h.watcher = h.env.watch(gen)
	}
	if lease == 0 {
		h.lease = h.watchdogLease
		if entry != nil {
			h.life.watch(entry)
		}
		return nil
	}
	h.lease = lease
	h.startExpiry(start)
	return nil
}

// startExpiry puts the current hold under its fixed lease, set in Redis at
// start or later: its lifetime ends when the lease runs out, less
// renew.LossMargin. h.mu is held.
func (h *hold) startExpiry(start time.Time) {
	gen, lease := h.gen, h.lease
	h.life.expireAt(start, lease, func() {
		h.end(gen, errLeaseRanOut(lease))
	})
}

// errLeaseRanOut is the cause of a hold whose fixed lease ran out.
func errLeaseRanOut(lease time.Duration) error {
	return fmt.Errorf("%w: the lease of %v ran out", ErrNotHeld, lease)
}

// current reports whether gen is the handle's hold, not yet lost: the
// events of an older hold, or of one already lost, change nothing.
func (h *hold) current(gen uint64) bool {
	return h.gen == gen && h.state != free && h.state != lost
}

// end ends hold gen without a loss (its fixed lease ran out, the client
// closed): its context ends, nothing renews it; the handle keeps its
// holds for Unlock to release (held or unsettled to lapsed; releasing
// stays, its reply decides).
func (h *hold) end(gen uint64, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(gen, cause)
}

// endLocked is end with h.mu held.
func (h *hold) endLocked(gen uint64, cause error) {
	if !h.current(gen) {
		return
	}
	if h.state != releasing {
		h.state = lapsed
	}
	h.finish(cause)
}

// lose ends hold gen as lost with cause (a renewal or the hold watcher
// found it gone). During a release the loss is pending: the reply decides.
// When a release of the last hold is unsettled, that release may be what
// removed the lock: the hold's context ends, and the next Unlock (or Lock)
// settles the release and tells what it found.
func (h *hold) lose(gen uint64, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loseLocked(gen, cause)
}

func (h *hold) loseLocked(gen uint64, cause error) {
	switch {
	case !h.current(gen):
	case h.state == releasing:
		h.cause = cause
	case h.state == unsettled && h.holds == 1:
		h.goneUnsettled(cause)
	case h.state == unsettled:
		// The release of one of several holds is unsettled: the lock is
		// gone, so that release has nothing left to do; the holds left
		// after it each report the loss.
		h.holds--
		h.state, h.cause = lost, cause
		h.finish(cause)
	default:
		h.state, h.cause = lost, cause
		h.finish(cause)
	}
}

// goneUnsettled ends the context of a last hold found gone while its
// release is unsettled: that release may be what removed the lock. The
// hold stays unsettled: the next Unlock (or Lock) settles the release and
// tells what it found. h.mu is held.
func (h *hold) goneUnsettled(cause error) {
	h.life.unwatch()
	h.life.end(fmt.Errorf("%w: the lock is gone while its release, sent without a reply, is unsettled (that release removed it, or it was lost: %v)", ErrNotHeld, cause))
}

// expire ends hold gen, under the watchdog, whose lease ran out by the
// client's clock (less the margin) with no renewal confirmed. Unlike lose,
// an expiry ends the hold's context at once even during a release: the
// lease is over either way; the release's reply decides what Unlock
// returns.
func (h *hold) expire(gen uint64, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.current(gen):
	case (h.state == releasing || h.state == unsettled) && h.holds == 1:
		// The lease ran out after Unlock began for the last hold, while
		// its release was held up (or unsettled): the hold was live when
		// the caller let go of it, and nothing says it was taken away.
		h.cause = errRanOutInRelease
		if h.state == unsettled {
			h.cause = nil
			h.life.unwatch()
		}
		h.life.end(errRanOutInRelease)
	case h.state == releasing:
		h.cause = cause
		h.life.end(cause)
	default:
		h.state, h.cause = lost, cause
		h.finish(cause)
	}
}

// errRanOutInRelease ends a hold whose lease ran out after the release of
// its last hold began, before the release landed.
var errRanOutInRelease = fmt.Errorf("%w: the lease ran out while the release was held up", ErrNotHeld)

// ranOutInRelease reports whether the lease of a last hold under the
// watchdog, released by r, may have run out by now (less the margin): no
// renewal landed for a whole lease. h.mu is held.
func (h *hold) ranOutInRelease(r release, pending error) bool {
	if !r.watched || r.holds != 1 {
		return false
	}
	if errors.Is(pending, errRanOutInRelease) {
		return true
	}
	return time.Since(h.life.entry.Renewed()) >= h.watchdogLease-renew.LossMargin(h.watchdogLease)
}

// watcherLost is lose for a hold watcher's finding about hold gen, while
// that hold is still watched.
func (h *hold) watcherLost(gen uint64, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watcher == nil || h.watcher.gen != gen {
		return
	}
	if h.life.leaseOver() {
		// Redis let the fixed lease go, as it was due to: its end, which
		// its timer (late on a busy machine) has not reported yet, not a
		// loss.
		h.endLocked(gen, errLeaseRanOut(h.lease))
		return
	}
	h.loseLocked(gen, cause)
}

// unwatch stops the hold watcher (before a release or a force release
// that publishes on the channel it listens to). h.mu is held.
func (h *hold) unwatch() {
	if h.watcher != nil {
		h.watcher.stop()
		h.watcher = nil
	}
}

// finish stops the hold watcher and ends the current hold's lifetime
// (its watchdog entry, its expiry, its Context) with cause. h.mu is held.
func (h *hold) finish(cause error) {
	h.latch = ""
	h.unwatch()
	h.life.finish(cause)
}

// free ends every hold (held, lapsed, unsettled, lost) with cause: a
// force release. h.mu is not held.
func (h *hold) forceFreed(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == free {
		return
	}
	h.state, h.holds, h.cause = free, 0, nil
	h.finish(cause)
}

// stopWatching stops the hold watcher, for a force release.
func (h *hold) stopWatching() {
	h.mu.Lock()
	h.unwatch()
	h.mu.Unlock()
}

// release is one release request of a hold, from beginRelease to released.
type release struct {
	lease   time.Duration
	latch   string
	holds   int
	watched bool
	resend  bool // an earlier send of this request got no reply
	start   time.Time
}

// beginRelease starts the release of one hold: held, lapsed or unsettled
// to releasing. It returns ErrNotHeld when free; in lost it counts one
// hold down (free after the last) and returns the loss. detached says the
// caller's context has ended: for the last hold under the watchdog, the
// watchdog stops renewing at once.
func (h *hold) beginRelease(newLatch func() string, detached bool) (release, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.state {
	case free:
		return release{}, ErrNotHeld
	case lost:
		err := h.cause
		if h.holds--; h.holds == 0 {
			h.state, h.cause = free, nil
			h.finish(err) // nothing of the lost hold may outlive it (its context has ended already)
		}
		return release{}, err
	case releasing:
		panic("lualock: hold: two releases at once")
	}
	r := release{lease: h.lease, watched: h.life.watched, holds: h.holds, resend: h.state == unsettled, start: time.Now()}
	if detached && r.holds == 1 && r.watched {
		h.life.entry.Stop()
	}
	if !r.resend {
		h.latch = newLatch()
	}
	r.latch = h.latch
	h.state, h.cause = releasing, nil
	if r.holds == 1 {
		// The last release deletes the key the hold is tracked by: the
		// hold watcher must not take that for a loss.
		h.unwatch()
	}
	return r, nil
}

// pauseRenewal keeps the watchdog off the hold while an acquisition sets
// a fixed lease on it: no renewal sent before it returns stretches the
// fixed lease to the watchdog's afterwards. resumeRenewal lets the watchdog
// renew it again, if it is still watched. It returns ctx's error if ctx
// ends first.
func (h *hold) pauseRenewal(ctx context.Context) error {
	h.mu.Lock()
	e := h.life.entry // the last entry, even removed: its renewal may be in flight
	h.mu.Unlock()
	if e == nil {
		return nil
	}
	return e.Pause(ctx)
}

// resumeRenewal ends pauseRenewal.
func (h *hold) resumeRenewal() {
	h.mu.Lock()
	e := h.life.entry
	h.mu.Unlock()
	if e != nil {
		e.Resume()
	}
}

// stopRenewingLast stops the renewal of a last hold under the watchdog
// whose release goes on after the caller's context ended.
func (h *hold) stopRenewingLast(r release) {
	if r.holds == 1 && r.watched {
		h.life.entry.Stop()
	}
}

// unconfirmed ends a release that got no reply: releasing to unsettled
// (the next Unlock or Lock sends it again), or, when detached (nobody will
// call again) and it was the last hold, to free: its renewal has stopped,
// so the lock is gone within its lease at worst. A loss reported during
// the release of a last hold ends its context as lose does for an
// unsettled one (the release may be what removed the lock); during the
// release of an earlier hold it stands.
func (h *hold) unconfirmed(r release, err error, detached bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	pending := h.cause
	h.cause = nil
	if detached && r.holds == 1 {
		h.state, h.holds = free, 0
		if pending != nil {
			h.finish(pending)
			return fmt.Errorf("the release was not confirmed (%w), and the lease ran out meanwhile (%w)", err, pending)
		}
		h.finish(fmt.Errorf("%w: unlocked after its context ended; the release was not confirmed", ErrNotHeld))
		return fmt.Errorf("the release was not confirmed (%w); nothing renews the lock, so it expires within its lease (%v) at most", err, r.lease)
	}
	switch {
	case pending != nil && r.holds == 1 && h.latch != "":
		// The loss came while the release of the last hold was in
		// flight, and that release got no reply: it may be what removed
		// the lock, as when the loss comes after it.
		h.state = unsettled
		h.goneUnsettled(pending)
	case pending != nil:
		h.state, h.cause = lost, pending
		h.finish(pending)
	case h.latch == "":
		h.state = lapsed // the hold ended meanwhile (finish dropped the request)
	default:
		h.state = unsettled
	}
	return err
}

// released records the reply of a release (res, see protocol.release):
// releasing to free, held (or lapsed) for a partial release, or lost.
func (h *hold) released(r release, res releaseOutcome) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	pending := h.cause
	h.cause, h.latch = nil, ""
	switch {
	case res == releaseNotHeld:
		return h.releasedGone(r, pending)
	case res == releasePartial && (pending != nil || h.holds > 1):
		h.releasedOne(r, pending)
	default:
		h.state, h.holds = free, 0
		h.finish(ErrNotHeld)
	}
	return nil
}

// releasedGone records a release that found the lock gone: why it is
// gone decides whether the hold ended as asked, ran out or was lost.
// pending is a loss reported during the release. h.mu is held.
func (h *hold) releasedGone(r release, pending error) error {
	switch {
	case r.holds == 1 && (r.resend || time.Since(r.start) >= h.unlockLatch):
		// The release was sent before without a reply (by an earlier
		// Unlock, or by a retry within this one, which lasted past the
		// latch), and its latch may have expired: the lock is gone because
		// that send released it, or because it was lost before. Either way
		// this hold has ended, as the caller asked; nothing says it was
		// taken away.
		cause := fmt.Errorf("%w: the lock was gone when its release was sent again past the unlock latch (released by the first send, whose reply was lost, or lost before it)", ErrNotHeld)
		h.state, h.holds = free, 0
		h.finish(cause)
		return cause
	case h.ranOutInRelease(r, pending):
		// The release found the lock gone after no renewal landed for a
		// lease, while it was held up: the hold was live when Unlock
		// began; nothing took the lock away.
		h.state, h.holds = free, 0
		h.finish(errRanOutInRelease)
		return errRanOutInRelease
	case r.watched:
		// The watchdog kept the lease: the lock was taken away (deleted,
		// force-unlocked, wiped by Redis) before a renewal noticed. Each
		// remaining hold's Unlock reports the loss too.
		cause := fmt.Errorf("%w: %w", ErrLockLost, errLostAtUnlock)
		if h.holds--; h.holds > 0 {
			h.state, h.cause = lost, cause
		} else {
			h.state = free
		}
		h.finish(cause)
		return cause
	}
	h.state, h.holds = free, 0
	h.finish(fmt.Errorf("%w: the lock was gone at unlock", ErrNotHeld))
	return fmt.Errorf("%w: its lease ran out or it was deleted", ErrNotHeld)
}

// releasedOne records a partial release of one of several holds (or a
// replayed one, pending a loss reported meanwhile): the hold goes on, or
// is lost. h.mu is held.
func (h *hold) releasedOne(r release, pending error) {
	h.holds--
	if pending != nil {
		// A replayed partial release, but the lock was lost meanwhile.
		h.state, h.cause = lost, pending
		h.finish(pending)
		return
	}
	h.state = held
	if h.life.ended != nil {
		h.state = lapsed
	}
	if !h.life.watched {
		h.startExpiry(r.start) // the release set the fixed lease again
	}
}
