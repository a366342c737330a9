// Command lualock runs a command while holding a Redis lock, like
// `etcdctl lock` and `consul lock`, and inspects and force-releases locks.
// Its locks are lualock's (and so Redisson's) reentrant, fair, read-write
// and fenced locks: a Java service using Redisson's RLock (RFairLock,
// RReadWriteLock, RFencedLock) on the same name excludes the command and
// the other way round.
//
// Usage:
//
//	lualock lock [-addr URL | -sentinel ADDRS -master NAME [-sentinel-user U] [-sentinel-password P]] [-ack MODE] [-wait D | -n] [-lease D] [-grace D] [-fair | -read | -write | -fenced | -semaphore N] [-q] [-E N] [-pubsub KIND] NAME -- COMMAND [ARG...]
//	lualock status [-addr URL | -sentinel ADDRS -master NAME [-sentinel-user U] [-sentinel-password P]] [-ack MODE] [-json] NAME
//	lualock unlock -force [-addr URL | -sentinel ADDRS -master NAME [-sentinel-user U] [-sentinel-password P]] [-ack MODE] [-fair] [-pubsub KIND] NAME
//	lualock help
//	lualock --version
//
// Without arguments it prints a short usage (shortUsage); see usageText
// below (or `lualock help`) for the flags, the environment and the exit
// codes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lualock/lualock/cmd/luagen/version"
)

// Exit codes of lualock itself. lock otherwise exits with the command's
// status (128+N when a signal N ended it), so a command's own 1..4 cannot be
// told from these; -E moves "not obtained" elsewhere, and stderr explains
// lualock's own exits.
const (
	exitOK          = 0
	exitError       = 1   // runtime error: Redis unreachable, Redis error, ...
	exitUsage       = 2   // bad command line
	exitLost        = 3   // lock: the lock was lost (or its -lease ran out) while the command ran
	exitNotObtained = 4   // lock: the lock was not obtained within -wait (default of -E)
	exitCannotExec  = 126 // lock: the command was found but could not be started
	exitNotFound    = 127 // lock: the command was not found
)

