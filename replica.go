package lualock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replica acknowledgement (Options.ReplicaAck): after an acquisition
// succeeds, the primary that ran its script is asked with WAIT to confirm
// that its replicas have the write, so that a failover promoting one of
// them keeps the hold. WAIT counts the writes of its own connection only:
// the acquire script of a replicated primary runs on a connection pinned
// for the attempt (ackPin), and WAIT follows on the same one. Which
// primaries have replicas is read with INFO replication and cached per
// primary for replicaRefresh; a primary without replicas costs nothing.
// docs/GUIDE.md (Failover) says what this buys and what it does not.

// ReplicaAck chooses whether an acquisition waits for the replicas of the
// primary that took it (Options.ReplicaAck): at least one (the default),
// all the replicas the primary has connected, or none.
type ReplicaAck int

const (
	// ReplicaAckOne, the default, waits until at least one replica has
	// the acquisition (WAIT 1), as Redisson does with its default
	// checkLockSyncedSlaves.
	ReplicaAckOne ReplicaAck = iota
	// ReplicaAckAll waits until every replica the primary has connected
	// has the acquisition.
	ReplicaAckAll
	// ReplicaAckOff never waits: a failover may lose a hold taken just
	// before it (replication is asynchronous).
	ReplicaAckOff
)

var replicaAckNames = [...]string{ReplicaAckOne: "one", ReplicaAckAll: "all", ReplicaAckOff: "off"}

// String returns the mode's name: one, all or off.
func (m ReplicaAck) String() string {
	if m >= 0 && int(m) < len(replicaAckNames) {
		return replicaAckNames[m]
	}
	return fmt.Sprintf("ReplicaAck(%d)", int(m))
}

// MarshalText returns the mode's name, as String.
func (m ReplicaAck) MarshalText() ([]byte, error) {
	if m < 0 || int(m) >= len(replicaAckNames) {
		return nil, fmt.Errorf("%w: unknown ReplicaAck %d", ErrInvalid, int(m))
	}
	return []byte(replicaAckNames[m]), nil
}

// UnmarshalText sets m from a name: one, all or off (ASCII case ignored).
// Any other text is ErrInvalid.
func (m *ReplicaAck) UnmarshalText(text []byte) error {
	for i, n := range replicaAckNames {
		if strings.EqualFold(string(text), n) {
			*m = ReplicaAck(i)
			return nil
		}
	}
	return fmt.Errorf("%w: replica acknowledgement %q, want one, all or off", ErrInvalid, text)
}

// replicaRefresh is how often every known primary's replica count is read
// again, in the background (off the acquisitions' path): a replica that
// joins a primary is waited for from the next read on.
const replicaRefresh = time.Second

// replicaFast is how often a primary is read instead while a replica is
// expected to (re)join it: a read found none on a client that has seen
// replicas, after a failover (a new replication id, or a primary new to
// the client) or after the replicas left. replicaFastFor bounds that, from
// the read that started it: at most replicaFastFor/replicaFast reads more
// per such event and primary, none on a deployment that never had replicas.
const (
	replicaFast    = 100 * time.Millisecond
	replicaFastFor = 30 * time.Second
)

// replicaSticky is how long a primary that had replicas connected is
// still waited for after a read finds none (a replica reconnecting, as
// after a Sentinel reconfigures it): WAIT then waits for it to come back,
// and only when it does not within the timeout and the primary still has
// none is the acquisition taken unacknowledged. A new replication id (a
// promotion) starts the history over.
const replicaSticky = 10 * time.Second

// replicaTrust is how long a count read is used: past it (the refresher's
// reads failing or late), an acquisition reads the count itself, on the
// connection its script runs on.
const replicaTrust = replicaRefresh * 3 / 2

// replicaAck is a Client's replica acknowledgement: the setting and the
// replica count of each primary seen.
type replicaAck struct {
	c       *Client
	mode    ReplicaAck
	timeout time.Duration

	start sync.Once // the refresher, at the first primary seen
	mu    sync.Mutex
	nodes map[string]*nodeReplicas // by primary address; "" for a non-cluster client
	had   bool                     // a read found replicas on some primary (under mu)
	// quietUntil (unix ns): until then every primary seen has no replica,
	// so an attempt needs no pinned connection.
	quietUntil atomic.Int64
}

