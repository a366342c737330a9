package luart

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Script describes one Lua script of a generated package and runs it.
// luagen writes one per script, as a package-level var that the package's
// Scripts lists; its fields are not meant to change at run time.
type Script struct {
	Name       string   // script name, from @name or the file name; the function's name in a Library
	File       string   // source file, relative to the module root
	Source     string   // the file's text, byte for byte, includes expanded
	SHA1       string   // SHA1 of Source, computed by luagen
	Keys       []string // KEYS names in order; "..." marks a variadic last key
	Args       []string // ARGV names in order; "..." marks a variadic last arg
	Return     string   // declared reply type, as written in the header
	ReadOnly   bool     // runs with EVALSHA_RO (FCALL_RO in a Library)
	Idempotent bool     // retried on transient errors (see Retry)
	// Library, when set, is the Redis Functions library the script is
	// built into (luagen's "library" setting): the script runs as the
	// function Name of it, with FCALL, instead of with EVALSHA.
	Library *Library
}

// Library is a Redis Functions library that luagen built from a folder of
// scripts, each a function of it.
type Library struct {
	Name   string // library name, as #!lua name= gives it
	Source string // the library's code, as FUNCTION LOAD takes it
}

// FunctionCaller is what runs the functions of a Library: go-redis's
// Client, ClusterClient, Ring, Conn and pipelines all are, from go-redis
// v9.0.4 (the first with FCallRO); plain scripts need only v9.0.0.
type FunctionCaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FCallRO(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd
}

// ErrPipeline is the cause of the error that Run, Load, LoadAll and the
// generated script functions return when given a pipeline (a
// redis.Pipeliner, as from Pipeline, TxPipeline, Pipelined or
// TxPipelined): a pipeline only queues commands, so they could neither read
// the reply nor recover from NOSCRIPT, and would return a zero value with
// no error. In a pipeline, queue a script with its Cmd function (or
// Script.Cmd) and read the reply with its Result function once the pipeline
// has run; load the scripts first with LoadAll on the client, not on the
// pipeline.
var ErrPipeline = errors.New("cannot run in a pipeline, which only queues commands: queue the script with its Cmd function, read the reply with its Result function after Exec, and load the scripts beforehand with LoadAll on the client")

// Error is the error of a script call: it names the script and wraps the
// cause, so errors.Is and errors.As see redis.Nil, context errors and
// network errors through it.
type Error struct {
	Script string // the script's name
	Err    error  // the cause
}

// Error returns "lua script NAME: cause".
func (e *Error) Error() string { return "lua script " + e.Script + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Run runs the script with EVALSHA (EVALSHA_RO when read-only) or, in a
// Library, with FCALL (FCALL_RO). When Redis answers NOSCRIPT (or does not
// know the function) it loads the script (the library) and calls again; it
// never sends the source with EVAL. An idempotent script is sent again on
// a transient error under the policy of c (see WithRetry, DefaultRetry).
// The reply is go-redis's untyped value, and Redis's errors come as
// go-redis returns them; the generated wrappers convert both. Its own
// errors (a failed load, a pipeline) are *Error. Given a redis.Pipeliner it
// sends nothing and returns an *Error wrapping ErrPipeline: use Cmd in
// pipelines.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) (any, error) {
	c, r := unwrap(c)
	if _, ok := c.(redis.Pipeliner); ok {
		return nil, &Error{Script: s.Name, Err: ErrPipeline}
	}
	if !s.Idempotent {
		r.Attempts = 1
	}
	return r.run(ctx, func() (any, error) { return s.run(ctx, c, keys, args) })
}

// run sends the script once, and once more after loading it when Redis
// does not know it.
func (s *Script) run(ctx context.Context, c redis.Scripter, keys []string, args []any) (any, error) {
	v, err := s.Cmd(ctx, c, keys, args...).Result()
	if err != nil && err != redis.Nil && s.unknown(err) {
		if err := s.Load(ctx, c); err != nil {
			return nil, err
		}
		v, err = s.Cmd(ctx, c, keys, args...).Result()
	}
	return v, err
}

// unknown reports whether err says that Redis does not have the script.
func (s *Script) unknown(err error) bool {
	if s.Library != nil {
		return strings.Contains(err.Error(), "Function not found")
	}
	return redis.HasErrorPrefix(err, "NOSCRIPT")
}

// Cmd sends the script's EVALSHA (EVALSHA_RO; FCALL or FCALL_RO in a
// Library) once, with no NOSCRIPT recovery and no retry. In a pipeline the
// command is only queued, and its reply is there once the pipeline has run:
// load the scripts first with LoadAll on the client.
func (s *Script) Cmd(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	c, _ = unwrap(c)
	if s.Library != nil {
		fc, ok := c.(FunctionCaller)
		if !ok {
			return Failed(ctx, &Error{Script: s.Name, Err: fmt.Errorf("%T cannot FCALL (go-redis v9.0.4 or later can): the scripts are built into the Functions library %s", c, s.Library.Name)})
		}
		if s.ReadOnly {
			return fc.FCallRO(ctx, s.Name, keys, args...)
		}
		return fc.FCall(ctx, s.Name, keys, args...)
	}
	if s.ReadOnly {
		return c.EvalShaRO(ctx, s.SHA1, keys, args...)
	}
	return c.EvalSha(ctx, s.SHA1, keys, args...)
}

