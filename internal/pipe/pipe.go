// Package pipe sends commands to one Redis server on connections of its
// own, pipelined: a call is written at once, by its own goroutine, while
// the replies of the calls before it are still on their way, and one
// reader per connection hands each reply to its call in order. A call
// alone costs one write and one read, as a pooled connection's would;
// concurrent calls share writes and reads with no wait for a batch to
// fill (docs/ARCHITECTURE.md, The scripts' transport).
package pipe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is how a Pipe reaches its server.
type Config struct {
	// Dial opens a connection to the server (TLS included, when used).
	Dial func(ctx context.Context) (net.Conn, error)
	// Auth returns the credentials of HELLO (none when both are empty).
	Auth func(ctx context.Context) (username, password string, err error)
	// DB is the database to SELECT (0: none); Protocol the RESP version
	// (2 or 3; 0: 3); Name the CLIENT SETNAME, if any.
	DB, Protocol int
	Name         string
	// ReadTimeout bounds how long a wait for replies goes with nothing
	// read before the connection is taken for dead, WriteTimeout each
	// write (0 or less: none). DialTimeout bounds a connect and its
	// handshake (default 5s).
	ReadTimeout, WriteTimeout, DialTimeout time.Duration
	// Conns is how many connections calls are spread over (default 1).
	Conns int
	// DialAttempts is how many times a connect is tried (default 1),
	// DialWait how long to wait before the next try (nil: none), as a
	// go-redis pool tries.
	DialAttempts int
	DialWait     func(attempt int) time.Duration
	// Spin is how long a call that waits for its reply alone polls the
	// socket before it sleeps (0: never): see conn.spin.
	Spin time.Duration
}

// ErrClosed is the error of a call made after Close.
var ErrClosed = errors.New("pipe: closed")

// ReplyError is an error reply of the server, with its text as sent.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// RedisError marks e as the server's reply (go-redis's redis.Error).
func (ReplyError) RedisError() {}

// Pipe is a set of pipelined connections to one server. It is safe for
// concurrent use.
type Pipe struct {
	cfg   Config
	slots []slot
	next  atomic.Uint32
	wg    sync.WaitGroup // the readers

	mu       sync.Mutex
	closed   bool
	isClosed atomic.Bool // closed, read without mu
}

// slot is one connection of the pipe, dialed when a call first needs it
// and again after it broke.
type slot struct {
	cur     atomic.Pointer[conn]
	mu      sync.Mutex
	dialing chan struct{} // closed when the dial under way ends
}

