// Package lualockrueidis runs lualock's scripts on a rueidis client, which
// sends the calls of concurrent goroutines to Redis together on a few
// pipelined connections (and a lone call at once, without waiting for
// company), and routes each call by its keys' slot on a cluster. It is a
// module of its own, so that lualock itself depends on go-redis only.
//
//	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
//	...
//	client, err := lualock.New(rdb, lualock.Options{Scripter: lualockrueidis.Scripter(rc)})
//
// The go-redis client rdb stays: lualock's pub/sub, watchdog renewals, hold
// tracker and unlock-latch sweeper use it, and rc must reach the same Redis
// deployment. Scripter converts each reply to what go-redis would have
// returned, so lualock handles NOSCRIPT, WRONGTYPE and its other error
// replies as it does on go-redis. docs/GUIDE.md (Many goroutines:
// Options.Scripter) says when it pays.
package lualockrueidis

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Scripter returns a redis.Scripter that sends every call through c, for
// lualock.Options.Scripter. EVALSHA and EVAL honour their context as rueidis
// does (a call returns the context's error when it ends, even while Redis
// has not answered); SCRIPT LOAD and SCRIPT EXISTS go to every node of a
// cluster client, as go-redis's cluster client sends them. It does not
// close c. A nil c gives a Scripter whose every call fails with an error.
func Scripter(c rueidis.Client) redis.Scripter { return &scripter{c: c} }

// errNilClient is the error of every call of a Scripter made on a nil client.
var errNilClient = errors.New("lualockrueidis: nil rueidis client")

type scripter struct{ c rueidis.Client }

func (s *scripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "eval", script, keys, args)
}

func (s *scripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "evalsha", sha1, keys, args)
}

func (s *scripter) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "eval_ro", script, keys, args)
}

func (s *scripter) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "evalsha_ro", sha1, keys, args)
}

// eval sends one script call and returns it as go-redis's Cmd, with the
// same arguments and the reply decoded as go-redis decodes it.
func (s *scripter) eval(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	flat := flatten(args)
	all := make([]any, 0, 3+len(keys)+len(flat))
	all = append(all, name, payload, len(keys))
	for _, k := range keys {
		all = append(all, k)
	}
	all = append(all, flat...)
	cmd := redis.NewCmd(ctx, all...)
	if s.c == nil {
		cmd.SetErr(errNilClient)
		return cmd
	}
	strs, err := strArgs(flat)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	built, err := s.build(name, payload, keys, strs)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	v, err := reply(s.c.Do(ctx, built))
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = redis.ErrNoScript // as go-redis's Eval family returns it
	}
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	cmd.SetVal(v)
	return cmd
}

// build makes the rueidis command. On a cluster client rueidis's builder
// panics on keys of different slots; go-redis would send the call and get
// Redis's CROSSSLOT error, which build returns instead.
func (s *scripter) build(name, payload string, keys, args []string) (cmd rueidis.Completed, err error) {
	defer func() {
		if r := recover(); r != nil {
			if !strings.Contains(fmt.Sprint(r), "different key slots") {
				panic(r)
			}
			err = redis.ErrCrossSlot
		}
	}()
	b, n := s.c.B(), int64(len(keys))
	switch name {
	case "eval":
		return b.Eval().Script(payload).Numkeys(n).Key(keys...).Arg(args...).Build(), nil
	case "eval_ro":
		return b.EvalRo().Script(payload).Numkeys(n).Key(keys...).Arg(args...).Build(), nil
	case "evalsha_ro":
		return b.EvalshaRo().Sha1(payload).Numkeys(n).Key(keys...).Arg(args...).Build(), nil
	}
	return b.Evalsha().Sha1(payload).Numkeys(n).Key(keys...).Arg(args...).Build(), nil
}

// ScriptLoad loads script on every node of a cluster client (each node has
// its own script cache), on the one Redis otherwise, and returns its SHA1.
func (s *scripter) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, "script", "load", script)
	if s.c == nil {
		cmd.SetErr(errNilClient)
		return cmd
	}
	nodes := s.nodes()
	if len(nodes) == 0 {
		cmd.SetErr(errors.New("lualockrueidis: SCRIPT LOAD: the client knows no node"))
		return cmd
	}
	for _, c := range nodes {
		v, err := reply(c.Do(ctx, c.B().ScriptLoad().Script(script).Build()))
		if err != nil {
			cmd.SetErr(err)
			return cmd
		}
		sha, ok := v.(string)
		if !ok {
			cmd.SetErr(fmt.Errorf("lualockrueidis: SCRIPT LOAD replied %#v, want a string", v))
			return cmd
		}
		cmd.SetVal(sha)
	}
	return cmd
}