// Failed returns a command that was never sent and fails with err: what a
// Cmd function returns when it finds the call wrong before sending it.
func Failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// Load loads the script with SCRIPT LOAD (on every master of a cluster
// client, on every shard of a redis.Ring) and checks that Redis names it by
// the SHA1 luagen computed. A script of a Library loads the whole library
// (Library.Load). Given a redis.Pipeliner it sends nothing and returns an
// *Error wrapping ErrPipeline: a queued SCRIPT LOAD could not be checked.
func (s *Script) Load(ctx context.Context, c redis.Scripter) error {
	c, _ = unwrap(c)
	if s.Library != nil {
		if err := s.Library.Load(ctx, c); err != nil {
			return &Error{Script: s.Name, Err: err}
		}
		return nil
	}
	if _, ok := c.(redis.Pipeliner); ok {
		return &Error{Script: s.Name, Err: fmt.Errorf("script load: %w", ErrPipeline)}
	}
	if r, ok := c.(*redis.Ring); ok {
		// A Ring sends SCRIPT LOAD to one shard; EVALSHA goes to the
		// shard of its first key.
		return r.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			return s.Load(ctx, shard)
		})
	}
	sha, err := c.ScriptLoad(ctx, s.Source).Result()
	if err != nil {
		return &Error{Script: s.Name, Err: fmt.Errorf("script load: %w", err)}
	}
	if sha != s.SHA1 {
		return &Error{Script: s.Name, Err: fmt.Errorf("script load: redis returned sha1 %s, want %s", sha, s.SHA1)}
	}
	return nil
}

// Load loads the library with FUNCTION LOAD REPLACE (on every master of a
// cluster client, on every shard of a redis.Ring) and checks the name Redis
// gives it. Functions persist in RDB and AOF and reach replicas, so a
// restart or a failover does not lose them. Given a redis.Pipeliner it
// sends nothing and returns an error wrapping ErrPipeline.
func (l *Library) Load(ctx context.Context, c redis.Scripter) error {
	c, _ = unwrap(c)
	if _, ok := c.(redis.Pipeliner); ok {
		return fmt.Errorf("load library %s: %w", l.Name, ErrPipeline)
	}
	switch cc := c.(type) {
	case *redis.ClusterClient:
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return l.Load(ctx, m) })
	case *redis.Ring:
		return cc.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error { return l.Load(ctx, m) })
	}
	fc, ok := c.(FunctionCaller)
	if !ok {
		return fmt.Errorf("load library %s: %T cannot FUNCTION LOAD (go-redis v9.0.4 or later can)", l.Name, c)
	}
	name, err := fc.FunctionLoadReplace(ctx, l.Source).Result()
	if err != nil {
		return fmt.Errorf("load library %s: %w", l.Name, err)
	}
	if name != l.Name {
		return fmt.Errorf("load library: redis loaded %q, want %q", name, l.Name)
	}
	return nil
}

// LoadAll loads scripts, for deploys and before pipelines, where NOSCRIPT
// cannot be recovered: each script with Load, each Library they belong to
// once. It tries every script and returns the errors joined. Call it on the
// client, not on a pipeline: given a redis.Pipeliner it returns an error
// wrapping ErrPipeline and sends nothing. A generated package's LoadAll
// calls it with the package's Scripts.
func LoadAll(ctx context.Context, c redis.Scripter, scripts ...*Script) error {
	c, _ = unwrap(c)
	if _, ok := c.(redis.Pipeliner); ok {
		return fmt.Errorf("load all: %w", ErrPipeline)
	}
	var errs []error
	loaded := map[*Library]bool{}
	for _, s := range scripts {
		if l := s.Library; l != nil {
			if !loaded[l] {
				loaded[l] = true
				errs = append(errs, l.Load(ctx, c))
			}
			continue
		}
		errs = append(errs, s.Load(ctx, c))
	}
	return join(errs)
}

// join returns nil when every error of errs is nil, the one error when
// only one is not, and otherwise an error listing them one a line that
// unwraps to all of them (as errors.Join, which needs Go 1.20, would).
func join(errs []error) error {
	var nonNil []error
	for _, err := range errs {
		if err != nil {
			nonNil = append(nonNil, err)
		}
	}
	switch len(nonNil) {
	case 0:
		return nil
	case 1:
		return nonNil[0]
	}
	return joined(nonNil)
}

// joined is the error of several failed loads.
type joined []error

func (e joined) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the errors, for errors.Is and errors.As (Go 1.20 and
// later look into them).
func (e joined) Unwrap() []error { return e }