// New returns a Pipe; it dials nothing until the first call.
func New(cfg Config) *Pipe {
	if cfg.Conns < 1 {
		cfg.Conns = 1
	}
	if cfg.Protocol == 0 {
		cfg.Protocol = 3
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	return &Pipe{cfg: cfg, slots: make([]slot, cfg.Conns)}
}

// Do sends one command, written by enc, and returns its reply: an int64,
// a string, a bool, a float64, a []any or a map[any]any of them (an error
// element as its ReplyError), nil for a null reply (isNil true), or the
// ReplyError of an error reply. The error is the connection's, or the
// context's when ctx ends before the reply comes: the command may then
// still run.
func (p *Pipe) Do(ctx context.Context, enc func([]byte) []byte) (v any, isNil bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s := &p.slots[0]
	if len(p.slots) > 1 {
		s = &p.slots[int(p.next.Add(1))%len(p.slots)]
	}
	for attempt := 1; ; attempt++ {
		c, err := p.conn(ctx, s)
		if err != nil {
			return nil, false, err
		}
		v, isNil, err := c.do(ctx, enc)
		if errors.Is(err, errStale) && attempt < 3 {
			continue // nothing written: dial again
		}
		return v, isNil, err
	}
}

// idleCheck is how long a connection is idle (no call under way, nothing
// read) before a call looks whether the server closed it (its idle
// timeout, a restart) before writing to it, as go-redis does with a
// pooled connection; one closed is dialed again and the call sent there.
const idleCheck = 500 * time.Millisecond

// errStale is the error of a call that found its connection closed (while
// idle, or broken by another call), before writing anything.
var errStale = fmt.Errorf("pipe: connection closed before the write: %w", io.EOF)

// conn returns s's connection, dialing it when there is none or it broke.
func (p *Pipe) conn(ctx context.Context, s *slot) (*conn, error) {
	if c := s.cur.Load(); c != nil && !c.broken.Load() {
		return c, nil
	}
	s.mu.Lock()
	for {
		if c := s.cur.Load(); c != nil && !c.broken.Load() {
			s.mu.Unlock()
			return c, nil
		}
		if wait := s.dialing; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			s.mu.Lock()
			continue
		}
		break
	}
	done := make(chan struct{})
	s.dialing = done
	s.mu.Unlock()
	c, err := p.dial(ctx)
	s.mu.Lock()
	s.dialing = nil
	close(done)
	if err == nil {
		p.mu.Lock()
		if p.closed {
			err = ErrClosed
		} else {
			s.cur.Store(c)
			p.wg.Add(1)
			go c.serve(&p.wg)
		}
		p.mu.Unlock()
		if err != nil {
			c.nc.Close()
		}
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// dial connects and sets the connection up: HELLO (with AUTH), SELECT,
// CLIENT SETNAME, written together and read back in order. A server that
// refuses HELLO gets AUTH apart and speaks RESP2, as go-redis does.
func (p *Pipe) dial(ctx context.Context) (*conn, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	nc, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	fail := func(err error) (*conn, error) {
		stop()
		nc.Close()
		if ctx.Err() != nil && errors.Is(err, net.ErrClosed) {
			err = ctx.Err()
		}
		return nil, err
	}
	var user, pass string
	if p.cfg.Auth != nil {
		if user, pass, err = p.cfg.Auth(ctx); err != nil {
			return fail(err)
		}
	}
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	w := bufio.NewWriter(nc)
	r := bufio.NewReaderSize(nc, 32<<10)
	hello := []string{"HELLO", strconv.Itoa(p.cfg.Protocol)}
	if pass != "" {
		hello = append(hello, "AUTH", cmpOr(user, "default"), pass)
	}
	var setup [][]string
	if p.cfg.DB != 0 {
		setup = append(setup, []string{"SELECT", strconv.Itoa(p.cfg.DB)})
	}
	if p.cfg.Name != "" {
		setup = append(setup, []string{"CLIENT", "SETNAME", p.cfg.Name})
	}
	w.Write(appendCmd(nil, hello...))
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	v, _, err := readReply(r)
	if err != nil {
		return fail(err)
	}
	proto := p.cfg.Protocol
	if _, ok := v.(ReplyError); ok {
		// A server that refuses HELLO (before Redis 6, or a proxy):
		// RESP2, AUTH apart, as go-redis does.
		proto = 2
		if pass != "" {
			auth := []string{"AUTH", pass}
			if user != "" {
				auth = []string{"AUTH", user, pass}
			}
			setup = append([][]string{auth}, setup...)
		}
	}
	for _, cmd := range setup {
		w.Write(appendCmd(nil, cmd...))
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	for _, cmd := range setup {
		v, _, err := readReply(r)
		if err != nil {
			return fail(err)
		}
		if rerr, ok := v.(ReplyError); ok {
			return fail(fmt.Errorf("pipe: %s: %w", cmd[0], rerr))
		}
	}
	if !stop() {
		return fail(ctx.Err())
	}
	_ = nc.SetDeadline(time.Time{})
	c := &conn{nc: nc, timeout: p.cfg.ReadTimeout, wtimeout: p.cfg.WriteTimeout, proto: proto, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	c.progress.Store(time.Now().UnixNano())
	c.poke = c.wakeLead
	if p.cfg.Spin > 0 && runtime.NumCPU() > 1 && runtime.GOMAXPROCS(0) > 1 {
		if c.spinner = newSpinner(nc); c.spinner != nil {
			c.spin = p.cfg.Spin
		}
	}
	c.r = bufio.NewReaderSize(&deadlineReader{c: c}, 32<<10)
	if r.Buffered() > 0 {
		return fail(fmt.Errorf("%w: unexpected data after the handshake", errProto))
	}
	return c, nil
}

// SpinStats returns how many reads were tried with a spin (Config.Spin)
// and how many of them it served, summed over the pipe's current
// connections.
func (p *Pipe) SpinStats() (tried, served int64) {
	for i := range p.slots {
		if c := p.slots[i].cur.Load(); c != nil {
			tried += c.spinTried.Load()
			served += c.spun.Load()
		}
	}
	return tried, served
}

// Pending returns how many calls wait for their reply, or were left by
// their callers before it came.
func (p *Pipe) Pending() int {
	n := 0
	for i := range p.slots {
		if c := p.slots[i].cur.Load(); c != nil {
			c.mu.Lock()
			n += c.queue.size
			c.mu.Unlock()
		}
	}
	return n
}

// Closed reports whether Close was called.
func (p *Pipe) Closed() bool { return p.isClosed.Load() }

// connect dials, up to DialAttempts times, each within DialTimeout.
func (p *Pipe) connect(ctx context.Context) (net.Conn, error) {
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		nc, err := p.cfg.Dial(actx)
		cancel()
		if err == nil || attempt+1 >= p.cfg.DialAttempts || ctx.Err() != nil {
			return nc, err
		}
		if p.cfg.DialWait != nil {
			t := time.NewTimer(p.cfg.DialWait(attempt))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, err
			}
		}
	}
}

// Close closes the connections: the calls under way end with ErrClosed
// (or the connection's error), and Close waits for the readers to stop.
func (p *Pipe) Close() {
	p.mu.Lock()
	p.closed = true
	p.isClosed.Store(true)
	p.mu.Unlock()
	for i := range p.slots {
		if c := p.slots[i].cur.Load(); c != nil {
			c.fail(ErrClosed)
		}
	}
	p.wg.Wait()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// conn is one pipelined connection. Calls append their command to wbuf
// and themselves to queue under mu; the first that finds no write under
// way writes, and goes on writing what others appended meanwhile. A
// waiting call that finds no one reading leads: it reads the replies,
// handing each to the call at the head of the queue, until its own comes.
// Then, if other callers still wait, the connection's reader goroutine
// leads until none does. So a call alone reads its own reply, as on a
// pooled connection, with no goroutine to wake; concurrent calls are
// answered by the reader as their replies come.
type conn struct {
	nc      net.Conn
	spinner *spinner // polls the socket, when the read may spin
	// spin is how long a lead polls the socket for its reply before it
	// sleeps in the netpoller (0: never), while calls come one at a time
	// (solo) and its own is the only one queued. A reply that comes
	// within it skips the wake-up of a sleeping goroutine, which is most
	// of a loopback round trip's cost; with concurrent calls a spin would
	// take a CPU the server or the other callers need, so it is not tried.
	// Not with one CPU or GOMAXPROCS 1, and only on a plain TCP or Unix
	// socket (newSpinner).
	spin     time.Duration
	r        *bufio.Reader
	timeout  time.Duration // for reads
	wtimeout time.Duration
	proto    int
	broken   atomic.Bool
	progress atomic.Int64 // UnixNano: when a read last returned data, or replies were first awaited
	poke     func()       // wakes the lead's read (c.wakeLead), made once

	spinMiss  atomic.Int32 // spins in a row that found no reply (at most spinMissMax)
	spinTried atomic.Int64 // reads tried with a spin (SpinStats)
	spun      atomic.Int64 // reads a spin served (SpinStats)

	mu       sync.Mutex
	err      error // set once: the connection is broken
	wbuf     []byte
	spare    []byte
	writing  bool
	queue    fifo
	reading  bool          // a call, or the reader, leads
	live     int           // calls in queue whose callers wait
	solo     int           // calls in a row that found the queue empty (at most soloRun<<spinMissMax)
	pausedAt time.Time     // when the reading stopped with calls queued (all gone)
	wake     chan struct{} // hands the lead to the reader
	closed   chan struct{} // closed when the connection breaks

	// The lead's, read and written by the leading goroutine (under mu
	// where others look).
	leadCtx      context.Context // nil for the reader, or a context never done
	leadDeadline time.Time       // leadCtx's, zero when none
	watched      bool            // an AfterFunc watches leadCtx
	stopWatch    func() bool
	atStart      bool // waiting for a reply's first byte, none buffered
}

// call is one command waiting for its reply. Its fields but done are
// guarded by the conn's mu.
type call struct {
	val     any
	isNil   bool
	err     error
	replied bool
	gone    bool          // its caller left
	done    chan struct{} // buffered: a wake-up when replied
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// soloRun is how many calls in a row (the lead's own included) must find
// no other call queued before a lead spins (conn.spin); after k spins in a
// row that found no reply (a server farther away than a spin), soloRun<<k,
// up to k = spinMissMax (64 calls), so that a spin that does not pay is
// seldom tried.
const (
	soloRun     = 8
	spinMissMax = 3
)

// errInterrupted ends a lead whose context ended, at a reply's start.
var errInterrupted = errors.New("pipe: lead interrupted")

func (c *conn) do(ctx context.Context, enc func([]byte) []byte) (any, bool, error) {
	cl := callPool.Get().(*call)
	c.mu.Lock()
	if c.err != nil {
		// Broken before anything was written: the pipe dials again.
		c.mu.Unlock()
		callPool.Put(cl)
		return nil, false, errStale
	}
	if c.queue.size == 0 && !c.reading {
		now := time.Now()
		if now.Sub(time.Unix(0, c.progress.Load())) > idleCheck {
			_ = c.nc.SetReadDeadline(time.Time{}) // a passed one fails the look
			if err := alive(c.nc); err != nil {
				c.failLocked(fmt.Errorf("%w: %w", errStale, err))
				c.mu.Unlock()
				callPool.Put(cl)
				return nil, false, errStale
			}
		}
		c.progress.Store(now.UnixNano())
	}
	c.wbuf = enc(c.wbuf)
	if c.queue.size == 0 {
		c.solo = min(c.solo+1, soloRun<<spinMissMax)
	} else {
		c.solo = 0
	}
	c.queue.push(cl)
	c.live++
	if !c.writing {
		c.writing = true
		for len(c.wbuf) > 0 && c.err == nil {
			buf := c.wbuf
			c.wbuf = c.spare[:0]
			c.mu.Unlock()
			_ = c.nc.SetWriteDeadline(writeDeadline(ctx, c.wtimeout))
			_, err := c.nc.Write(buf)
			c.mu.Lock()
			c.spare = buf[:0]
			if err != nil {
				c.failLocked(err)
			}
		}
		c.writing = false
	}
	for {
		if cl.replied {
			c.mu.Unlock()
			return c.result(cl)
		}
		if !c.reading {
			c.reading = true
			c.mu.Unlock()
			if !c.lead(ctx, cl) {
				return nil, false, ended(ctx)
			}
			return c.result(cl)
		}
		c.mu.Unlock()
		select {
		case <-cl.done:
		case <-ctx.Done():
			c.mu.Lock()
			if cl.replied {
				c.mu.Unlock()
				return c.result(cl)
			}
			cl.gone = true // not reused: the queue still holds it
			c.live--
			c.mu.Unlock()
			return nil, false, ctx.Err()
		}
		c.mu.Lock()
	}
}

// ended returns the error of a context a lead left because it ended. A
// lead leaves at its deadline by the clock, which can come a moment
// before the context's own timer ends it: ended waits for that (up to
// endWait), so that the caller's ctx.Err() agrees with the error.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(endWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return context.DeadlineExceeded // a context that reports a deadline it does not keep
	}
}

// endWait bounds ended's wait for a context's own timer.
const endWait = 10 * time.Millisecond

// writeDeadline is a write's deadline: WriteTimeout from now, or the
// writer's context's deadline when that comes first (a write cut short
// breaks the connection: the server reads nothing anyway).
func writeDeadline(ctx context.Context, timeout time.Duration) time.Time {
	var d time.Time
	if timeout > 0 {
		d = time.Now().Add(timeout)
	}
	if cd, ok := ctx.Deadline(); ok && (d.IsZero() || cd.Before(d)) {
		d = cd
	}
	return d
}

// result returns cl's reply and puts cl back in the pool.
func (c *conn) result(cl *call) (any, bool, error) {
	v, isNil, err := cl.val, cl.isNil, cl.err
	select {
	case <-cl.done: // a wake-up not taken
	default:
	}
	cl.val, cl.isNil, cl.err, cl.replied, cl.gone = nil, false, nil, false, false
	callPool.Put(cl)
	return v, isNil, err
}

// lead reads replies until own's comes, or until ctx ends (at a reply's
// start): then it returns false, and own is left. It hands the lead on.
// The reader leads with no own call, until no caller waits.
//
// A lead's context is looked at when its read wakes: at the context's
// deadline, and leadCheck after the lead began; from then on an
// AfterFunc wakes the read when the context ends. So a reply that comes
// within leadCheck costs no goroutine and no allocation, and a lead whose
// context is cancelled leaves within leadCheck at worst.
func (c *conn) lead(ctx context.Context, own *call) bool {
	now := time.Now()
	c.mu.Lock()
	if !c.pausedAt.IsZero() {
		// Nobody read meanwhile: that time is not the server's.
		c.progress.Add(int64(now.Sub(c.pausedAt)))
		c.pausedAt = time.Time{}
	}
	c.leadCtx, c.leadDeadline, c.watched, c.stopWatch = nil, time.Time{}, false, nil
	if ctx.Done() != nil && own != nil {
		c.leadCtx = ctx
		c.leadDeadline, _ = ctx.Deadline()
	}
	c.armLocked(now)
	c.mu.Unlock()
	// The lead's fields are forgotten under mu before the lead is handed
	// on (the next lead must not see them); its AfterFunc is stopped after.
	var stopWatch func() bool
	defer func() {
		if stopWatch != nil {
			stopWatch()
		}
	}()
	for {
		c.mu.Lock()
		if c.leadEndedLocked() {
			stopWatch = c.forgetLeadLocked()
			own.gone = true
			c.live--
			c.passLead()
			c.mu.Unlock()
			return false
		}
		c.atStart = c.r.Buffered() == 0
		c.mu.Unlock()
		v, isNil, err := readReply(c.r)
		if errors.Is(err, errInterrupted) {
			continue // the check above leaves
		}
		c.mu.Lock()
		c.atStart = false
		var cl *call
		if err == nil {
			if cl = c.queue.pop(); cl == nil {
				err = fmt.Errorf("%w: a reply with no command", errProto)
			}
		}
		if err != nil {
			stopWatch = c.forgetLeadLocked()
			c.failLocked(err)
			c.drainLocked()
			c.mu.Unlock()
			return true // own was drained with the error
		}
		cl.val, cl.isNil, cl.replied = v, isNil, true
		if !cl.gone {
			c.live--
		}
		if rerr, ok := v.(ReplyError); ok && strings.HasPrefix(string(rerr), "READONLY") {
			// The server is a replica now (a failover demoted it): the
			// next call dials again, and finds the primary.
			c.failLocked(rerr)
			c.drainLocked()
		}
		if cl == own {
			stopWatch = c.forgetLeadLocked()
			c.passLead()
			c.mu.Unlock()
			return true
		}
		var wake chan struct{}
		if !cl.gone {
			wake = cl.done
		}
		stop := own == nil && c.live == 0
		if stop {
			c.stopReadingLocked() // the next call leads
		}
		c.mu.Unlock()
		if wake != nil {
			select {
			case wake <- struct{}{}:
			default: // a wake-up is pending: the caller looks again
			}
		}
		if stop {
			return true
		}
	}
}

// leadCheck is when a lead with a context that can end first looks at it
// (and arms an AfterFunc to watch it from then on). A read deadline a
// millisecond away, armed for every call, cost a one-goroutine loop about
// a fifth of its throughput in the side-by-side bench: a near timer makes
// the scheduler poll rather than sleep.
const leadCheck = 50 * time.Millisecond

// leadEndedLocked reports whether the lead's context ended (its deadline
// passed counts, before the context's own timer says so). c.mu is held.
func (c *conn) leadEndedLocked() bool {
	return c.leadCtx != nil && (c.leadCtx.Err() != nil || !c.leadDeadline.IsZero() && !time.Now().Before(c.leadDeadline))
}

// armLocked sets the read deadline for the lead's next wait: the earliest
// of the read timeout from the last progress, the lead's context's
// deadline, and, until an AfterFunc watches the context, leadCheck from
// now. c.mu is held.
func (c *conn) armLocked(now time.Time) {
	var d time.Time
	earlier := func(t time.Time) {
		if d.IsZero() || t.Before(d) {
			d = t
		}
	}
	if c.timeout > 0 {
		earlier(time.Unix(0, c.progress.Load()).Add(c.timeout))
	}
	if c.leadCtx != nil {
		if !c.leadDeadline.IsZero() && c.leadDeadline.After(now) {
			earlier(c.leadDeadline)
		}
		if !c.watched {
			earlier(now.Add(leadCheck))
		}
	}
	_ = c.nc.SetReadDeadline(d)
}

// wakeLead is the AfterFunc of a lead's context: the read wakes, and the
// lead looks at its context. One left over from an earlier lead costs a
// look.
func (c *conn) wakeLead() {
	c.mu.Lock()
	if c.reading && c.err == nil {
		_ = c.nc.SetReadDeadline(time.Now())
	}
	c.mu.Unlock()
}

// forgetLeadLocked forgets the lead's context, and returns the stop of
// its AfterFunc, if any, to call once c.mu is released. c.mu is held.
func (c *conn) forgetLeadLocked() (stop func() bool) {
	stop = c.stopWatch
	c.leadCtx, c.leadDeadline, c.watched, c.stopWatch = nil, time.Time{}, false, nil
	return stop
}

// stopReadingLocked ends the reading: a call that comes leads. Calls
// still queued are all gone; the time until then does not count against
// the server. c.mu is held.
func (c *conn) stopReadingLocked() {
	c.reading = false
	if c.queue.size > 0 {
		c.pausedAt = time.Now()
	}
}

// passLead hands the lead to the reader while callers wait; with none, no
// one leads until a call comes. c.mu is held.
func (c *conn) passLead() {
	if c.live <= 0 {
		c.stopReadingLocked()
		return
	}
	select {
	case c.wake <- struct{}{}:
	default: // the reader has not taken the last one yet
	}
}

// serve is the reader: it leads when a call hands it the lead, until the
// connection breaks.
func (c *conn) serve(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-c.wake:
			c.lead(context.Background(), nil)
		case <-c.closed:
			c.mu.Lock()
			c.drainLocked() // the calls a lead handed over
			c.mu.Unlock()
			return
		}
	}
}

