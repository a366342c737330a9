//go:build !unix

package harness

import "errors"

// Pause is not supported outside Unix (no SIGSTOP).
func (s *Server) Pause() error { return errors.New("harness: Pause needs SIGSTOP (Unix)") }

// Resume is not supported outside Unix (no SIGCONT).
func (s *Server) Resume() error { return errors.New("harness: Resume needs SIGCONT (Unix)") }
