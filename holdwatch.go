package lualock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
	"github.com/lualock/lualock/internal/keys"
	"github.com/lualock/lualock/internal/renew"
	"github.com/lualock/lualock/internal/track"
)

// Every hold (a lock's, write or read, and a permit) is watched by the
// client's hold tracker (internal/track) unless Options.NoHoldTracking:
// Redis announces any change of the key on the tracker's connection
// (client-side caching), the tracker checks the hold there, and a hold
// found gone ends its Context with ErrLockLost within milliseconds,
// whatever removed it. The watchdog renews a watched hold on the tracker's
// connection to its node (trackRelay), which has NOLOOP: its own renewals
// wake no check. See docs/GUIDE.md (Losing a lock).

// The tracker's checks, one per kind of key (lua/hold_check.lua,
// lua/permit_check.lua).
var (
	holdCheck   = &track.Spec{Name: "hold_check", SHA1: generated.HoldCheckSHA1, Source: generated.HoldCheckScript.Source}
	permitCheck = &track.Spec{Name: "permit_check", SHA1: generated.PermitCheckSHA1, Source: generated.PermitCheckScript.Source}
)

// The renewal scripts as the tracker loads them on its connections.
var (
	lockRenewTracked   = &track.Spec{Name: "lock_renew", SHA1: generated.LockRenewSHA1, Source: generated.LockRenewScript.Source}
	rwReadRenewTracked = &track.Spec{Name: "rwlock_read_renew", SHA1: generated.RwlockReadRenewSHA1, Source: generated.RwlockReadRenewScript.Source}
	permitRenewTracked = &track.Spec{Name: "expirable_semaphore_renew", SHA1: generated.ExpirableSemaphoreRenewSHA1, Source: generated.ExpirableSemaphoreRenewScript.Source}
)

// trackRelay has the watchdog renew a watched hold on the tracker's
// connection to its node (renew.Relay): that connection tracks with
// NOLOOP, so the renewal announces nothing to it, and the keys are read
// again after the writes (rearm; for a larger call the tracker's EXISTS
// in a MULTI with it), which tracks them again (Redis forgets every
// tracker of a key that changes). A call for keys with no connection up
// (none yet, broken, a server without client-side caching) goes through
// the client: its change is then announced, and checked.
type trackRelay struct {
	t     *track.Tracker
	lease time.Duration // the watchdog's
	gate  *primaryGate  // behind Sentinel; nil: every connection carries
}

// primaryGate lets a renewal take the tracker's connection behind Sentinel
// only while it reaches the primary that go-redis's failover client uses.
// When Sentinel switches the primary, go-redis drops its connections to
// the old one, but the tracker's may stay up to it (a primary cut off
// from the Sentinels still answers as a primary): a renewal carried there
// would answer 1 while the new primary's copy of the lock runs out, and
// the holder would never be told. Each round first asks go-redis's client
// for INFO server, whose run_id names the server process it reached; a
// call is relayed only on a tracker connection to the same run_id (read
// at its handshake), and otherwise, or when either cannot be read, it
// goes through the client, as it did before there was a tracker.
type primaryGate struct {
	rdb *redis.Client

	mu     sync.Mutex
	server string // the run_id go-redis reached this round; "": relay nothing
}

// Round implements renew.Rounder.
func (g *primaryGate) Round(ctx context.Context) {
	server := ""
	if info, err := g.rdb.Info(ctx, "server").Result(); err == nil {
		server = track.RunID(info)
	}
	g.mu.Lock()
	g.server = server
	g.mu.Unlock()
}

// Round implements renew.Rounder.
func (r trackRelay) Round(ctx context.Context) {
	if r.gate != nil {
		r.gate.Round(ctx)
	}
}

// Send implements renew.Relay.
func (r trackRelay) Send(spec *renew.Spec, names, fields []string, cmd *redis.Cmd) renew.Relayed {
	if cmd.Err() != nil || len(names) == 0 {
		return nil // refused before sending: the client's call says why
	}
	script, check, key := lockRenewTracked, holdCheck, func(name string) string { return name }
	switch {
	case spec == rwReadRenewal:
		script = rwReadRenewTracked
	case spec.Name == permitRenewalName:
		script, check, key = permitRenewTracked, permitCheck, func(name string) string { return keys.Suffix(name, "timeout") }
	case spec != lockRenewal:
		return nil
	}
	renewed := make([]track.Target, len(names))
	for i, n := range names {
		renewed[i] = track.Target{Spec: check, Key: key(n), Field: fields[i]}
	}
	args := make([]string, len(cmd.Args()))
	for i, a := range cmd.Args() {
		switch a := a.(type) {
		case string:
			args[i] = a
		case []byte:
			args[i] = string(a)
		case bool:
			args[i] = "0"
			if a {
				args[i] = "1"
			}
		default:
			args[i] = fmt.Sprint(a)
		}
	}
	server := ""
	if r.gate != nil {
		r.gate.mu.Lock()
		server = r.gate.server
		r.gate.mu.Unlock()
		if server == "" {
			return nil
		}
	}
	reply, cancel := r.t.Relay(server, script, args, renewed, r.lease)
	if reply == nil {
		return nil
	}
	return &relayedCall{reply: reply, cancel: cancel, cmd: cmd}
}

