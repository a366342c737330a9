package family

// Checks of script replies, of keys and of the messages on a channel.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/luart"
	"github.com/lualock/lualock/tests/internal/backends"
)

// acquired returns a check that an acquisition returned 0 and no error:
// acquired(t, "what")(call()).
func acquired(t *testing.T, what string) func(int64, error) {
	return func(got int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got != 0 {
			t.Fatalf("%s = %d, want 0 (acquired)", what, got)
		}
	}
}

// refused returns a check that an acquisition returned a wait in
// [1, maxWait] ms and no error.
func refused(t *testing.T, what string, maxWait int64) func(int64, error) {
	return func(got int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got < 1 || got > maxWait {
			t.Fatalf("%s = %d, want a wait (the lock's PTTL) in [1, %d]", what, got, maxWait)
		}
	}
}

// released returns a check that a release returned want (-1: nil) and no
// error.
func released(t *testing.T, what string, want int64) func(*int64, error) {
	return func(got *int64, err error) {
		t.Helper()
		releasedCheck(t, what, got, err, want)
	}
}

func releasedCheck(t *testing.T, what string, got *int64, err error, want int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	switch {
	case want == -1 && got != nil:
		t.Fatalf("%s = %d, want nil (not held)", what, *got)
	case want != -1 && got == nil:
		t.Fatalf("%s = nil, want %d", what, want)
	case want != -1 && *got != want:
		t.Fatalf("%s = %d, want %d", what, *got, want)
	}
}

// scriptErr fails unless err is a *luart.Error of script whose text
// contains want.
func scriptErr(t *testing.T, what string, err error, script, want string) {
	t.Helper()
	var se *luart.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: error %v (%T), want a *luart.Error containing %q", what, err, err, want)
	}
	if se.Script != script || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: error %q of %s, want one of %s containing %q", what, err, se.Script, script, want)
	}
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v, want %v", what, err, want)
	}
}

// wantString fails unless key holds the string want.
func wantString(t *testing.T, rdb redis.UniversalClient, key, want string) {
	t.Helper()
	got, err := rdb.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v (want %q)", key, err, want)
	}
	if got != want {
		t.Fatalf("GET %s = %q, want %q", key, got, want)
	}
}

// wantTimeout fails unless key is a read hold's timeout key (the string 1)
// expiring in (lo, hi] ms.
func wantTimeout(t *testing.T, rdb redis.UniversalClient, key string, lo, hi int64) {
	t.Helper()
	wantString(t, rdb, key, "1")
	backends.WantPTTL(t, rdb, key, lo, hi)
}

func del(t *testing.T, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := rdb.Del(context.Background(), k).Err(); err != nil {
			t.Fatalf("DEL %s: %v", k, err)
		}
	}
}

// listener records the messages of one channel, of each kind the backend's
// scripts publish with.
type listener struct {
	t       *testing.T
	rdb     redis.UniversalClient
	ch      string
	subs    []*redis.PubSub
	sharded []bool
}

// listen subscribes to ch (on the cluster also with SSUBSCRIBE) and waits
// for the confirmations; the test's cleanup closes it.
func listen(t *testing.T, b backends.Backend, rdb redis.UniversalClient, ch string) *listener {
	t.Helper()
	l := &listener{t: t, rdb: rdb, ch: ch}
	kinds := []bool{false}
	if b.Cluster {
		kinds = append(kinds, true)
	}
	for _, sharded := range kinds {
		l.subs = append(l.subs, backends.Subscribe(t, rdb, sharded, ch))
		l.sharded = append(l.sharded, sharded)
	}
	return l
}

// want checks that each kind of subscription received exactly msgs since
// the last call, in order (backends.Messages reads up to a barrier, so no
// sleep is needed to show that nothing else came).
func (l *listener) want(msgs ...string) {
	l.t.Helper()
	for i, ps := range l.subs {
		var got []string
		for _, m := range backends.Messages(l.t, l.rdb, ps, l.sharded[i], l.ch) {
			got = append(got, strings.TrimPrefix(m, l.ch+"="))
		}
		if !slices.Equal(got, msgs) && !(len(got) == 0 && len(msgs) == 0) {
			l.t.Fatalf("%s (sharded %v): messages %q, want %q", l.ch, l.sharded[i], got, msgs)
		}
	}
}
