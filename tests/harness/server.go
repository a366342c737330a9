package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults used when the corresponding Options field is zero.
const (
	DefaultReadyTimeout = 10 * time.Second
	DefaultStopGrace    = 5 * time.Second
	startAttempts       = 5
	logTailLines        = 25
)

// Options configures Start. The zero value is a plain standalone server on a
// free loopback port.
type Options struct {
	// Port to listen on; 0 picks a free loopback port (and retries with a
	// new one if another process grabs it first). 6379 is refused.
	Port int
	// Args are extra redis-server arguments appended after the harness
	// defaults, e.g. []string{"--maxmemory", "10mb"}.
	Args []string
	// Binary is the redis-server executable; "" means redis-server on PATH.
	Binary string
	// ReadyTimeout bounds the wait until the server answers PING
	// (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL
	// (default DefaultStopGrace).
	StopGrace time.Duration
	// KeepDir keeps the temp dir (and the log in it) after Stop.
	KeepDir bool

	// cluster makes the server a cluster node (set by StartClusterE).
	cluster     bool
	nodeTimeout time.Duration
	// sentinelConf, when set, makes the server a Sentinel
	// (redis-server sentinel.conf --sentinel) whose sentinel.conf starts
	// with this text (set by StartSentinelE); Sentinel rewrites the file.
	sentinelConf string
	// password is the server's requirepass (set by StartSentinelE for
	// Sentinels with a password): the readiness probe authenticates.
	password string
}

// Server is a redis-server child process owned by this test process. All
// methods are safe for concurrent use.
type Server struct {
	bin     string
	dir     string
	logPath string
	opts    Options

	mu      sync.Mutex
	port    int
	busPort int      // cluster bus port (cluster nodes only)
	proc    *process // nil while not running
	stopped bool     // Stop was called; the server cannot be restarted
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result; read only after done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the pid (if still running) and waits for the exit.
func (p *process) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// terminate sends SIGTERM, waits up to grace, then SIGKILLs; it returns once
// the process has exited and been reaped.
func (p *process) terminate(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
	}
}

// Start launches a standalone redis-server (see the package comment for the
// exact configuration) and returns once it answers PING. The caller owns the
// server and must Stop it (Shutdown stops any that are left).
func Start(opts Options) (*Server, error) {
	if opts.Port == 6379 || reservedPorts[opts.Port] {
		return nil, fmt.Errorf("harness: refusing to use reserved port %d", opts.Port)
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("harness: invalid port %d", opts.Port)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	name := opts.Binary
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("harness: %s not on PATH: %w", name, err)
	}
	dir, err := os.MkdirTemp("", "lualock-redis-*")
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	s := &Server{bin: bin, dir: dir, logPath: filepath.Join(dir, "redis.log"), opts: opts}

	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		if s.port = opts.Port; s.port == 0 {
			if s.port, err = freePort(); err != nil {
				break
			}
		}
		if opts.cluster {
			if s.busPort, err = freePort(); err != nil {
				break
			}
		}
		var retry bool
		if retry, err = s.startLocked(); err == nil || !retry || attempt == startAttempts {
			break
		}
		if opts.Port != 0 {
			time.Sleep(200 * time.Millisecond) // fixed port: give it a moment
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	register(s)
	return s, nil
}

// args returns the redis-server command line for the current port.
func (s *Server) args() []string {
	if s.opts.sentinelConf != "" {
		return append([]string{filepath.Join(s.dir, "sentinel.conf"), "--sentinel",
			"--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1",
			"--protected-mode", "no",
			"--dir", s.dir,
			"--daemonize", "no",
			"--logfile", "",
		}, s.opts.Args...)
	}
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
	}
	if s.opts.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", s.port),
			"--cluster-node-timeout", strconv.FormatInt(s.opts.nodeTimeout.Milliseconds(), 10),
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return append(a, s.opts.Args...)
}

// startLocked spawns redis-server on s.port and waits for it to be ready.
// retry reports a failure worth retrying (port lost to another process).
func (s *Server) startLocked() (retry bool, err error) {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, fmt.Errorf("harness: %w", err)
	}
	offset, _ := logf.Seek(0, io.SeekEnd)
	if conf := filepath.Join(s.dir, "sentinel.conf"); s.opts.sentinelConf != "" {
		if _, err := os.Stat(conf); err != nil {
			if err := os.WriteFile(conf, []byte(s.opts.sentinelConf), 0o644); err != nil {
				_ = logf.Close()
				return false, fmt.Errorf("harness: %w", err)
			}
		}
	}
	args := s.args()
	fmt.Fprintf(logf, "=== harness %s: starting %s %s\n", time.Now().Format(time.RFC3339Nano), s.bin, strings.Join(quoteArgs(args), " "))

	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout = logf // an *os.File: passed to the child directly, no copy goroutine
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = logf.Close() // the child has its own descriptor
	if err != nil {
		return false, fmt.Errorf("harness: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	if err := s.waitReady(p); err != nil {
		p.kill()
		out := s.logSince(offset)
		retry = bytes.Contains(out, []byte("Address already in use")) || errors.Is(err, errForeignServer)
		return retry, fmt.Errorf("harness: redis-server pid %d on %s: %w\n--- last lines of %s ---\n%s",
			cmd.Process.Pid, s.addr(), err, s.logPath, tail(out, logTailLines))
	}
	s.proc = p
	return false, nil
}

