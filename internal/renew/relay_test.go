package renew

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/generated"
)

// fakeRelay carries the calls of one spec on a client of its own, or
// fails them (a broken tracking connection).
type fakeRelay struct {
	rdb  *redis.Client
	spec *Spec
	fail atomic.Bool
	hang atomic.Bool // no reply until the wait's context ends

	mu   sync.Mutex
	args [][]any // the calls it carried
}

func (r *fakeRelay) Send(spec *Spec, _, _ []string, cmd *redis.Cmd) func(context.Context) {
	if spec != r.spec {
		return nil
	}
	r.mu.Lock()
	r.args = append(r.args, cmd.Args())
	r.mu.Unlock()
	return func(ctx context.Context) {
		if r.hang.Load() {
			<-ctx.Done()
		}
		if r.fail.Load() || r.hang.Load() {
			cmd.SetErr(errors.New("relay: no reply"))
			return
		}
		_ = r.rdb.Process(ctx, cmd)
	}
}

// carried reports whether some call the relay carried renews key, and
// whether every such call asked for rearm.
func (r *fakeRelay) carried(key string) (carried, rearm bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rearm = true
	for _, a := range r.args {
		// EVALSHA sha 1 key lease rearm field
		if len(a) == 7 && a[3] == key {
			carried = true
			rearm = rearm && a[5] == true
		}
	}
	return carried, carried && rearm
}

// A Relay carries the calls it takes, with rearm, and the client sends
// none of them; the calls it refuses go through the client without
// rearm; a relayed call that fails, or gets no reply in half the round's
// time, goes through the client in the same round, so its entry is
// renewed all the same.
func TestWatchdog_relay(t *testing.T) {
	t.Parallel()
	r := &fakeRelay{spec: lockSpec}
	mr, _, h, w := start(t, Config{Lease: 600 * time.Millisecond, Relay: r})
	r.rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() { _ = r.rdb.Close() }()
	if err := generated.LockRenewScript.Load(t.Context(), r.rdb); err != nil {
		t.Fatal(err)
	}
	held(t, mr, "relayed", "direct")
	s := newEnds()
	relayed := s.add(t, w, lockSpec, "relayed", time.Now())
	direct := s.add(t, w, otherSpec, "direct", time.Now())
	first := time.Now()
	waitFor(t, 10*time.Second, "a renewal of both", func() bool {
		return renewedAt(w, relayed).After(first) && renewedAt(w, direct).After(first)
	})
	if carried, rearm := r.carried("relayed"); !carried || !rearm {
		t.Errorf("relay: carried %v, with rearm %v; want both", carried, rearm)
	}
	if carried, _ := r.carried("direct"); carried {
		t.Error("relay carried a call of a spec it refuses")
	}
	if p := h.sentSince(0); carries(p, "relayed") || !carries(p, "direct") {
		t.Errorf("client's pipelines carry relayed %v, direct %v; want false, true", carries(p, "relayed"), carries(p, "direct"))
	}

	r.fail.Store(true)
	sent, failed := h.sent(), time.Now()
	waitFor(t, 10*time.Second, "a renewal of the relayed entry after the relay fails", func() bool {
		return renewedAt(w, relayed).After(failed)
	})
	if !carries(h.sentSince(sent), "relayed") {
		t.Error("the failed relayed call was not sent by the client")
	}

	r.fail.Store(false)
	r.hang.Store(true)
	sent, hung := h.sent(), time.Now()
	waitFor(t, 10*time.Second, "a renewal of the relayed entry while the relay hangs", func() bool {
		return renewedAt(w, relayed).After(hung)
	})
	if !carries(h.sentSince(sent), "relayed") {
		t.Error("the hung relayed call was not sent by the client")
	}
	if got, _ := s.of("relayed"); len(got) != 0 {
		t.Errorf("relayed ended: %v", got)
	}
}