// relayedCall is a renewal call sent on the tracker's connection
// (renew.Relayed).
type relayedCall struct {
	reply  <-chan track.Reply
	cancel func() bool
	cmd    *redis.Cmd
}

// Wait implements renew.Relayed.
func (c *relayedCall) Wait(ctx context.Context) bool {
	select {
	case rep := <-c.reply:
		if rep.Err != nil {
			c.cmd.SetErr(rep.Err)
		} else {
			c.cmd.SetVal(rep.Val)
		}
		return true
	case <-ctx.Done():
		c.cmd.SetErr(ctx.Err())
		return false
	}
}

// Cancel implements renew.Relayed.
func (c *relayedCall) Cancel() bool { return c.cancel() }

// newTracker returns the client's hold tracker, or nil when
// Options.NoHoldTracking is set or rdb is of a kind it cannot follow.
func newTracker(c *Client) *track.Tracker {
	if c.cfg.NoHoldTracking {
		return nil
	}
	cfg := track.Config{Batch: c.cfg.RenewBatch, Ping: c.cfg.WatchdogLease / 3}
	switch rdb := c.rdb.(type) {
	case *redis.Client:
		// A failover client's dialer finds the current primary itself.
		// Behind Sentinel the tracker also checks that it reached a
		// primary, and looks for a promoted replica on its own when the
		// primary is gone: Sentinel names it only after it has seen it
		// answer as a primary, up to a second later.
		opt := rdb.Options()
		d := track.Dialer{
			Addr: func(context.Context, string) (string, error) { return opt.Addr, nil },
			Dial: func(ctx context.Context, addr string) (net.Conn, error) { return opt.Dialer(ctx, opt.Network, addr) },
			Auth: auth(opt.Username, opt.Password, opt.CredentialsProvider, opt.CredentialsProviderContext),
			DB:   opt.DB,
		}
		if opt.Addr == failoverAddr {
			d.DialAddr = addrDialer(nil, opt.DialTimeout, opt.TLSConfig)
		}
		return track.New(d, cfg)
	case *redis.ClusterClient:
		opt := rdb.Options()
		cfg.Slot = keys.Slot
		p := &clusterPlacer{rdb: rdb, down: map[string]unreached{}}
		return track.New(track.Dialer{
			Addr:    p.addr,
			Dial:    addrDialer(opt.Dialer, opt.DialTimeout, opt.TLSConfig),
			Auth:    auth(opt.Username, opt.Password, opt.CredentialsProvider, opt.CredentialsProviderContext),
			Refresh: p.refresh,
		}, cfg)
	}
	return nil
}

// clusterPlacer finds the node of a key for the tracker on a cluster: the
// master of its slot in the cluster client's view, unless the tracker
// could not reach that master just now (Refresh): then a replica of that
// master, or another master when the view has none. A replica promoted by
// a failover serves the slot as soon as it has promoted itself, and
// answers the check at once; before, it refuses it (MOVED to the crashed
// master, or CLUSTERDOWN), and the tracker keeps the check there, asking
// the replica's ROLE every 2ms until it has promoted itself.
// The other masters learn of the promotion later (tens of milliseconds,
// by the cluster bus, refusing with CLUSTERDOWN meanwhile) and go-redis
// reloads its view at most every 200ms, so asking either instead cost
// that much. A check sent to a node that does not serve the slot is
// refused (it never reads the key there), so this costs the refusals
// only.
type clusterPlacer struct {
	rdb *redis.ClusterClient

	mu   sync.Mutex
	down map[string]unreached // by master address
}

// unreached is a master the tracker could not reach: when it last failed,
// its replicas (read once per outage from the CLUSTER NODES of the
// other masters, until one names some: go-redis's view lists a replica
// only once the cluster bus has carried a replication offset of it), the master its watches go to when
// it has none, and the next replica to ask.
type unreached struct {
	at       time.Time
	replicas []string
	other    string
	next     int
}

