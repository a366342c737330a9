package harness

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a loopback TCP proxy in front of one server, for fault tests: it
// forwards every connection made to Addr to the target until Blackhole,
// after which it drops what either side sends (the connections stay open,
// as on a network that silently loses packets). Delay holds back what
// every connection carries; a replica's replication link through the proxy
// (recognised by its REPLCONF or PSYNC) can be delayed or cut on its own
// (SetLinkDelay, CutLink), so that the clients' and Sentinels' traffic
// flows while the replica lags. Close stops it and closes every
// connection. It listens on 127.0.0.1 only.
type Proxy struct {
	ln        net.Listener
	target    string
	dark      atomic.Bool
	delay     atomic.Int64 // ns, every connection
	linkDelay atomic.Int64 // ns, replication links only
	linkCut   atomic.Bool  // replication links drop what they carry
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// StartProxy starts a proxy to target, which must be a loopback address.
func StartProxy(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("harness: proxy target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		if !strings.EqualFold(host, "localhost") {
			return nil, fmt.Errorf("harness: proxy target %q is not a loopback address", target)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("harness: proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole makes the proxy drop every byte from now on, in both directions,
// on the open connections and on new ones.
func (p *Proxy) Blackhole() { p.dark.Store(true) }

// SetDelay holds back every byte the proxy carries by d from now on (0: no
// delay); the order of the bytes is kept.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetLinkDelay holds back every byte of the replication links the proxy
// carries by d, in both directions (0: no delay): the replica lags.
func (p *Proxy) SetLinkDelay(d time.Duration) { p.linkDelay.Store(int64(d)) }

// CutLink makes the replication links drop what they carry, including
// what a delay still holds back (as a crashed host loses what was on the
// wire); RestoreLink ends that. The connections stay open.
func (p *Proxy) CutLink() { p.linkCut.Store(true) }

// RestoreLink undoes CutLink.
func (p *Proxy) RestoreLink() { p.linkCut.Store(false) }

// Restore ends Blackhole: bytes flow again on the open connections (what
// was dropped meanwhile stays lost) and on new ones.
func (p *Proxy) Restore() { p.dark.Store(false) }

// Close stops the proxy and closes every connection it carries, and waits
// for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c, or closes it and returns false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(out) {
			_ = in.Close()
			return
		}
		l := &link{}
		p.wg.Add(2)
		go p.pipe(out, in, l, true)
		go p.pipe(in, out, l, false)
	}
}

// link is one proxied connection: whether it is a replication link.
type link struct {
	repl    atomic.Bool
	scanned atomic.Int64 // bytes from the client side looked at so far
}

// linkScan is how far into a connection the proxy looks for the replica's
// handshake (PING, then REPLCONF, then PSYNC).
const linkScan = 4096

// chunk is a piece of data held back until at.
type chunk struct {
	at time.Time
	b  []byte
}

// pipe copies from src to dst until either side closes, dropping the bytes
// while the proxy is dark (or the link is cut), holding them back while a
// delay applies. up: src is the client side.
func (p *Proxy) pipe(dst, src net.Conn, l *link, up bool) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	// Delayed chunks go through a writer of their own, in order; pending
	// counts them, so that undelayed bytes never overtake delayed ones.
	var pending atomic.Int64
	var queue chan chunk
	var writer sync.WaitGroup
	defer func() {
		if queue != nil {
			close(queue)
			writer.Wait()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && up && !l.repl.Load() && l.scanned.Load() < linkScan {
			l.scanned.Add(int64(n))
			if bytes.Contains(buf[:n], []byte("REPLCONF")) || bytes.Contains(buf[:n], []byte("PSYNC")) {
				l.repl.Store(true)
			}
		}
		if n > 0 && !p.dropping(l) {
			d := time.Duration(p.delay.Load())
			if l.repl.Load() {
				d = max(d, time.Duration(p.linkDelay.Load()))
			}
			if d <= 0 && pending.Load() == 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			} else {
				if queue == nil {
					queue = make(chan chunk, 1024)
					writer.Add(1)
					go func() {
						defer writer.Done()
						for c := range queue {
							time.Sleep(time.Until(c.at))
							if !p.dropping(l) {
								_, _ = dst.Write(c.b)
							}
							pending.Add(-1)
						}
					}()
				}
				pending.Add(1)
				queue <- chunk{at: time.Now().Add(d), b: bytes.Clone(buf[:n])}
			}
		}
		if err != nil {
			return // EOF, or a side closed
		}
	}
}

// dropping reports whether what l carries is dropped now.
func (p *Proxy) dropping(l *link) bool {
	return p.dark.Load() || p.linkCut.Load() && l.repl.Load()
}
