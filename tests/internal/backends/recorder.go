package backends

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Recorder is a redis.Scripter over a real one (for Options.Scripter or a
// generated wrapper): it counts the script commands sent through it and
// makes the first Fail EVALSHA / EVALSHA_RO calls fail with FailErr
// without sending them, calling OnFail after each.
type Recorder struct {
	redis.Scripter
	Fail    int
	FailErr error
	OnFail  func()

	mu    sync.Mutex
	calls map[string]int
}

func (s *Recorder) record(name string, failable bool) error {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[name]++
	var err error
	f := s.OnFail
	if failable && s.Fail > 0 {
		s.Fail--
		err = s.FailErr
	}
	s.mu.Unlock()
	if err != nil && f != nil {
		f()
	}
	return err
}

// Count returns how many name commands ("evalsha", "script load"...) were
// sent, or failed, so far.
func (s *Recorder) Count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

// Calls returns the counts so far, without the zero ones.
func (s *Recorder) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return NonZero(s.calls)
}

// NonZero returns m without its zero counts.
func NonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func failed(ctx context.Context, name, sha string, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx, name, sha)
	cmd.SetErr(err)
	return cmd
}

// EvalSha counts the call, or fails it while failures are left.
func (s *Recorder) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if err := s.record("evalsha", true); err != nil {
		return failed(ctx, "evalsha", sha, err)
	}
	return s.Scripter.EvalSha(ctx, sha, keys, args...)
}

// EvalShaRO counts the call, or fails it while failures are left.
func (s *Recorder) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if err := s.record("evalsha_ro", true); err != nil {
		return failed(ctx, "evalsha_ro", sha, err)
	}
	return s.Scripter.EvalShaRO(ctx, sha, keys, args...)
}

// Eval counts the call.
func (s *Recorder) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	_ = s.record("eval", false)
	return s.Scripter.Eval(ctx, src, keys, args...)
}

// EvalRO counts the call.
func (s *Recorder) EvalRO(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	_ = s.record("eval_ro", false)
	return s.Scripter.EvalRO(ctx, src, keys, args...)
}

// ScriptLoad counts the call.
func (s *Recorder) ScriptLoad(ctx context.Context, src string) *redis.StringCmd {
	_ = s.record("script load", false)
	return s.Scripter.ScriptLoad(ctx, src)
}

// ScriptExists counts the call.
func (s *Recorder) ScriptExists(ctx context.Context, shas ...string) *redis.BoolSliceCmd {
	_ = s.record("script exists", false)
	return s.Scripter.ScriptExists(ctx, shas...)
}