// ScriptExists reports, for each hash, whether Redis has the script: on a
// cluster client, whether every node has it.
func (s *scripter) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	args := make([]any, 0, 2+len(hashes))
	args = append(args, "script", "exists")
	for _, h := range hashes {
		args = append(args, h)
	}
	cmd := redis.NewBoolSliceCmd(ctx, args...)
	if s.c == nil {
		cmd.SetErr(errNilClient)
		return cmd
	}
	all := make([]bool, len(hashes))
	for i := range all {
		all[i] = true
	}
	for _, c := range s.nodes() {
		v, err := reply(c.Do(ctx, c.B().ScriptExists().Sha1(hashes...).Build()))
		if err != nil {
			cmd.SetErr(err)
			return cmd
		}
		items, ok := v.([]any)
		if !ok || len(items) != len(hashes) {
			cmd.SetErr(fmt.Errorf("lualockrueidis: SCRIPT EXISTS replied %#v, want %d integers", v, len(hashes)))
			return cmd
		}
		for i, item := range items {
			n, _ := item.(int64)
			all[i] = all[i] && n == 1
		}
	}
	cmd.SetVal(all)
	return cmd
}

// nodes are where SCRIPT LOAD and SCRIPT EXISTS go: every node of a
// cluster client, the client itself otherwise.
func (s *scripter) nodes() []rueidis.Client {
	if s.c.Mode() != rueidis.ClientModeCluster {
		return []rueidis.Client{s.c}
	}
	var out []rueidis.Client
	for _, c := range s.c.Nodes() {
		out = append(out, c)
	}
	return out
}

// replyError is an error reply of Redis, with Redis's text as go-redis
// gives it (rueidis trims a leading "ERR "): a redis.Error, as go-redis's
// own error replies are, so that redis.HasErrorPrefix and errors.As see it.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks e as a reply of Redis (redis.Error).
func (replyError) RedisError() {}

// reply decodes a result as go-redis's Cmd does: a nil reply is redis.Nil,
// an error reply a redis.Error with Redis's text, an error of the
// connection or the context as rueidis returns it.
func reply(r rueidis.RedisResult) (any, error) {
	if err := r.NonRedisError(); err != nil {
		return nil, err
	}
	m, _ := r.ToMessage()
	if m.IsNil() {
		return nil, redis.Nil
	}
	return value(&m)
}

// value decodes one message: integers to int64, strings to string, arrays
// and sets to []any (a nil element to nil, an error element to its
// redis.Error), maps to map[any]any, RESP3 booleans, doubles and big
// numbers to bool, float64 and *big.Int.
func value(m *rueidis.RedisMessage) (any, error) {
	if m.Error() != nil {
		// ToString returns an error reply's text untrimmed.
		text, _ := m.ToString()
		return nil, replyError(text)
	}
	switch {
	case m.IsInt64():
		return m.AsInt64()
	case m.IsString():
		return m.ToString()
	case m.IsArray():
		items, err := m.ToArray()
		if err != nil {
			return nil, err
		}
		out := make([]any, len(items))
		for i := range items {
			if out[i], err = element(&items[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	case m.IsMap():
		kv, err := m.AsMap()
		if err != nil {
			return nil, err
		}
		out := make(map[any]any, len(kv))
		for k, msg := range kv {
			if out[k], err = element(&msg); err != nil {
				return nil, err
			}
		}
		return out, nil
	case m.IsBool():
		return m.ToBool()
	case m.IsFloat64():
		return m.ToFloat64()
	}
	v, err := m.ToAny() // a big number or a verbatim string: its text
	if s, ok := v.(string); ok && err == nil {
		if n, ok := new(big.Int).SetString(s, 10); ok {
			return n, nil
		}
	}
	return v, err
}

// element decodes an element of an array or a map as go-redis does: a nil
// is nil, an error reply is its redis.Error as a value.
func element(m *rueidis.RedisMessage) (any, error) {
	if m.IsNil() {
		return nil, nil
	}
	v, err := value(m)
	if rerr, ok := err.(replyError); ok {
		return rerr, nil
	}
	return v, err
}

// flatten expands the arguments as go-redis's Eval does: a single argument
// that is a []string, a []any or a map is spread into its elements (a
// map's in its own order), and a single nil is no argument.
func flatten(args []any) []any {
	if len(args) != 1 {
		return args
	}
	switch a := args[0].(type) {
	case nil:
		return nil
	case []string:
		out := make([]any, len(a))
		for i, s := range a {
			out[i] = s
		}
		return out
	case []any:
		return a
	case map[string]any:
		out := make([]any, 0, 2*len(a))
		for k, v := range a {
			out = append(out, k, v)
		}
		return out
	case map[string]string:
		out := make([]any, 0, 2*len(a))
		for k, v := range a {
			out = append(out, k, v)
		}
		return out
	}
	return args
}

// strArgs writes the arguments as go-redis writes them on the wire.
func strArgs(args []any) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		s, err := str(a)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// str is one argument as go-redis writes it: numbers in decimal, booleans
// as 1 and 0, a time in RFC 3339 with nanoseconds, a duration in
// nanoseconds, nil as the empty string.
func str(a any) (string, error) {
	switch v := a.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case int:
		return strconv.FormatInt(int64(v), 10), nil
	case int8:
		return strconv.FormatInt(int64(v), 10), nil
	case int16:
		return strconv.FormatInt(int64(v), 10), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint8:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint16:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint32:
		return strconv.FormatUint(uint64(v), 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 64), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		if v {
			return "1", nil
		}
		return "0", nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10), nil
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		return string(b), err
	case net.IP:
		return string(v), nil
	}
	return "", fmt.Errorf("redis: can't marshal %T (implement encoding.BinaryMarshaler)", a)
}