var errForeignServer = errors.New("a different process answers on this port")

// waitReady polls PING until our process answers it (checked via INFO's
// process_id, so a foreign server on the same port is never mistaken for
// ours), the process exits, or ReadyTimeout passes.
func (s *Server) waitReady(p *process) error {
	addr, pid := s.addr(), strconv.Itoa(p.cmd.Process.Pid)
	deadline := time.Now().Add(s.opts.ReadyTimeout)
	var lastErr error
	for {
		if p.exited() {
			return fmt.Errorf("exited before becoming ready (%v)", p.err)
		}
		if pong, err := commandStringAuth(addr, s.opts.password, 500*time.Millisecond, "PING"); err != nil {
			lastErr = err
		} else if pong != "PONG" {
			lastErr = fmt.Errorf("PING answered %q", pong)
		} else if info, err := commandStringAuth(addr, s.opts.password, 500*time.Millisecond, "INFO", "server"); err != nil {
			lastErr = err
		} else if got := infoField(info, "process_id"); got != pid {
			lastErr = fmt.Errorf("%w (process_id %s, ours %s)", errForeignServer, got, pid)
		} else {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", s.opts.ReadyTimeout, lastErr)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *Server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Addr returns "127.0.0.1:PORT". The address stays the same across Restart.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr()
}

// Port returns the TCP port.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// PID returns the pid of the running redis-server, or 0 if it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the redis-server process is alive.
func (s *Server) Running() bool { return s.PID() != 0 }

// Dir returns the server's temp directory (its --dir, holding redis.log).
func (s *Server) Dir() string { return s.dir }

// LogPath returns the file receiving the server's stdout and stderr.
func (s *Server) LogPath() string { return s.logPath }

// LogTail returns the last n lines of the server log.
func (s *Server) LogTail(n int) string { return tail(s.logSince(0), n) }

// Client returns a new go-redis client for this server; the caller must
// Close it. opts may adjust the options before the client is created.
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr()}
	for _, f := range opts {
		f(o)
	}
	return redis.NewClient(o)
}

// setReplicaOf makes the server's next starts replicate addr
// (--replicaof, in place of the one it had).
func (s *Server) setReplicaOf(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var args []string
	for i := 0; i < len(s.opts.Args); i++ {
		if s.opts.Args[i] == "--replicaof" {
			i += 2
			continue
		}
		args = append(args, s.opts.Args[i])
	}
	h, p, _ := strings.Cut(addr, ":")
	s.opts.Args = append(args, "--replicaof", h, p)
}

// Kill SIGKILLs the server (simulating a crash) and waits for it to exit.
// The server can be brought back with Restart.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
}

// Restart stops the server if it is running (SIGTERM) and starts a fresh
// process on the same address. Without persistence the new process starts
// empty, as after a real restart with no RDB/AOF. (A cluster node keeps its
// nodes.conf, i.e. its cluster membership, but not its data.)
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("harness: Restart after Stop")
	}
	if s.proc != nil {
		s.proc.terminate(s.opts.StopGrace)
		s.proc = nil
	}
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var retry bool
		if retry, err = s.startLocked(); err == nil || !retry {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// Stop terminates the server by pid (SIGTERM, then SIGKILL after the grace
// period), waits for it to exit and removes its temp dir (unless
// Options.KeepDir). It is idempotent; a stopped server cannot be restarted.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.proc != nil {
		s.proc.terminate(s.opts.StopGrace)
		s.proc = nil
	}
	if !s.opts.KeepDir {
		_ = os.RemoveAll(s.dir)
	}
	unregister(s)
}

func (s *Server) logSince(offset int64) []byte {
	f, err := os.Open(s.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func quoteArgs(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return q
}

// registry of servers started and not yet stopped, for Shutdown.
var (
	liveMu sync.Mutex
	live   = map[*Server]struct{}{}
)

func register(s *Server) {
	liveMu.Lock()
	live[s] = struct{}{}
	liveMu.Unlock()
}

func unregister(s *Server) {
	liveMu.Lock()
	delete(live, s)
	liveMu.Unlock()
}