// nodeReplicas is one primary's replica count.
type nodeReplicas struct {
	c     *redis.Client // the primary's client
	n     atomic.Int64  // the replicas to wait for (see store)
	at    atomic.Int64  // unix ns of the last read; 0: never read
	tried atomic.Int64  // unix ns of the refresher's last read, failed or not
	first sync.Once     // the first read (see replicaAck.first)

	// Under replicaAck.mu: the replication history the count keeps.
	replid string    // the primary's replication id at the last read
	peak   int64     // the most replicas read since replid began
	seen   time.Time // when a read last found replicas connected
	last   int64     // the replicas the last read found (-1: never read)
	fast   time.Time // until then the refresher reads it every replicaFast
}

// newReplicaAck returns the client's acknowledgement, or nil when it is
// off or rdb cannot pin a connection (neither a *redis.Client, failover
// included, nor a *redis.ClusterClient).
func newReplicaAck(c *Client) *replicaAck {
	if c.cfg.ReplicaAck == ReplicaAckOff {
		return nil
	}
	switch c.rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		return nil
	}
	return &replicaAck{c: c, mode: c.cfg.ReplicaAck, timeout: c.cfg.ReplicaAckTimeout, nodes: map[string]*nodeReplicas{}}
}

// ackKey is the context key of an attempt's ackPin.
type ackKey struct{}

// ackPin is the connection one attempt's acquire script ran on, when its
// primary has replicas, and that primary's count.
type ackPin struct {
	r    *replicaAck
	conn *redis.Conn
	node *nodeReplicas
	n    int64 // the primary's replicas when the script was sent
}

// begin prepares an attempt: the context its acquire script is sent
// under, and the pin that script's primary fills (nil when no primary has
// replicas: no allocation, no pinned connection). Call end when the
// attempt is over.
func (r *replicaAck) begin(ctx context.Context) (context.Context, *ackPin) {
	if r == nil || time.Now().UnixNano() < r.quietUntil.Load() {
		return ctx, nil
	}
	p := &ackPin{r: r}
	return context.WithValue(ctx, ackKey{}, p), p
}

// end gives the pinned connection back to the pool.
func (p *ackPin) end() {
	if p != nil && p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
}

// wait asks the primary whose connection ran the acquisition to confirm
// that its replicas have it. nil: confirmed, or nothing to wait for. An
// error wrapping ErrNotReplicated: not confirmed, the caller undoes the
// acquisition. Another error: WAIT got no reply (its connection failed),
// so whether the replicas have it is unknown: the caller treats it as an
// attempt whose reply was lost (a lock's next attempt replays it, which
// writes its lease again, and waits again; a semaphore gives its permits
// back and tries anew).
func (p *ackPin) wait(ctx context.Context) error {
	if p == nil || p.conn == nil {
		return nil
	}
	want := int64(1)
	if p.r.mode == ReplicaAckAll {
		want = p.n
	}
	got, err := p.conn.Wait(ctx, int(want), p.r.timeout).Result()
	var rerr redis.Error
	switch {
	case err != nil && errors.As(err, &rerr):
		return fmt.Errorf("%w: WAIT %d: %w", ErrNotReplicated, want, err)
	case err != nil:
		return fmt.Errorf("WAIT %d: %w", want, err)
	}
	if got >= want {
		return nil
	}
	// Fewer than asked: the count may be out of date (a replica left, or
	// a failover put this client on a primary with fewer). Read it again
	// on the same primary: with none connected there is nothing to wait
	// for; otherwise the acquisition is not replicated.
	if n, replid, err := readReplicas(ctx, p.conn); err == nil {
		p.r.store(p.node, n, replid)
		if n == 0 || p.r.mode == ReplicaAckAll && got >= n {
			return nil
		}
	}
	return fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, got, want, p.r.timeout)
}

