package failover

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/tests/harness"
	"github.com/lualock/lualock/tests/internal/backends"
)

const (
	// linkDelay is how far the replica lags: what the primary wrote in the
	// last linkDelay before it crashed is lost.
	linkDelay = 50 * time.Millisecond
	// linkDelayOff is the lag of the rounds without acknowledgement: long
	// enough that a round's first acquisition (a round takes nine, in a
	// few ms unloaded, then waits for the waiter to subscribe) is still in
	// the window on a loaded machine.
	linkDelayOff = time.Second
	// lease is the watchdog's lease: longer than a failover's outage
	// (Sentinel down-after 1s or cluster node timeout 1s, the election,
	// the promotion: 1.5-2.5s typically,
	// up to 9s seen when the Sentinels' first election splits), so that a
	// hold that survived is still renewed after it.
	lease = 10 * time.Second
	// wokenWithin bounds the wake-up of a waiter after the release: below
	// the fallback timer (MaxWaitTimer, 10s), so only a release message
	// heard on the new primary wakes it in time.
	wokenWithin = 5 * time.Second
	// settle is how long the rounds let a waiter settle on the new
	// primary before the release it must hear.
	settle = 2 * time.Second
	// followWithin bounds how long after the deployment is stable again a
	// waiter takes to subscribe on the new primary.
	followWithin = 15 * time.Second
	// failovers is the rounds of a run with acknowledgement (full size).
	failovers = 50
)

// TestSentinel_ackOne: with replica acknowledgement on (the default), no
// round's second holder obtains what the first holds, for every kind; the
// waiter follows the new primary and is woken by the release; the holds
// that survived are still held and renewed a lease later, one failover or
// more after. Each round starts once the deployment is stable and the
// first holder's probe acquisition was acknowledged (knowsReplica).
func TestSentinel_ackOne(t *testing.T) { t.Parallel(); ackOne(t, startSentinel(t, 1)) }

// TestCluster_ackOne is TestSentinel_ackOne on a cluster whose masters
// have a replica each: the round's names share a slot, whose master
// crashes.
func TestCluster_ackOne(t *testing.T) { t.Parallel(); ackOne(t, startCluster(t)) }

// TestSentinel_ackAll is TestSentinel_ackOne with ReplicaAckAll on a
// deployment with two replicas, both lagging: every acquisition waits for
// both, so whichever one Sentinel promotes has it. (TestAck_allOrOne
// shows where all and one part.)
func TestSentinel_ackAll(t *testing.T) {
	t.Parallel()
	ackOn(t, startSentinel(t, 2), lualock.ReplicaAckAll, backends.Scale(6, 3))
}

func ackOne(t *testing.T, d deployment) {
	ackOn(t, d, lualock.ReplicaAckOne, backends.Scale(failovers, 6))
}

func ackOn(t *testing.T, d deployment, mode lualock.ReplicaAck, n int) {
	r := rounds(t, d, mode, n)
	t.Log(r)
	for k, n := range r.overlaps {
		if n != 0 {
			t.Errorf("%s: %d overlaps in %d failovers with replica acknowledgement on, want 0", k, n, r.rounds)
		}
	}
	if r.renewed == 0 {
		t.Errorf("no hold checked a lease after its failover: the watchdog's renewals are untested")
	}
}

// TestSentinel_ackOff: without replica acknowledgement the same rounds
// lose holds of every kind to the second holder, often while the first
// still believes it holds (an overlap; otherwise the hold tracker or the
// watchdog told it first: the lock kinds' holders are told, the plain
// semaphore's are not), so TestSentinel_ackOne proves the mechanism, not
// luck; the first holders of the lost holds are told, and when (result).
func TestSentinel_ackOff(t *testing.T) { t.Parallel(); ackOff(t, startSentinel(t, 1)) }

// TestCluster_ackOff is TestSentinel_ackOff on the replicated cluster.
func TestCluster_ackOff(t *testing.T) { t.Parallel(); ackOff(t, startCluster(t)) }

func ackOff(t *testing.T, d deployment) {
	r := rounds(t, d, lualock.ReplicaAckOff, backends.Scale(10, 3))
	t.Log(r)
	total := 0
	for _, k := range kinds() {
		total += r.overlaps[k.name]
		if r.lost[k.name] == 0 {
			t.Errorf("%s: no hold lost in %d failovers without replica acknowledgement: the rounds do not show the window", k.name, r.rounds)
		}
	}
	if total == 0 {
		t.Errorf("no overlap in %d failovers without replica acknowledgement: every first holder was told before the second obtained", r.rounds)
	}
}

