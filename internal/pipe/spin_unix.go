//go:build unix

package pipe

import (
	"net"
	"syscall"
	"time"
)

// spinner polls a connection's socket for a lead (conn.spin). It is made
// once per connection, and used by one lead at a time, so that a spin
// allocates nothing.
type spinner struct {
	raw  syscall.RawConn
	poll func(fd uintptr) bool // s.try, bound once

	// One read's, set by read for poll.
	b   []byte
	end time.Time
	n   int
	ok  bool
	err error
}

// newSpinner returns a spinner on nc's socket, or nil when nc is not a
// plain TCP or Unix socket: a TLS connection's data must go through TLS,
// and a dialer's own wrapper may read, count or buffer what the socket
// holds, which a spin would bypass.
func newSpinner(nc net.Conn) *spinner {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	raw, _ := socketOf(nc)
	if raw == nil {
		return nil
	}
	s := &spinner{raw: raw}
	s.poll = s.try
	return s
}

// read reads into b from the socket without sleeping, trying again for up
// to d while nothing has come. ok is false when nothing came in d (or the
// socket's deadline has passed): the caller then reads as usual, and
// sleeps until data comes.
func (s *spinner) read(b []byte, d time.Duration) (n int, ok bool, err error) {
	s.b, s.end, s.n, s.ok, s.err = b, time.Now().Add(d), 0, false, nil
	rerr := s.raw.Read(s.poll)
	s.b = nil
	if rerr != nil {
		return 0, false, nil
	}
	return s.n, s.ok, s.err
}

func (s *spinner) try(fd uintptr) bool {
	for {
		m, e := syscall.Read(int(fd), s.b)
		switch e {
		case nil:
			s.n, s.ok = m, true
			return true
		case syscall.EAGAIN, syscall.EINTR:
		default:
			s.err, s.ok = e, true
			return true
		}
		if time.Now().After(s.end) {
			return true
		}
		// Let the server have this CPU if it waits for it: woken by the
		// write, it may have been placed here.
		yield()
	}
}