const usageText = `usage:
  lualock lock [-addr URL | -sentinel ADDRS -master NAME [-sentinel-user U] [-sentinel-password P]] [-ack MODE] [-wait D | -n] [-lease D] [-grace D] [-fair | -read | -write | -fenced | -semaphore N] [-q] [-E N] [-pubsub KIND] NAME -- COMMAND [ARG...]
  lualock status [-addr URL | -sentinel ADDRS -master NAME [-sentinel-user U] [-sentinel-password P]] [-ack MODE] [-json] NAME
  lualock unlock -force [-addr URL | -sentinel ADDRS -master NAME [-sentinel-user U] [-sentinel-password P]] [-ack MODE] [-fair] [-pubsub KIND] NAME
  lualock help
  lualock --version

lualock takes the Redis lock NAME (a Redisson-compatible RLock or, with
-fair, RFairLock; with -read or -write, RReadWriteLock's read or write
lock; with -fenced, RFencedLock; with -semaphore N, one permit of
RPermitExpirableSemaphore), runs COMMAND while holding it and releases it
when the command exits. Flags may come before or after NAME; "--" ends them.

subcommands:
  lock     take NAME, run COMMAND, release NAME when it exits. Stdin, stdout
           and stderr are the command's.
           Processes: COMMAND runs in a process group of its own, started
           by a supervisor (a second lualock process, in a group of its
           own too). Nothing of the command outlives lualock:
           - when COMMAND exits, what it left running (its group and, on
             Linux, every process it started, even one that left the group)
             gets SIGTERM, then SIGKILL after -grace, before NAME is
             released;
           - when lualock dies, even by SIGKILL, the supervisor kills the
             command and everything it started at once (SIGKILL), then
             releases NAME, so that the next waiter gets it at once; should
             the supervisor die too, NAME expires with its lease. On
             Linux the kernel also sends the command SIGKILL if the
             supervisor dies (a parent-death signal), and lualock kills
             what a killed supervisor leaves. On other Unix systems the process group
             stands for "everything it started": a process that leaves it
             (setsid) is not stopped.
           Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to lualock go
           to the command's process group. In the foreground of a terminal
           the command's group gets the terminal, so Ctrl-C reaches it
           directly and it can read the terminal.
           Waiting: unless -q, lualock says on stderr who holds NAME (for a
           lualock holder its pid, host, command and since when, else the
           owner field; for a read-write lock, whether the writer or
           readers hold it), the lease left and, with -fair, its place in
           the queue; again when that changes (read every second); and a
           line when it gets NAME after waiting. Nothing when it gets NAME
           at once. With -q, nothing either when NAME is not obtained
           within -wait (the exit status says it): only errors.
           Connecting: a first contact with Redis (or with the Sentinels
           and the primary they name) that fails for a reason that may
           pass (refused, reset, EOF, timeout) is tried again within
           -wait, or for up to 5s with -n or without -wait.
           Holding: the command's environment has LUALOCK_NAME (NAME),
           LUALOCK_HOLDER (the owner field C:H of the hold in NAME's hash)
           and LUALOCK_LEASE (the fixed -lease, or the watchdog lease,
           renewed every third of it, as a Go duration); with -fenced,
           LUALOCK_TOKEN (the hold's fencing token); with -semaphore,
           LUALOCK_PERMIT (the permit's id) instead of LUALOCK_HOLDER. Beside the lock,
           never in its hash, lualock keeps the key
           lualock_holder:{NAME}:FIELD (lualock_holder:NAME:FIELD when NAME
           has a hash tag; same cluster slot) with its host, pid, command
           and start, expiring with the hold; status shows it.
           Loss: if the lock is lost while the command runs (deleted,
           force-unlocked, expired, Redis lost it) or its -lease runs out,
           lualock prints "lualock: lock NAME lost: CAUSE", sends SIGTERM to
           everything of the command, SIGKILL after -grace, and exits 3.
           Redis tells lualock of every change of the held key (client-side
           caching), so a delete, an expiry, a force unlock (lualock's or
           Redisson's), FLUSHALL, an overwrite or a restart that lost it is
           noticed within milliseconds. A release that fails, or lands
           after the lease ran out, once the command finished under the
           lock is a warning; the exit status is then the command's.
  status   print whether NAME is locked, its holders with their hold
           counts (and, for lualock holders of every kind, pid, host,
           command and since when), the remaining lease and, for a fair lock, the queue of
           waiters with their deadlines. It needs no -fair (accepted, and
           unnecessary): a fair lock's queue is shown whenever there is
           one. Exits 0 whether locked or not. -json prints one object:
           name, locked, lease_ms (remaining lease; -1: no expiry; absent
           when not locked), holders [{field, holds, lualock: {host, pid,
           command, since}}] (lualock absent for other holders), queue [{id,
           deadline_ms, remaining_ms}] (deadline_ms in Unix ms;
           remaining_ms from server_time_ms, the server's TIME),
           server_time_ms, replica_ack (the -ack setting in effect, with
           its timeout), replicas (those of NAME's primary; -1: unknown).
           For a semaphore (a string key): its available
           permits and the permits taken, each with its lease left and,
           for a lualock holder, its record; -json adds available and
           permits [{id, deadline_ms, remaining_ms}], and holders lists
           the permits (field: the permit's id).
  unlock   with -force, delete NAME whoever holds it and wake a waiter
           (for a fair lock, the head of its queue: -fair, or found out
           when NAME has a queue; a read-write lock in its mode). A key
           that is not a lock is left as it is: exit 1, saying what it is.
           Only the holder can release a lock normally: for a lock taken by
           "lualock lock", that happens when its command exits.
  help     print this text (also -h, --help).
  version  print the module version and VCS revision lualock was built
           from (also --version).

A NAME that lock refuses (empty, over 64 KiB, a brace without a hash tag
such as a{b) is refused by every subcommand, exit 2, before anything is
sent to Redis.

flags:
  -addr URL   Redis server: redis://[user:password@]host:port[/db],
              rediss://... (TLS), unix:///path, or plain host:port.
              Without -addr: $REDIS_URL, else redis://127.0.0.1:6379; an
              empty -addr '' is refused. Any node of a Redis Cluster will
              do: lualock sees that it is one and follows the cluster.
  -sentinel ADDRS
              Sentinels (host:port,host:port,...) of a Sentinel-managed
              Redis: lualock reaches the primary they name for -master,
              and follows it through a failover. -addr (or $REDIS_URL) then
              only gives the primary's credentials and db. Default
              $LUALOCK_SENTINEL.
  -master N   with -sentinel: the master name the Sentinels know the
              primary by. Default $LUALOCK_SENTINEL_MASTER.
  -sentinel-user U
              with -sentinel: the Sentinels' own ACL user. Default
              $LUALOCK_SENTINEL_USERNAME.
  -sentinel-password P
              with -sentinel: the Sentinels' own password (their
              requirepass), apart from the primary's (in -addr's URL).
              Default $LUALOCK_SENTINEL_PASSWORD, which is better: a flag
              shows in ps. lualock never prints it, and its supervisor
              gets it through a pipe, not on its command line. The
              command inherits lualock's environment, as under flock.
  -ack MODE   lock, unlock, status: replica acknowledgement after each
              acquisition: one (the default: wait until a replica of the
              primary has it, so that a failover keeps it; a lock no
              replica confirms within the timeout is given back and lock
              exits 1), all (every connected replica), or off. A primary
              without replicas costs nothing. Default $LUALOCK_REPLICA_ACK,
              else one. status shows the setting in effect and the
              primary's replicas.
  -wait D     lock: give up when NAME is not obtained within D of
              lualock's start, connecting included (0: one attempt,
              which a Redis that does not answer may hold up to 5s).
              Default: wait as long as it takes.
  -n          lock: same as -wait 0.
  -lease D    lock: hold NAME with a fixed lease D, not renewed. When it runs
              out before the command exits, the command is stopped as for a
              lost lock (exit 3). Default: the watchdog renews the lease
              (LUALOCK_WATCHDOG_LEASE) as long as the command runs.
  -grace D    lock: time between SIGTERM and SIGKILL when the lock is lost,
              and for what the command left running. Default 10s.
  -fair       lock: NAME is a fair lock (FIFO queue of waiters, Redisson's
              RFairLock). unlock: the same, found out from the queue when
              not given. status: accepted, unnecessary.
  -read       lock: take the read lock of the read-write lock NAME
              (Redisson's RReadWriteLock): shared with other readers,
              excluded by a writer.
  -write      lock: take its write lock: excluded by every other reader
              and writer. Readers keep entering while the lock is in read
              mode, so a writer can wait long behind a stream of readers.
  -fenced     lock: NAME is a fenced lock (Redisson 4.x's RFencedLock):
              each acquisition takes the next fencing token of NAME, which
              the command gets in $LUALOCK_TOKEN to hand to the resource
              it protects (which refuses a token smaller than one it saw).
  -semaphore N
              lock: take one permit of the permit-expirable semaphore NAME
              (Redisson's RPermitExpirableSemaphore), setting it to N
              permits if it does not exist. The permit is renewed like a
              lock and comes back when its lease runs out unrenewed.
  -q          lock: say nothing on stderr while waiting, nor when NAME is
              not obtained within -wait; errors are still said.
  -E N        lock: exit status when NAME is not obtained within -wait
              (0..255). Default 4.
  -json       status: print one JSON object instead of text.
  -pubsub K   lock, unlock: the pub/sub kind of release messages: auto,
              plain, sharded or both. Default: $LUALOCK_PUBSUB, else
              auto, which is what Redisson 3.22 and later do: sharded
              (SPUBLISH/SSUBSCRIBE) on a Redis Cluster, plain
              (PUBLISH/SUBSCRIBE) otherwise. On a cluster shared with
              Redisson before 3.22 use plain; with Redisson of both
              kinds, both. A waiter on the wrong kind hears no release
              and wakes only at its fallback timer, seconds later.
  -force      unlock: required; delete the lock whoever holds it.

durations are Go durations: 300ms, 1.5s, 2m, 1h.

environment:
  REDIS_URL               default for -addr.
  LUALOCK_WATCHDOG_LEASE  lease that the watchdog keeps renewing (every
                          third of it) when -lease is not given. Default
                          30s, as Redisson's lockWatchdogTimeout. A holder
                          that dies without releasing blocks others for up
                          to this long; a short one detects a lost lock
                          sooner but renews more often.
  LUALOCK_PUBSUB          default for -pubsub: auto, plain, sharded or
                          both.
  LUALOCK_SENTINEL        default for -sentinel.
  LUALOCK_SENTINEL_MASTER default for -master.
  LUALOCK_SENTINEL_USERNAME
                          default for -sentinel-user.
  LUALOCK_SENTINEL_PASSWORD
                          default for -sentinel-password.
  LUALOCK_REPLICA_ACK     default for -ack: one, all or off.
  LUALOCK_REPLICA_ACK_TIMEOUT
                          how long an acquisition waits for the replicas'
                          acknowledgement. Default 1s, as Redisson's.
  LUALOCK_FAIR_WAIT       -fair: the wait budget of each waiter (at least
                          500ms). Default 5m, as Redisson's fair lock. A
                          waiter that dies while queued holds the queue up
                          for up to this long. Every client of one fair
                          lock, Redisson's included, must use the same
                          budget: a handoff takes one budget off every
                          waiter's deadline.

exit status:
  0..255  lock: the command's exit status, 128+N if signal N ended it
  0       status, unlock: success
  1       error: Redis unreachable, failing, or silent until -wait ran out
          (whether NAME is held is then unknown); the supervisor killed
          from outside; other runtime error
  2       usage error: bad flags, bad or missing NAME, missing "--" or
          COMMAND
  3       lock: the lock was lost (or -lease ran out) while the command ran
  4       lock: NAME was not obtained within -wait (another status with -E)
  126     lock: COMMAND was found but cannot be run (not executable, a
          directory, a bad binary)
  127     lock: COMMAND was not found
  128+N   lock: signal N interrupted lualock while it waited for NAME
lualock's own statuses can collide with the command's (1..4, 126, 127):
lualock explains its own on stderr, and -E moves "not obtained" out of the
way.
`