// result is what a run of rounds saw.
type result struct {
	test      string
	mode      lualock.ReplicaAck
	rounds    int
	overlaps  map[string]int // the second holder obtained while the first was not told
	lost      map[string]int // the second holder obtained
	told      map[string]int // the first holder's hold ended with ErrLockLost
	sameToken int            // fenced overlaps where the second token was not above the first
	renewed   int            // holds checked held more than a lease after they were taken
	failovers []time.Duration
	acquire   []time.Duration // the first holder's acquisitions, each
	// toldAfter: from the promoted replica's first answer as a primary to
	// the end of a lost hold's Context, each.
	toldAfter []time.Duration
	// toldNamed: the same from a Sentinel's first naming the new primary.
	toldNamed []time.Duration
	byRenewal int             // lost holds told by the watchdog's renewal rather than the hold tracker
	known     []time.Duration // from a round's first probe to the one acknowledged
	unknown   int             // probes not acknowledged (the client did not know the replicas yet)
}

func (r result) String() string {
	var b strings.Builder
	lag := linkDelay
	if r.mode == lualock.ReplicaAckOff {
		lag = linkDelayOff
	}
	fmt.Fprintf(&b, "%s: replica ack %v, %d failovers (link %v behind):", r.test, r.mode, r.rounds, lag)
	for _, k := range kinds() {
		fmt.Fprintf(&b, " %s %d/%d overlaps (%d lost, %d told);", k.name, r.overlaps[k.name], r.rounds, r.lost[k.name], r.told[k.name])
	}
	fmt.Fprintf(&b, " fenced overlaps with a token not above the first holder's: %d;", r.sameToken)
	fmt.Fprintf(&b, " holds renewed past a lease after a failover: %d;", r.renewed)
	fmt.Fprintf(&b, " promotion p50 %v max %v; acquisition p50 %v max %v",
		pct(r.failovers, 50), pct(r.failovers, 100), pct(r.acquire, 50), pct(r.acquire, 100))
	if len(r.known) > 0 {
		fmt.Fprintf(&b, "; the client knew the replicas after probing p50 %v max %v (%d probes not acknowledged)",
			pct(r.known, 50), pct(r.known, 100), r.unknown)
	}
	if len(r.toldAfter) > 0 {
		fmt.Fprintf(&b, "; lost holds told (%d by a renewal, the others by the hold tracker) after the promoted node answered: p50 %v p99 %v max %v (%d)",
			r.byRenewal, pct(r.toldAfter, 50), pct(r.toldAfter, 99), pct(r.toldAfter, 100), len(r.toldAfter))
	}
	if len(r.toldNamed) > 0 {
		fmt.Fprintf(&b, "; after a Sentinel named it: p50 %v p99 %v max %v",
			pct(r.toldNamed, 50), pct(r.toldNamed, 99), pct(r.toldNamed, 100))
	}
	return b.String()
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)].Round(100 * time.Microsecond)
}

// kept is a hold kept across failovers, to check the watchdog.
type kept struct {
	kind string
	h    hold
	at   time.Time
}