// unreachedFor is how long after the tracker's last failure to reach a
// master the placer sends its keys' checks elsewhere: longer than the
// tracker's retries (MaxBackoff), short enough that a master that answers
// again is used again at once.
const unreachedFor = 100 * time.Millisecond

// refresh records that the tracker could not reach addr, and asks the
// cluster client to reload its view.
func (p *clusterPlacer) refresh(ctx context.Context, addr string) {
	p.mu.Lock()
	for a, u := range p.down {
		if time.Since(u.at) > unreachedFor {
			delete(p.down, a)
		}
	}
	_, known := p.down[addr]
	p.mu.Unlock()
	// The other masters, asked at once (each within a second) for the
	// replicas of addr unless known: the cluster bus carries a node's role
	// to the others a little after it changed, so the first view (by
	// address) that names some is used.
	type view struct {
		addr     string
		replicas []string
	}
	var views []view
	var mu sync.Mutex
	_ = p.rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		a := c.Options().Addr
		if a == addr {
			return nil
		}
		var rs []string
		if !known {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			rs = replicasOf(rctx, c, addr)
			cancel()
		}
		mu.Lock()
		views = append(views, view{a, rs})
		mu.Unlock()
		return nil
	})
	slices.SortFunc(views, func(x, y view) int { return strings.Compare(x.addr, y.addr) })
	var other string
	var replicas []string
	for _, v := range views {
		if other == "" {
			other = v.addr
		}
		if len(replicas) == 0 {
			replicas = v.replicas
		}
	}
	p.mu.Lock()
	u, still := p.down[addr] // as addr left it: its rotation goes on
	if !still {
		u.replicas = replicas
	}
	u.at, u.other = time.Now(), other
	p.down[addr] = u
	p.mu.Unlock()
	p.rdb.ReloadState(ctx)
}

// replicasOf returns the addresses of the replicas of the master at addr,
// from c's CLUSTER NODES (none when it cannot be read).
func replicasOf(ctx context.Context, c *redis.Client, addr string) []string {
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil
	}
	id := ""
	type line struct{ addr, master string }
	var all []line
	for _, l := range strings.Split(nodes, "\n") {
		// <id> <ip:port@cport[,hostname]> <flags> <master id or -> ...
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		a, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		if a == addr && slices.Contains(flags, "master") {
			id = f[0] // not a stale entry of the same address
		}
		if slices.Contains(flags, "fail") || slices.Contains(flags, "noaddr") {
			continue
		}
		all = append(all, line{addr: a, master: f[3]})
	}
	var rs []string
	for _, l := range all {
		if id != "" && l.master == id {
			rs = append(rs, l.addr)
		}
	}
	return rs
}

func (p *clusterPlacer) addr(ctx context.Context, key string) (string, error) {
	m, err := p.rdb.MasterForKey(ctx, key)
	if err != nil {
		return "", err
	}
	addr := m.Options().Addr
	p.mu.Lock()
	u, ok := p.down[addr]
	if ok && len(u.replicas) > 0 {
		u.next++
		p.down[addr] = u
	}
	p.mu.Unlock()
	switch {
	case !ok || time.Since(u.at) > unreachedFor:
		return addr, nil
	case len(u.replicas) > 0:
		return u.replicas[u.next%len(u.replicas)], nil
	case u.other != "":
		return u.other, nil
	}
	return addr, nil
}

// auth returns the credentials of a go-redis client's options.
func auth(user, pass string, fn func() (string, string), ctxFn func(context.Context) (string, string, error)) func(context.Context) (string, string, error) {
	return func(ctx context.Context) (string, string, error) {
		switch {
		case ctxFn != nil:
			return ctxFn(ctx)
		case fn != nil:
			u, p := fn()
			return u, p, nil
		}
		return user, pass, nil
	}
}

