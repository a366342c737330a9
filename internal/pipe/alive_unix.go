//go:build unix

package pipe

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// errStray is data on a connection with no call waiting for it.
var errStray = errors.New("pipe: data with no command")

// alive looks, without waiting and without reading, whether the server
// closed nc (or sent what no call asked for). A connection that does not
// expose its socket (TLS) is taken as alive.
func alive(nc net.Conn) error {
	raw, err := socketOf(nc)
	if raw == nil {
		return err
	}
	var res error
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0:
			res = errStray
		case rerr == nil:
			res = io.EOF
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EWOULDBLOCK), errors.Is(rerr, syscall.EINTR):
		default:
			res = rerr
		}
		return true // never wait for readiness
	})
	if err != nil {
		return err
	}
	return res
}

// socketOf returns nc's socket: nil, and no error, when nc does not
// expose one (TLS).
func socketOf(nc net.Conn) (syscall.RawConn, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, nil
	}
	return sc.SyscallConn()
}