// rounds runs n failovers of a Sentinel deployment: each round the first
// holder takes every kind on fresh names while the replica lags by
// linkDelay, a waiter queues on the reentrant lock, the primary crashes
// (losing what the link still carried), and once the replica is promoted
// the second holder makes one attempt on each kind.
func rounds(t *testing.T, d deployment, mode lualock.ReplicaAck, n int) result {
	tr := newTrace()
	client := func(hook redis.Hook) *lualock.Client {
		rdb := d.client(t)
		if hook != nil {
			hooked(rdb, hook)
		}
		return backends.NewClient(t, rdb, lualock.Options{ReplicaAck: mode, WatchdogLease: lease})
	}
	h1, h2, w := client(tr), client(nil), client(nil)
	raw := d.client(t)

	r := result{test: t.Name(), mode: mode, rounds: n, overlaps: map[string]int{}, lost: map[string]int{}, told: map[string]int{}}
	ks := kinds()
	var keep []kept
	for round := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		tag := roundTag(t.Name(), round)
		names := make([]string, len(ks))
		for i, k := range ks {
			names[i] = tag + ":" + k.name
			if k.setup != nil {
				if err := k.setup(ctx, h1, names[i]); err != nil {
					t.Fatalf("round %d: %s setup: %v", round, k.name, err)
				}
			}
		}
		// The set-up (the semaphores' permits) is on the replica before
		// the link lags: only the acquisitions are in the window.
		replicated(t, ctx, raw, tag+":barrier")
		if mode != lualock.ReplicaAckOff {
			knowsReplica(t, ctx, &r, h1, tr, tag+":probe", d.replicas(mode))
		}
		// The primary to crash and the watch of its promotion are found
		// before the acquisitions, so that the crash follows them at once:
		// asking every node takes long enough on a loaded machine for the
		// first acquisitions to reach the replica despite the lag.
		old, err := d.primary(ctx, names[0])
		if err != nil {
			t.Fatal(err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		watch := d.watch(pctx, old)
		lag := linkDelay
		if mode == lualock.ReplicaAckOff {
			lag = linkDelayOff
		}
		d.setLinkDelay(lag)
		tr.mark(fmt.Sprintf("round %d: take", round))
		holds := make([]hold, len(ks))
		ended := make([]time.Time, len(ks)) // when each hold's Context ended
		endedC := make([]chan struct{}, len(ks))
		wl := w.NewLock(names[0]) // a waiter on the reentrant lock
		woken := make(chan error, 1)
		for i, k := range ks {
			start := time.Now()
			h, err := k.take(ctx, h1, names[i])
			if err != nil {
				t.Fatalf("round %d: first holder, %s: %v", round, k.name, err)
			}
			r.acquire = append(r.acquire, time.Since(start))
			holds[i] = h
			if h.ctx != nil {
				endedC[i] = make(chan struct{})
				context.AfterFunc(h.ctx, func() { ended[i] = time.Now(); close(endedC[i]) })
			}
			if i == 0 {
				// The waiter queues on the old primary while the
				// others are taken.
				go func() { woken <- wl.Lock(ctx) }()
			}
		}
		subscribedOn(t, ctx, d, keys.Of(names[0]).Channel)
		tr.mark("taken")
		if mode != lualock.ReplicaAckOff {
			if ev, n := tr.cut(); n < len(ks) {
				t.Logf("round %d: %d WAITs for %d acquisitions:\n%s", round, n, len(ks), ev)
			}
		}

		crash := time.Now()
		tr.mark("crash " + old.Addr())
		d.crash(old)
		d.setLinkDelay(0)
		promoted, err := d.promoted(ctx, old, names[0])
		if err != nil {
			t.Fatal(err)
		}
		answered, named := watch.when()
		pcancel()
		r.failovers = append(r.failovers, time.Since(crash))
		tr.mark("promoted " + promoted.Addr())

		// The second holder, once on the new primary.
		var probes []hold
		lost := map[int]bool{}
		for i, k := range ks {
			h, ok := probe(t, ctx, k, h2, names[i])
			if !ok {
				// The reentrant lock (i == 0) has a waiter of another
				// client, which may take a lost hold on the new primary
				// before the probe tries: the hold is lost all the same
				// when the first holder's field is not there any more
				// (its holder is then told, below).
				if i == 0 && !stillHeld(t, ctx, promoted, names[i], holds[i].field) {
					lost[i] = true
					r.lost[k.name]++
					if holds[i].ctx.Err() == nil {
						r.overlaps[k.name]++
					}
				}
				continue
			}
			probes = append(probes, h)
			lost[i] = true
			r.lost[k.name]++
			if holds[i].ctx == nil || holds[i].ctx.Err() == nil {
				r.overlaps[k.name]++
			}
			if k.name == "fenced" && h.token <= holds[i].token {
				r.sameToken++
			}
		}
		// The first holders of what was lost are told (at the next
		// renewal: within a third of the lease once Redis answers).
		for i, k := range ks {
			if holds[i].ctx == nil || !lost[i] {
				continue
			}
			select {
			case <-endedC[i]:
				if cause := context.Cause(holds[i].ctx); !errors.Is(cause, lualock.ErrLockLost) {
					t.Errorf("round %d: %s: the lost hold ended with %v, want ErrLockLost", round, k.name, cause)
				} else {
					r.told[k.name]++
					if strings.Contains(cause.Error(), "the renewal found it gone") { // the watchdog's, not the tracker's
						r.byRenewal++
					}
					if !answered.IsZero() {
						r.toldAfter = append(r.toldAfter, ended[i].Sub(answered))
					}
					if !named.IsZero() {
						r.toldNamed = append(r.toldNamed, ended[i].Sub(named))
					}
				}
			case <-time.After(2 * lease):
				t.Errorf("round %d: %s: the first holder was not told of its lost hold within %v", round, k.name, 2*lease)
			}
		}
		for _, h := range probes {
			if err := settled(ctx, h.release); err != nil {
				t.Errorf("round %d: second holder's release: %v", round, err)
			}
		}

		tr.mark("rejoin")
		if err := d.rejoin(ctx, old, promoted); err != nil {
			t.Fatal(err)
		}
		tr.mark("stable")

		// The waiter: with acknowledgement the reentrant hold survived and
		// the waiter waits on the new primary until its release wakes it.
		if mode != lualock.ReplicaAckOff {
			select {
			case err := <-woken:
				t.Fatalf("round %d: the waiter returned (%v) while the first holder holds (its hold's Context: %v; this round's acquisitions took %v)",
					round, err, context.Cause(holds[0].ctx), r.acquire[len(r.acquire)-len(ks):])
			default:
			}
			// It follows the new primary: subscribed there or on one of
			// its replicas (a release published on the primary reaches
			// those too) before the release, and given as long again as
			// the rounds always gave it (settle) to have done so.
			subscribedOn(t, ctx, d, keys.Of(names[0]).Channel)
			time.Sleep(settle)
			if err := settled(ctx, holds[0].release); err != nil {
				t.Fatalf("round %d: first holder's reentrant release: %v", round, err)
			}
			select {
			case err := <-woken:
				if err != nil {
					t.Fatalf("round %d: waiter: %v", round, err)
				}
			case <-time.After(wokenWithin):
				t.Fatalf("round %d: the waiter was not woken within %v of the release on the new primary", round, wokenWithin)
			}
		} else {
			_ = holds[0].release(ctx)
			if err := <-woken; err != nil {
				t.Fatalf("round %d: waiter: %v", round, err)
			}
		}
		if err := settled(ctx, wl.Unlock); err != nil {
			t.Fatalf("round %d: waiter's release: %v", round, err)
		}

		// The watchdog: the holds taken more than a lease ago (one or more
		// failovers since) are still held, and their Contexts live.
		if mode == lualock.ReplicaAckOff {
			for _, h := range holds[1:] {
				_ = h.release(ctx)
			}
		} else {
			for i, h := range holds[1:] {
				keep = append(keep, kept{kind: ks[i+1].name, h: h, at: time.Now()})
			}
			if round == n-1 {
				time.Sleep(time.Until(keep[len(keep)-1].at.Add(lease + time.Second)))
			}
			keep = renewed(t, ctx, &r, keep)
		}
		cancel()
	}
	return r
}

// knowsReplica returns once an acquisition by c on name (a probe, given
// back) sent WAIT for at least want replicas and they acknowledged it: c
// knows its primary's replicas, so the round's acquisitions wait for them.
// A promoted primary has none until the old one rejoins it, and a client
// reads the counts in the background (docs/GUIDE.md, Failover): the round
// judges the acknowledgement, not how soon a client reads a count.
func knowsReplica(t *testing.T, ctx context.Context, r *result, c *lualock.Client, tr *trace, name string, want int64) {
	t.Helper()
	l := c.NewLock(name)
	for start := time.Now(); ; r.unknown++ {
		before, _, _ := tr.lastWait()
		err := l.Lock(ctx)
		if err == nil {
			err = settled(ctx, l.Unlock)
		}
		if err != nil && !errors.Is(err, lualock.ErrNotReplicated) {
			t.Fatalf("probe acquisition: %v", err)
		}
		if sent, asked, got := tr.lastWait(); err == nil && sent > before && asked >= want && got >= want {
			r.known = append(r.known, time.Since(start))
			return
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no acquisition acknowledged by %d replicas within %v of the deployment being stable", want, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscribedOn waits until a client subscribes to channel (plain or
// sharded pub/sub) on a node of d that runs (the primary that serves it,
// or a replica, which a release published on the primary reaches too),
// for up to followWithin; it fails the test with the subscriptions of
// every node otherwise.
func subscribedOn(t *testing.T, ctx context.Context, d deployment, channel string) {
	t.Helper()
	count := func(n *harness.Node) (int64, error) {
		rdb := n.Server.Client(func(o *redis.Options) { o.MaintNotificationsConfig = harness.NoMaintNotifications() })
		defer rdb.Close()
		plain, sharded, err := harness.NumSub(ctx, rdb, channel)
		return plain + sharded, err
	}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		for _, n := range d.nodes() {
			if c, err := count(n); err == nil && c > 0 {
				return
			}
		}
		if time.Since(start) > followWithin {
			var where []string
			for _, n := range d.nodes() {
				c, err := count(n)
				where = append(where, fmt.Sprintf("%s: %d (%v)", n.Addr(), c, err))
			}
			t.Fatalf("the waiter did not subscribe to %s within %v; subscribers per node: %s",
				channel, followWithin, strings.Join(where, ", "))
		}
	}
}

// renewed checks the kept holds taken more than a lease ago: still held,
// their Contexts live; it releases them and returns the others.
func renewed(t *testing.T, ctx context.Context, r *result, keep []kept) []kept {
	t.Helper()
	var left []kept
	for _, k := range keep {
		if time.Since(k.at) <= lease {
			left = append(left, k)
			continue
		}
		if k.h.ctx != nil && k.h.ctx.Err() != nil {
			t.Errorf("%s: an acknowledged hold ended: %v", k.kind, context.Cause(k.h.ctx))
		} else if k.h.held != nil {
			var ok bool
			err := settled(ctx, func(ctx context.Context) (err error) {
				ok, err = k.h.held(ctx)
				return err
			})
			if err != nil || !ok {
				t.Errorf("%s: an acknowledged hold is not held a lease later: %v, %v", k.kind, ok, err)
			} else {
				r.renewed++
			}
		}
		if err := settled(ctx, k.h.release); err != nil {
			t.Errorf("%s: release a lease later: %v", k.kind, err)
		}
	}
	return left
}

// settled runs f again, for up to 10s, while it fails with READONLY or
// NOSCRIPT: after a failover, go-redis's failover client may still send a
// call or two on a connection to the old primary's address, now a replica,
// which a release's own retries (three, within 100ms) do not outlast.
func settled(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f(ctx)
		if err == nil || time.Now().After(deadline) ||
			!strings.Contains(err.Error(), "READONLY") && !strings.Contains(err.Error(), "NOSCRIPT") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probe makes the second holder's attempt on k once the new primary
// answers: ok when it obtained what the first holder took.
func probe(t *testing.T, ctx context.Context, k kind, c *lualock.Client, name string) (hold, bool) {
	t.Helper()
	for {
		// Each attempt bounded on its own: one sent to the crashed
		// primary before the client saw the failover may hang until its
		// context ends.
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, err := k.probe(actx, c, name)
		cancel()
		switch {
		case err == nil:
			return h, true
		case errors.Is(err, lualock.ErrNotObtained):
			return h, false
		case ctx.Err() != nil:
			t.Fatalf("second holder, %s: %v", k.name, err)
		}
		time.Sleep(20 * time.Millisecond) // Redis not there yet (ErrUnavailable, a transient error)
	}
}

// stillHeld reports whether the first holder's field is in the lock's
// hash on the promoted primary, read there directly: the first holder's
// own cluster client may still send to the crashed master.
func stillHeld(t *testing.T, ctx context.Context, promoted *harness.Node, key, field string) bool {
	t.Helper()
	rdb := promoted.Server.Client(func(o *redis.Options) { o.MaintNotificationsConfig = harness.NoMaintNotifications() })
	defer rdb.Close()
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		in, err := rdb.HExists(actx, key, field).Result()
		cancel()
		switch {
		case err == nil:
			return in
		case ctx.Err() != nil:
			t.Fatalf("reading the first holder's field of %s on %s: %v", key, promoted.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replicated waits until the replica has everything written so far: a
// write, then WAIT on its connection (the replication stream is ordered,
// so what came before is there too).
func replicated(t *testing.T, ctx context.Context, rdb redis.UniversalClient, key string) {
	t.Helper()
	for {
		err := barrier(ctx, rdb, key)
		if err == nil {
			return
		}
		if !redis.HasErrorPrefix(err, "MOVED") || ctx.Err() != nil {
			t.Fatalf("the replica did not catch up: %v", err)
		}
		// The cluster client's view predates the last failover.
		rdb.(*redis.ClusterClient).ReloadState(ctx)
		time.Sleep(50 * time.Millisecond)
	}
}

// barrier writes key on its primary and waits until a replica has it.
func barrier(ctx context.Context, rdb redis.UniversalClient, key string) error {
	var node *redis.Client
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		var err error
		if node, err = c.MasterForKey(ctx, key); err != nil {
			return err
		}
	case *redis.Client:
		node = c
	}
	conn := node.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, key, time.Now().UnixNano(), time.Minute).Err(); err != nil {
		return err
	}
	if n, err := conn.Wait(ctx, 1, 10*time.Second).Result(); err != nil || n < 1 {
		return fmt.Errorf("WAIT %d, %v", n, err)
	}
	return nil
}