// drainLocked ends every call in the queue with the connection's error,
// once it broke. c.mu is held.
func (c *conn) drainLocked() {
	for cl := c.queue.pop(); cl != nil; cl = c.queue.pop() {
		cl.err, cl.replied = c.err, true
		if !cl.gone {
			select {
			case cl.done <- struct{}{}:
			default:
			}
		}
	}
	c.reading = false
	c.live = 0
	c.pausedAt = time.Time{}
}

// fail breaks the connection with err, unless it broke before.
func (c *conn) fail(err error) {
	c.mu.Lock()
	c.failLocked(err)
	if !c.reading {
		c.drainLocked() // no lead to see the read fail
	}
	c.mu.Unlock()
}

func (c *conn) failLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	c.broken.Store(true)
	close(c.closed)
	c.nc.Close() // a lead's read fails: it ends the calls under way
}

// deadlineReader reads the connection for the lead. When the read
// deadline passes (armLocked), the lead looks again: at a reply's start
// it leaves if its context ended; a connection with nothing read for
// the read timeout (counted from the last data read, or from when
// replies were first awaited, less any time nobody read) is taken for
// dead; otherwise it waits on, with the deadline armed again. So a call
// costs no deadline of its own while replies keep coming. A lead that
// reads part of a reply reads it to its end (within the read timeout)
// before it leaves, so no reply is ever split between two leads.
type deadlineReader struct{ c *conn }

