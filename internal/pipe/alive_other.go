//go:build !unix

package pipe

import "net"

// alive takes every connection as alive where the socket cannot be peeked
// at: a closed one fails its next call.
func alive(net.Conn) error { return nil }
