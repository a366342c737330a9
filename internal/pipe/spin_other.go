//go:build !unix

package pipe

import (
	"net"
	"time"
)

// spinner is Unix's only: a read never spins elsewhere.
type spinner struct{}

func newSpinner(net.Conn) *spinner { return nil }

func (*spinner) read([]byte, time.Duration) (int, bool, error) { return 0, false, nil }