// addrDialer dials a node at a given address as go-redis does: with the
// options' dialer when set, else over TCP (TLS when configured).
func addrDialer(dialer func(context.Context, string, string) (net.Conn, error), timeout time.Duration, tlsConfig *tls.Config) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if dialer != nil {
			return dialer(ctx, "tcp", addr)
		}
		d := &net.Dialer{Timeout: timeout}
		if d.Timeout == 0 {
			d.Timeout = 5 * time.Second
		}
		if tlsConfig != nil {
			return (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(ctx, "tcp", addr)
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// holdWatcher is a handle's watch by the tracker, added again for each
// of its holds (a hold costs no allocation); gen is the hold it watches.
type holdWatcher struct {
	gen   uint64
	watch track.Watch
	lost  func(gen uint64, how track.Loss) // Lock.watcherLost, bound once per handle
}

// watchHold has the tracker watch hold gen of l: its counting field in the
// lock's hash. It returns nil without a tracker. The hold's mutex is held,
// and the handle's previous watch has stopped.
func (c *Client) watchHold(l *Lock, gen uint64) *holdWatcher {
	if c.track == nil {
		return nil
	}
	w := &l.watcher
	if w.lost == nil {
		w.lost = l.watcherLost
	}
	w.gen = gen
	if !c.track.Add(&w.watch, track.Target{Spec: holdCheck, Key: l.name, Field: l.countField()}, gen, w.lost) {
		return nil // closed
	}
	return w
}

// stop ends the watch. The hold's mutex is held.
func (w *holdWatcher) stop() { w.watch.Stop() }

// watcherLost ends hold gen as lost, if it is still the one watched.
func (l *Lock) watcherLost(gen uint64, how track.Loss) {
	l.h.watcherLost(gen, lossCause(how, "lock"))
}

// lossCause is the cause of a hold the tracker found gone.
func lossCause(how track.Loss, what string) error {
	if how == track.Overwritten {
		return fmt.Errorf("%w: the %s's key was overwritten with another type while held", ErrLockLost, what)
	}
	return fmt.Errorf("%w: the %s was removed while held (deleted, expired, force-unlocked, flushed or lost by the server)", ErrLockLost, what)
}

// watchPermit has the tracker watch permit p until p ends. Its fixed
// lease running out, the one it was taken with or the one UpdateLease
// last set, is no loss: a finding once that lease's end is due ends the
// permit as its timer would (ErrNotHeld).
func (c *Client) watchPermit(p *Permit) *track.Watch {
	if c.track == nil {
		return nil
	}
	return c.track.Watch(track.Target{Spec: permitCheck, Key: p.s.timeouts, Field: string(p.id)}, func(how track.Loss) {
		p.mu.Lock()
		over, lease := p.life.leaseOver(), p.life.lease
		p.mu.Unlock()
		if over {
			// Its lease's end, which its timer (late on a busy machine)
			// has not reported yet: no loss.
			p.end(errPermitLeaseRanOut(lease))
			return
		}
		if p.released.Load() {
			// A check that was under way when Release stopped the watch:
			// the release's reply says how the permit ended.
			return
		}
		p.end(fmt.Errorf("permit %s: %w", p.ID(), lossCause(how, "permit")))
	})
}

// A waiter whose kind asks for it (protocol.watchKey: the read lock's)
// also hears of every change of the lock's key through the tracker, as if
// it were a release message on its channel: Redisson's downgrade (the
// write lock's holder takes the read lock, then releases the write lock)
// turns the hash to read mode and publishes nothing, and a waiting reader
// would otherwise find it only at its fallback timer. The waiters of one
// key on this client share one change watch (keyWatches), from the first
// one's subscription to the last one's end. Without the tracker
// (Options.NoHoldTracking, or a client it cannot follow) nothing is
// watched and the fallback timer stays the bound.

// keyWatches are the client's change watches, by lock key.
type keyWatches struct {
	mu sync.Mutex
	m  map[string]*keyWatch
}

// keyWatch is one key's change watch and the waiters that share it.
type keyWatch struct {
	key   string
	users int
	watch *track.Watch
}

// watchKey has the tracker wake channel's waiters at each change of key,
// until as many unwatchKey calls as watchKey calls have ended it. It
// returns nil without a tracker.
func (c *Client) watchKey(key, channel string) *keyWatch {
	if c.track == nil {
		return nil
	}
	ws := &c.kw
	ws.mu.Lock()
	defer ws.mu.Unlock()
	kw := ws.m[key]
	if kw == nil {
		// Any read of the key tracks it: the hold check of a field
		// (its reply is not read).
		w := c.track.WatchChange(track.Target{Spec: holdCheck, Key: key, Field: "mode"}, func() { c.hub.Wake(channel) })
		if w == nil {
			return nil // closed
		}
		kw = &keyWatch{key: key, watch: w}
		if ws.m == nil {
			ws.m = map[string]*keyWatch{}
		}
		ws.m[key] = kw
	}
	kw.users++
	return kw
}

// unwatchKey ends one waiter's use of kw (nil: none); the last one stops
// the watch.
func (c *Client) unwatchKey(kw *keyWatch) {
	if kw == nil {
		return
	}
	ws := &c.kw
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if kw.users--; kw.users == 0 {
		kw.watch.Stop()
		delete(ws.m, kw.key)
	}
}
