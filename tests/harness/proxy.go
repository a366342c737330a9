package harness

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// Proxy is a loopback TCP proxy in front of one server, for fault tests: it
// forwards every connection made to Addr to the target until Blackhole,
// after which it drops what either side sends (the connections stay open,
// as on a network that silently loses packets). Close stops it and closes
// every connection. It listens on 127.0.0.1 only.
type Proxy struct {
	ln     net.Listener
	target string
	dark   atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
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
		p.wg.Add(2)
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies from src to dst until either side closes, dropping the bytes
// while the proxy is dark.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.dark.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or a side closed
		}
	}
}
