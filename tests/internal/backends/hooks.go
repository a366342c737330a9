package backends

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// PassHook is a redis.Hook that changes nothing: the test hooks embed it
// and override the methods they need.
type PassHook struct{}

// DialHook returns next.
func (PassHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook returns next.
func (PassHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook returns next.
func (PassHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// RedisErr is a Redis error reply ("LOADING ...", "ERR ...") made up by a
// test.
type RedisErr string

func (e RedisErr) Error() string { return string(e) }

// RedisError marks e as a reply of the server (go-redis's redis.Error).
func (RedisErr) RedisError() {}

// FailScript fails the EVALSHA calls of one script without sending them,
// while Armed: with io.EOF an outcome the client cannot know, with a
// RedisErr a server that refuses the call. When Field is set, only the
// calls whose ARGV[2] (the owner field of the acquire and release scripts)
// is Field fail.
type FailScript struct {
	PassHook
	SHA   string
	Field string
	Err   error
	Armed atomic.Bool
	Hits  atomic.Int32
}

// ProcessHook fails the matching calls while h is armed.
func (h *FailScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.Armed.Load() && h.matches(cmd.Args()) {
			h.Hits.Add(1)
			cmd.SetErr(h.Err)
			return h.Err
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook fails the matching calls of a pipeline (the
// client's default scripter sends concurrent calls together) and sends
// the others.
func (h *FailScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.Armed.Load() {
			return next(ctx, cmds)
		}
		send := make([]redis.Cmder, 0, len(cmds))
		var first error
		for _, cmd := range cmds {
			if h.matches(cmd.Args()) {
				h.Hits.Add(1)
				cmd.SetErr(h.Err)
				first = cmp.Or(first, h.Err)
				continue
			}
			send = append(send, cmd)
		}
		if len(send) > 0 {
			first = cmp.Or(first, next(ctx, send))
		}
		return first
	}
}

func (h *FailScript) matches(args []any) bool {
	if len(args) < 3 || !strings.EqualFold(fmt.Sprint(args[0]), "evalsha") || args[1] != h.SHA {
		return false
	}
	if h.Field == "" {
		return true
	}
	numKeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	field := 3 + numKeys + 1 // ARGV[2]
	return err == nil && field < len(args) && fmt.Sprint(args[field]) == h.Field
}

// LoseReplies lets the next Left EVALSHA calls of one script run and then
// reports io.EOF to the caller, as a connection that breaks after the
// write: the script's effect is in Redis, its reply is lost. Lost counts
// the replies lost so far. With a Delay, the loss is reported that long
// after the script ran (a connection that hangs, then breaks); LastLoss
// tells when the caller was told.
type LoseReplies struct {
	PassHook
	SHA   string
	Delay time.Duration
	Left  atomic.Int32
	Lost  atomic.Int32
	last  atomic.Pointer[time.Time]
}

// ProcessHook loses the matching replies while Left is above zero.
func (h *LoseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.lose(cmd, err) {
			return io.EOF
		}
		return err
	}
}

// ProcessPipelineHook loses the replies of the matching calls of a
// pipeline (the client's default scripter sends concurrent calls
// together), as a connection that breaks after the pipeline's write.
func (h *LoseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		lost := false
		for _, cmd := range cmds {
			if h.lose(cmd, cmd.Err()) {
				lost = true
			}
		}
		if lost {
			return io.EOF
		}
		return err
	}
}

// lose reports whether cmd, sent with the outcome err, is one whose reply
// is to be lost; if so it waits Delay, records the loss and sets io.EOF
// as cmd's error.
func (h *LoseReplies) lose(cmd redis.Cmder, err error) bool {
	args := cmd.Args()
	if len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && args[1] == h.SHA &&
		(err == nil || errors.Is(err, redis.Nil)) && h.Left.Add(-1) >= 0 {
		time.Sleep(h.Delay)
		now := time.Now()
		h.last.Store(&now)
		h.Lost.Add(1)
		cmd.SetErr(io.EOF)
		return true
	}
	return false
}

// LastLoss returns when the last lost reply was reported to the caller:
// every later send of the script began after it. Zero when none was lost.
func (h *LoseReplies) LastLoss() time.Time {
	if t := h.last.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// Observe is a hook that calls Note with every command once it has run,
// pipelined ones included (the client's default scripter sends concurrent
// calls together).
type Observe struct {
	PassHook
	Note func(cmd redis.Cmder)
}

// ProcessHook notes cmd after it ran.
func (h Observe) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.Note(cmd)
		return err
	}
}

// ProcessPipelineHook notes each of cmds after the pipeline ran.
func (h Observe) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.Note(cmd)
		}
		return err
	}
}

// CountCalls counts the commands, pipelined ones included, for which
// Match reports true.
type CountCalls struct {
	PassHook
	Match func(args []any) bool
	N     atomic.Int64
}

func (h *CountCalls) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if h.Match(c.Args()) {
			h.N.Add(1)
		}
	}
}

// ProcessHook counts cmd.
func (h *CountCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts cmds.
func (h *CountCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds...)
		return next(ctx, cmds)
	}
}