// conn returns the connection an acquire script with these keys must run
// on: the attempt's pinned connection to the primary of keys[0], when the
// context carries a pin and that primary has replicas; nil otherwise.
func (r *replicaAck) conn(ctx context.Context, keys []string) *redis.Conn {
	p, _ := ctx.Value(ackKey{}).(*ackPin)
	if p == nil || p.r != r {
		return nil
	}
	if p.conn != nil {
		return p.conn
	}
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	node, addr, err := r.primary(ctx, key)
	if err != nil {
		return nil // the call itself meets the error
	}
	nr := r.node(addr, node)
	if nr.at.Load() == 0 {
		nr.first.Do(func() { r.first(ctx, nr) })
	}
	if at := nr.at.Load(); at != 0 && time.Since(time.Unix(0, at)) <= replicaTrust {
		if p.n = nr.n.Load(); p.n <= 0 {
			return nil
		}
		p.node, p.conn = nr, node.Conn()
		return p.conn
	}
	// Never read, or the refresher's reads fail (its connections may
	// reach a primary demoted by a failover): read the count on the
	// connection the script will run on, which is the node that answers
	// for the key. A failed read counts one replica: WAIT then says.
	p.node, p.conn = nr, node.Conn()
	n, replid, err := readReplicas(ctx, p.conn)
	switch {
	case err != nil && isRedisError(err):
		// Redis refused INFO replication (an emulator such as
		// miniredis): it reports no replication, so no replicas.
		n, replid = 0, ""
	case err != nil:
		p.n = 1
		return p.conn
	}
	r.store(nr, n, replid)
	if p.n = nr.n.Load(); p.n <= 0 {
		p.end()
		return nil
	}
	return p.conn
}

// first reads the count of a primary never read, once, on its client's
// pool, while the other attempts on it wait: then they need no read of
// their own (nor, when it has no replica, a pinned connection), and no
// two connections pinned at once are the first to set up go-redis's
// handshake, which writes the options they share (docs/GUIDE.md,
// Failover). A failed read leaves it to each attempt, as a count no
// longer trusted.
func (r *replicaAck) first(ctx context.Context, nr *nodeReplicas) {
	n, replid, err := readReplicas(ctx, nr.c)
	switch {
	case err != nil && isRedisError(err):
		r.store(nr, 0, "") // INFO replication refused (an emulator): no replicas
	case err == nil:
		r.store(nr, n, replid)
	}
}

// primary returns the client of the primary that serves key, and its
// address ("" for a non-cluster client).
func (r *replicaAck) primary(ctx context.Context, key string) (*redis.Client, string, error) {
	switch rdb := r.c.rdb.(type) {
	case *redis.ClusterClient:
		n, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			return nil, "", err
		}
		return n, n.Options().Addr, nil
	case *redis.Client:
		return rdb, "", nil
	}
	return nil, "", fmt.Errorf("%w: no primary client for %T", ErrInvalid, r.c.rdb)
}

// node returns the count of the primary at addr, made on first use; the
// first one starts the refresher.
func (r *replicaAck) node(addr string, c *redis.Client) *nodeReplicas {
	r.mu.Lock()
	defer r.mu.Unlock()
	nr := r.nodes[addr]
	if nr == nil {
		nr = &nodeReplicas{c: c, last: -1}
		r.nodes[addr] = nr
		r.start.Do(func() { r.c.background(r.refresh) })
	}
	return nr
}

// refresh reads every known primary's count every replicaRefresh until the
// client closes, and the primaries in fast mode (nodeReplicas.fast) every
// replicaFast: the counts are never older than that (plus an INFO's round
// trip), and no acquisition waits for a read.
func (r *replicaAck) refresh() {
	t := time.NewTimer(replicaRefresh)
	defer t.Stop()
	full := time.Now().Add(replicaRefresh) // the next read of every primary
	for {
		select {
		case <-r.c.ctx.Done():
			return
		case <-t.C:
		}
		if now := time.Now(); !now.Before(full) {
			full = now.Add(replicaRefresh)
			ctx, cancel := context.WithTimeout(r.c.ctx, replicaRefresh)
			if cc, ok := r.c.rdb.(*redis.ClusterClient); ok {
				r.refreshCluster(ctx, cc)
			} else {
				r.read(ctx, r.node("", r.c.rdb.(*redis.Client)))
			}
			cancel()
		} else {
			ctx, cancel := context.WithTimeout(r.c.ctx, replicaRefresh)
			for _, nr := range r.fastNodes(now) {
				r.read(ctx, nr)
			}
			cancel()
		}
		t.Reset(r.next(time.Now(), full))
	}
}

