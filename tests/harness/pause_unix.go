//go:build unix

package harness

import (
	"errors"
	"syscall"
)

// Pause stops the server with SIGSTOP: it keeps its connections open but
// answers nothing, as a hung or overloaded Redis does. Resume undoes it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a server stopped by Pause (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return errors.New("harness: server not running")
	}
	return s.proc.cmd.Process.Signal(sig)
}
