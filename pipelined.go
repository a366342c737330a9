package lualock

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/lualock/lualock/internal/pipe"
	"github.com/redis/go-redis/v9"
)

// pipeScripter is the default Scripter on a *redis.Client (a failover
// client included): the scripts' EVALSHA and EVALSHA_RO go on the
// Client's own pipelined connection to the server (internal/pipe), dialed
// and set up as rdb's own connections are. Each call still goes through
// rdb.Process, so that the hooks added to rdb before New see it: the
// Client's own hook, pipeHook, sends it on the pipe instead of a pooled
// connection. Every other command of the Scripter interface (SCRIPT LOAD
// after a NOSCRIPT among them), and a call with an argument of a kind the
// pipe does not write, goes through rdb as before.
type pipeScripter struct {
	redis.Scripter
	rdb *redis.Client
	p   *pipe.Pipe
}

// pipeConns is how many connections the pipe spreads calls over.
const pipeConns = 1

// newPipeScripter returns the pipe scripter of rdb.
func newPipeScripter(rdb *redis.Client, spin time.Duration) *pipeScripter {
	opt := rdb.Options()
	p := pipe.New(pipe.Config{
		// A failover client's dialer finds the current primary itself.
		Dial:         func(ctx context.Context) (net.Conn, error) { return opt.Dialer(ctx, opt.Network, opt.Addr) },
		Auth:         auth(opt.Username, opt.Password, opt.CredentialsProvider, opt.CredentialsProviderContext),
		DB:           opt.DB,
		Protocol:     opt.Protocol,
		Name:         opt.ClientName,
		ReadTimeout:  opt.ReadTimeout,
		WriteTimeout: opt.WriteTimeout,
		DialTimeout:  opt.DialTimeout,
		Conns:        pipeConns,
		DialAttempts: max(opt.DialerRetries, 1),
		DialWait: func(attempt int) time.Duration {
			if opt.DialerRetryBackoff != nil {
				return max(opt.DialerRetryBackoff(attempt), 0)
			}
			return opt.DialerRetryTimeout
		},
		Spin: spin,
	})
	rdb.AddHook(pipeHook{p: p})
	return &pipeScripter{Scripter: rdb, rdb: rdb, p: p}
}

// pipeable reports whether rdb's options leave nothing a pipe's
// connection would miss: an OnConnect callback (run on each of rdb's own
// connections), a Limiter (asked before each command of rdb's own) or a
// StreamingCredentialsProvider (re-authenticating rdb's connections)
// keeps the scripts on rdb, through Batched.
func pipeable(rdb *redis.Client) bool {
	opt := rdb.Options()
	return opt.OnConnect == nil && opt.Limiter == nil && opt.StreamingCredentialsProvider == nil
}

// pipeHook sends the pipedCmds of its pipe on it; every other command,
// and every pipeline, goes on down the chain. Each Client adds its own,
// innermost of the hooks rdb has then: the hooks added before see its
// calls. After Close its calls go down the chain, to rdb's pool, and the
// hook stays in rdb's chain, passing everything on.
type pipeHook struct{ p *pipe.Pipe }

func (pipeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h pipeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if pc, ok := cmd.(*pipedCmd); ok && pc.p == h.p && !h.p.Closed() {
			return pc.send(ctx)
		}
		return next(ctx, cmd)
	}
}

func (pipeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// pipedCmd is a script call to send on p.
type pipedCmd struct {
	*redis.Cmd
	p *pipe.Pipe
}

// EvalSha sends EVALSHA on the pipe.
func (s *pipeScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "evalsha", sha1, keys, args)
}

// EvalShaRO sends EVALSHA_RO on the pipe.
func (s *pipeScripter) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "evalsha_ro", sha1, keys, args)
}

// eval makes the command as go-redis's EvalSha does, and processes it.
func (s *pipeScripter) eval(ctx context.Context, name, sha string, keys []string, args []any) *redis.Cmd {
	orig := args
	a := make([]any, 3+len(keys), 3+len(keys)+len(args))
	a[0], a[1], a[2] = name, sha, len(keys)
	for i, k := range keys {
		a[3+i] = k
	}
	if len(args) == 1 {
		switch v := args[0].(type) {
		case []any:
			args = v
		case []string:
			for _, x := range v {
				a = append(a, x)
			}
			args = nil
		case nil:
			args = nil
		}
	}
	for _, x := range args {
		if !pipeableArg(x) {
			// go-redis writes (and flattens) it its own way.
			return evalSha(ctx, s.rdb, name == "evalsha_ro", sha, keys, orig)
		}
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	_ = s.rdb.Process(ctx, &pipedCmd{Cmd: cmd, p: s.p})
	return cmd
}

// send sends c on its pipe and sets its reply, as go-redis would have.
func (c *pipedCmd) send(ctx context.Context) error {
	args := c.Args()
	v, isNil, err := c.p.Do(ctx, func(b []byte) []byte {
		b = pipe.AppendArrayLen(b, len(args))
		for _, a := range args {
			b = appendArg(b, a)
		}
		return b
	})
	switch rerr, isErr := v.(pipe.ReplyError); {
	case errors.Is(err, pipe.ErrClosed):
		c.SetErr(ErrClosed) // Close came while the call was under way
	case err != nil:
		c.SetErr(err)
	case isNil:
		c.SetErr(redis.Nil)
	case isErr:
		c.SetErr(rerr)
	default:
		c.SetVal(v)
	}
	return c.Err()
}

// pipeableArg reports whether the pipe writes a as go-redis would.
func pipeableArg(a any) bool {
	switch a.(type) {
	case string, []byte, int, int64, int32, uint, uint64, uint32, bool, float64:
		return true
	}
	return false
}

// appendArg writes one argument as go-redis does: numbers in decimal,
// booleans as 1 and 0.
func appendArg(b []byte, a any) []byte {
	switch v := a.(type) {
	case string:
		return pipe.AppendString(b, v)
	case []byte:
		return pipe.AppendBytes(b, v)
	case int:
		return appendInt(b, int64(v))
	case int64:
		return appendInt(b, v)
	case int32:
		return appendInt(b, int64(v))
	case uint:
		return pipe.AppendString(b, strconv.FormatUint(uint64(v), 10))
	case uint64:
		return pipe.AppendString(b, strconv.FormatUint(v, 10))
	case uint32:
		return appendInt(b, int64(v))
	case bool:
		if v {
			return pipe.AppendString(b, "1")
		}
		return pipe.AppendString(b, "0")
	case float64:
		return pipe.AppendString(b, strconv.FormatFloat(v, 'f', -1, 64))
	}
	panic("lualock: appendArg of a kind pipeableArg refuses")
}

func appendInt(b []byte, n int64) []byte {
	var num [20]byte
	return pipe.AppendBytes(b, strconv.AppendInt(num[:0], n, 10))
}

// close closes the pipe's connections.
func (s *pipeScripter) close() { s.p.Close() }