// read reads nr's count, unless a read found it has no replication.
func (r *replicaAck) read(ctx context.Context, nr *nodeReplicas) {
	if r.emulated(nr) {
		return
	}
	nr.tried.Store(time.Now().UnixNano())
	if n, replid, err := readReplicas(ctx, nr.c); err == nil {
		r.store(nr, n, replid)
	}
}

// lastTry is when the refresher last read nr, or anything stored its
// count, whichever is later.
func (nr *nodeReplicas) lastTry() time.Time {
	return time.Unix(0, max(nr.at.Load(), nr.tried.Load()))
}

// fastNodes returns the primaries in fast mode whose last read (failed or
// not) is replicaFast old.
func (r *replicaAck) fastNodes(now time.Time) []*nodeReplicas {
	r.mu.Lock()
	defer r.mu.Unlock()
	var due []*nodeReplicas
	for _, nr := range r.nodes {
		if now.Before(nr.fast) && now.Sub(nr.lastTry()) >= replicaFast {
			due = append(due, nr)
		}
	}
	return due
}

// next returns how long the refresher sleeps: until the next read of
// every primary (full), or the next fast read, if sooner.
func (r *replicaAck) next(now, full time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := full
	for _, nr := range r.nodes {
		if now.Before(nr.fast) {
			at = minTime(at, nr.lastTry().Add(replicaFast))
		}
	}
	return max(at.Sub(now), time.Millisecond)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// refreshCluster reads the count of every master of the cluster client's
// current view, and forgets the nodes that are no masters any more (a
// master demoted by a failover reports no replicas, which must not make
// the client think every primary has none).
func (r *replicaAck) refreshCluster(ctx context.Context, cc *redis.ClusterClient) {
	var mu sync.Mutex
	masters := map[string]bool{}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		addr := m.Options().Addr
		mu.Lock()
		masters[addr] = true
		mu.Unlock()
		r.read(ctx, r.node(addr, m))
		return nil
	})
	if err != nil {
		return
	}
	r.mu.Lock()
	for addr := range r.nodes {
		if !masters[addr] {
			delete(r.nodes, addr)
		}
	}
	r.mu.Unlock()
}

// emulated reports whether a read found that the primary has no
// replication at all (no replication id: an emulator such as miniredis,
// which refuses INFO replication or has no such section): it never gets
// replicas, so the refresher reads it no more.
func (r *replicaAck) emulated(nr *nodeReplicas) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return nr.at.Load() != 0 && nr.replid == ""
}

// store records a primary's count just read (n connected replicas under
// replication id replid), and whether every primary seen is now without
// replicas (then attempts need no pin until the oldest count is no longer
// trusted). The count to wait for is n, or, when n fell, the most replicas
// the primary had since its replication id began and within replicaSticky.
func (r *replicaAck) store(nr *nodeReplicas, n int64, replid string) {
	if nr == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	// Fast reads start when a read finds no replica where one is expected
	// soon, on a client that has seen replicas: a primary read for the
	// first time, under a new replication id, or that had replicas at the
	// last read. They end when a replica is read, or after replicaFastFor.
	switch {
	case n > 0:
		nr.fast = time.Time{}
	case r.had && (nr.last != 0 || replid != nr.replid):
		nr.fast = now.Add(replicaFastFor)
	}
	if replid != nr.replid {
		nr.replid, nr.peak = replid, 0
	}
	if n > 0 {
		nr.seen, r.had = now, true
	}
	nr.last = n
	if n >= nr.peak || now.Sub(nr.seen) > replicaSticky {
		nr.peak = n
	}
	nr.n.Store(nr.peak)
	nr.at.Store(now.UnixNano())
	oldest := int64(0)
	for _, x := range r.nodes {
		if x.n.Load() != 0 || x.at.Load() == 0 {
			r.quietUntil.Store(0)
			return
		}
		if at := x.at.Load(); oldest == 0 || at < oldest {
			oldest = at
		}
	}
	// Past the trust in the oldest count, attempts pin again until the
	// next read: a primary may have gained a replica.
	r.quietUntil.Store(oldest + int64(replicaTrust))
}