func (d *deadlineReader) Read(b []byte) (int, error) {
	c := d.c
	for {
		n, spun, err := c.spinRead(b)
		if !spun {
			n, err = c.nc.Read(b)
		}
		if n > 0 {
			c.progress.Store(time.Now().UnixNano())
			c.atStart = false // a reply has begun: the lead stays to its end
			return n, err
		}
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			return n, err
		}
		c.mu.Lock()
		now := time.Now()
		switch {
		case c.err != nil:
		case c.atStart && c.leadEndedLocked():
			err = errInterrupted
		case c.timeout > 0 && now.Sub(time.Unix(0, c.progress.Load())) >= c.timeout:
		default:
			if c.leadCtx != nil && !c.watched {
				// The reply is slow: an AfterFunc wakes the read when
				// the context ends, from now on.
				c.watched = true
				c.stopWatch = context.AfterFunc(c.leadCtx, c.poke)
			}
			c.armLocked(now)
			err = nil
		}
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
}

// spinRead reads b by polling the socket for up to c.spin when calls come
// one at a time (conn.spin); ok is false when it did not read, and the
// caller reads as usual.
func (c *conn) spinRead(b []byte) (n int, ok bool, err error) {
	if c.spin <= 0 {
		return 0, false, nil
	}
	miss := c.spinMiss.Load()
	c.mu.Lock()
	alone := c.queue.size <= 1 && c.solo >= soloRun<<miss
	c.mu.Unlock()
	if !alone {
		return 0, false, nil
	}
	c.spinTried.Add(1)
	n, ok, err = c.spinner.read(b, c.spin)
	if !ok {
		c.spinMiss.Store(min(miss+1, spinMissMax))
		c.mu.Lock()
		c.solo = 0
		c.mu.Unlock()
		return 0, false, nil
	}
	if miss != 0 {
		c.spinMiss.Store(0)
	}
	c.spun.Add(1)
	if n == 0 && err == nil {
		err = io.EOF // the server closed the connection
	}
	return n, ok, err
}

// fifo is a queue of calls in a ring that grows as needed.
type fifo struct {
	ring       []*call
	head, size int
}

func (q *fifo) push(c *call) {
	if q.size == len(q.ring) {
		ring := make([]*call, max(16, 2*len(q.ring)))
		for i := range q.size {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.size)%len(q.ring)] = c
	q.size++
}

func (q *fifo) pop() *call {
	if q.size == 0 {
		return nil
	}
	c := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) % len(q.ring)
	q.size--
	return c
}