// shortUsage is what lualock without arguments prints.
const shortUsage = `usage: lualock lock [flags] NAME -- COMMAND [ARG...]   run COMMAND holding the lock NAME
       lualock status [-json] NAME                      who holds NAME
       lualock unlock -force NAME                       delete NAME whoever holds it
       lualock help                                     every flag, the environment, the exit statuses
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run is the command line: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, shortUsage)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case superviseCmd:
		return runSupervisor(rest)
	case "lock":
		return runLock(rest, stdin, stdout, stderr)
	case "status":
		return runStatus(rest, stdout, stderr)
	case "unlock":
		return runUnlock(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
		return exitOK
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.String("lualock"))
		return exitOK
	default:
		return usagef(stderr, "unknown subcommand %q (want lock, status, unlock or help)", sub)
	}
}

// usagef prints a usage error and returns exitUsage.
func usagef(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "lualock: "+format+"\n", args...)
	fmt.Fprintln(stderr, `run "lualock help" for usage`)
	return exitUsage
}

// errorf prints a runtime error and returns code.
func errorf(stderr io.Writer, code int, format string, args ...any) int {
	fmt.Fprintf(stderr, "lualock: "+format+"\n", args...)
	return code
}

// newFlagSet returns a flag set for a subcommand whose usage line is synopsis.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lualock "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: lualock %s %s\n", name, synopsis)
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), `run "lualock help" for the exit codes and the environment`)
	}
	return fs
}

// parseInterleaved parses args with fs, allowing flags after the positional
// arguments too (lualock status NAME -json), and returns the positionals.
// args must not contain "--" (the caller splits it off first).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseFlags parses a subcommand's flags and its single NAME argument. It
// returns the exit code to stop with, or -1 to go on. check, when not nil,
// runs after the flags parsed and before NAME is checked; it returns an exit
// code or -1 too.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, check func() int) (string, int) {
	stderr := fs.Output()
	fs.SetOutput(io.Discard) // parse errors are printed below, prefixed
	pos, err := parseInterleaved(fs, args)
	fs.SetOutput(stderr)
	sub := strings.TrimPrefix(fs.Name(), "lualock ")
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return "", exitOK
	}
	if err != nil {
		return "", usagef(stderr, "%s: %v", sub, err)
	}
	if check != nil {
		if code := check(); code >= 0 {
			return "", code
		}
	}
	switch {
	case len(pos) == 0:
		return "", usagef(stderr, "%s: missing NAME", sub)
	case len(pos) > 1:
		return "", usagef(stderr, "%s: want one NAME, got %d arguments: %q", sub, len(pos), pos)
	case pos[0] == "":
		return "", usagef(stderr, "%s: empty NAME", sub)
	}
	return pos[0], -1
}
