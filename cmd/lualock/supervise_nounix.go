//go:build !unix

package main

import (
	"errors"
	"io"
	"time"
)

// superviseCmd is the hidden subcommand of the Unix supervisor.
const superviseCmd = "__supervise"

// supervisor does not exist here: lualock lock needs Unix process groups
// to keep its promise that nothing of the command outlives it.
type supervisor struct{ events chan string }

func startSupervised(string, []string, []string, time.Duration, io.Reader, io.Writer, io.Writer) (*supervisor, int, error) {
	return nil, exitError, errors.New("lualock lock runs commands on Unix systems only")
}

func (*supervisor) send(string) {}
func (*supervisor) close()      {}
func (*supervisor) killTree()   {}

func runSupervisor([]string) int { return exitUsage }