// readReplicas returns the replicas connected to the primary c talks to
// (INFO replication's connected_slaves). A node that answers as a replica
// is an error: a connection still open to a primary demoted by a failover
// would otherwise report none, and the acquisitions would stop waiting.
func readReplicas(ctx context.Context, c redis.Cmdable) (n int64, replid string, err error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, "", err
	}
	role := ""
	n = -1
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "role:"); ok {
			role = v
		}
		if v, ok := strings.CutPrefix(line, "master_replid:"); ok {
			replid = v
		}
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, "", err
			}
		}
	}
	switch {
	case role == "" && n < 0:
		return 0, "", nil // no replication section (an emulator such as miniredis): no replicas
	case role != "master" || n < 0:
		return 0, "", fmt.Errorf("INFO replication: role %q, connected_slaves %d: not a primary", role, n)
	}
	return n, replid, nil
}

// ackScripter runs the acquire scripts: on the attempt's pinned connection
// when their primary has replicas (ackPin), on the scripter under it
// otherwise. A script loaded after NOSCRIPT loads on the same connection.
type ackScripter struct {
	redis.Scripter
	r *replicaAck
}

// EvalSha runs on the pinned connection, if any.
func (s *ackScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	if c := s.r.conn(ctx, keys); c != nil {
		return s.moved(ctx, c.EvalSha(ctx, sha1, keys, args...))
	}
	return s.Scripter.EvalSha(ctx, sha1, keys, args...)
}

// EvalShaRO runs on the pinned connection, if any.
func (s *ackScripter) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	if c := s.r.conn(ctx, keys); c != nil {
		return s.moved(ctx, c.EvalShaRO(ctx, sha1, keys, args...))
	}
	return s.Scripter.EvalShaRO(ctx, sha1, keys, args...)
}

// Eval runs on the pinned connection, if any.
func (s *ackScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if c := s.r.conn(ctx, keys); c != nil {
		return s.moved(ctx, c.Eval(ctx, script, keys, args...))
	}
	return s.Scripter.Eval(ctx, script, keys, args...)
}

// EvalRO runs on the pinned connection, if any.
func (s *ackScripter) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if c := s.r.conn(ctx, keys); c != nil {
		return s.moved(ctx, c.EvalRO(ctx, script, keys, args...))
	}
	return s.Scripter.EvalRO(ctx, script, keys, args...)
}

// ScriptLoad loads on the pinned connection once a script ran there (the
// NOSCRIPT recovery), under the scripter otherwise.
func (s *ackScripter) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	if p, _ := ctx.Value(ackKey{}).(*ackPin); p != nil && p.conn != nil {
		return p.conn.ScriptLoad(ctx, script)
	}
	return s.Scripter.ScriptLoad(ctx, script)
}

// moved turns a cluster redirection met on a pinned connection (the slot
// moved since the client's last view of the cluster) into a TRYAGAIN the
// engine retries, after asking the cluster client to reload its view.
func (s *ackScripter) moved(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	err := cmd.Err()
	if err == nil || !redis.HasErrorPrefix(err, "MOVED") && !redis.HasErrorPrefix(err, "ASK") {
		return cmd
	}
	if cc, ok := s.r.c.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
	cmd.SetErr(redirected(err.Error()))
	return cmd
}

// redirected is a cluster redirection on a pinned connection, as a Redis
// error the acquisition loop retries (luart.Transient: TRYAGAIN).
type redirected string

func (e redirected) Error() string { return "TRYAGAIN slot redirected: " + string(e) }

// RedisError marks e as Redis's reply: the script did not run there.
func (redirected) RedisError() {}
