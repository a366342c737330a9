package harness

import (
	"fmt"
	"net"
	"sync"
)

// reservedPorts are never handed out: 6379 is the default Redis port (and
// 16379 its cluster bus), which may belong to a server we do not own.
var reservedPorts = map[int]bool{6379: true, 16379: true}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{} // handed out by this process; never reused
)

// freePort returns a loopback TCP port that was free a moment ago (bind
// 127.0.0.1:0, read the port, close). It never returns a reserved port or one
// this process already handed out, which keeps parallel starts from racing
// for the same number. The caller must still cope with losing the port to
// another process before it binds (see Start's retry).
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("harness: pick free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		portsMu.Lock()
		ok := !reservedPorts[port] && !portsUsed[port]
		if ok {
			portsUsed[port] = true
		}
		portsMu.Unlock()
		if ok {
			return port, nil
		}
	}
	return 0, fmt.Errorf("harness: no usable free port found")
}
