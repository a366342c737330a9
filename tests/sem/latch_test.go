package sem

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lualock/lualock/generated"
)

// latchOps runs the count-down latch's scripts on one name.
type latchOps struct {
	b       backend
	name    string
	channel string
}

func newLatch(b backend, name string) latchOps {
	return latchOps{b: b, name: name, channel: latchChannel(name)}
}

func (l latchOps) trySet(ctx context.Context, count int64, req string) (int64, error) {
	return generated.LatchTrySetCount(ctx, l.b.rdb,
		generated.LatchTrySetCountKeys{Latch: l.name, Channel: l.channel, Request: req},
		generated.LatchTrySetCountArgs{Count: count, LatchMS: latchMS, Publish: l.b.publish})
}

func (l latchOps) countDown(ctx context.Context, req string) (int64, error) {
	return generated.LatchCountDown(ctx, l.b.rdb,
		generated.LatchCountDownKeys{Latch: l.name, Channel: l.channel, Request: req},
		generated.LatchCountDownArgs{LatchMS: latchMS, Publish: l.b.publish})
}

func (l latchOps) count(ctx context.Context) (int64, error) {
	return generated.LatchCount(ctx, l.b.rdb, generated.LatchCountKeys{Latch: l.name})
}

// TestLatch_layout: Redisson's layout: N a string count without TTL, "1"
// published on the braces-always channel when a count is set, "0" when it
// reaches zero and N is deleted; a latch can be set again once open.
func TestLatch_layout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		l := newLatch(b, uniqueName(t, false))
		if !strings.HasPrefix(l.channel, "redisson_countdownlatch__channel__{") {
			t.Fatal(l.channel)
		}
		msgs := listen(t, b, l.channel)
		expect(t, "count of missing", 0)(l.count(c))
		expect(t, "countDown of missing", 0)(l.countDown(c, requestKey(l.name)))
		if n := b.rdb.Exists(c, l.name).Val(); n != 0 {
			t.Fatal("countDown created N")
		}
		msgs.none(t, 50*time.Millisecond)

		expect(t, "trySetCount", 1)(l.trySet(c, 2, requestKey(l.name)))
		if v := get(t, b.rdb, l.name); v != "2" {
			t.Fatalf("N = %q, want 2", v)
		}
		if d := pttl(t, b.rdb, l.name); d != -1 {
			t.Fatalf("PTTL N = %v, want none", d)
		}
		if m := msgs.next(t, timeout); m != "1" {
			t.Fatalf("trySetCount published %q, want 1", m)
		}
		expect(t, "trySetCount again", 0)(l.trySet(c, 5, requestKey(l.name)))
		expect(t, "countDown", 1)(l.countDown(c, requestKey(l.name)))
		msgs.none(t, 50*time.Millisecond)
		expect(t, "count", 1)(l.count(c))
		expect(t, "countDown to zero", 0)(l.countDown(c, requestKey(l.name)))
		if m := msgs.next(t, timeout); m != "0" {
			t.Fatalf("countDown to zero published %q, want 0", m)
		}
		if n := b.rdb.Exists(c, l.name).Val(); n != 0 {
			t.Fatal("an open latch's key is left")
		}
		expect(t, "reuse", 1)(l.trySet(c, 1, requestKey(l.name)))
	})
}

// TestLatch_resent: a count down sent again with its request id (its reply
// lost) counts once: Redisson never resends countDown for that reason.
func TestLatch_resent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		l := newLatch(b, uniqueName(t, false))
		req := requestKey(l.name)
		expect(t, "trySetCount", 1)(l.trySet(c, 3, req))
		expect(t, "trySetCount resent", 1)(l.trySet(c, 3, req))
		req = requestKey(l.name)
		expect(t, "countDown", 2)(l.countDown(c, req))
		expect(t, "countDown resent", 2)(l.countDown(c, req))
		expect(t, "count", 2)(l.count(c))
		must(t)(l.countDown(c, requestKey(l.name)))
		msgs := listen(t, b, l.channel)
		req = requestKey(l.name)
		expect(t, "last countDown", 0)(l.countDown(c, req))
		if m := msgs.next(t, timeout); m != "0" {
			t.Fatalf("published %q, want 0", m)
		}
		expect(t, "last countDown resent", 0)(l.countDown(c, req))
		msgs.none(t, 50*time.Millisecond)
	})
}

// TestLatch_badInput: bad counts and arguments are error replies and change
// nothing.
func TestLatch_badInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		l := newLatch(b, uniqueName(t, false))
		must(t)(l.trySet(c, 2, requestKey(l.name)))
		msgs := listen(t, b, l.channel)
		req := requestKey(l.name)
		before := dump(t, b.rdb, l.name, req)
		bad := l
		bad.b.publish = "PUBLISH"
		for _, tc := range []struct {
			call func() (int64, error)
			want string
		}{
			{func() (int64, error) { return l.trySet(c, 0, req) }, "count must be"},
			{func() (int64, error) { return l.trySet(c, -3, req) }, "count must be"},
			{func() (int64, error) { return bad.trySet(c, 1, req) }, "publish must be"},
			{func() (int64, error) { return bad.countDown(c, req) }, "publish must be"},
		} {
			_, err := tc.call()
			wantErr(t, err, tc.want)
		}
		_, err := generated.LatchCountDownScript.Run(c, b.rdb, []string{l.name, l.channel, req}, "0", b.publish)
		wantErr(t, err, "latch_ms must be")
		if after := dump(t, b.rdb, l.name, req); after != before {
			t.Fatalf("state changed by refused calls:\nbefore %s\nafter  %s", before, after)
		}
		msgs.none(t, 100*time.Millisecond)
	})
}

// TestLatch_bracedName: Redisson's latch channel always adds braces, so for
// a name with a hash tag of its own ("{app}:x") the channel
// "redisson_countdownlatch__channel__{{app}:x}" hashes to another slot than
// the name. A single Redis does not care; a cluster refuses the scripts
// with CROSSSLOT (as it refuses Redisson's) and nothing changes. The Go
// objects refuse such names on a cluster up front.
func TestLatch_bracedName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		l := newLatch(b, uniqueName(t, true))
		if !b.cluster {
			expect(t, "trySetCount", 1)(l.trySet(c, 1, requestKey(l.name)))
			expect(t, "countDown", 0)(l.countDown(c, requestKey(l.name)))
			return
		}
		_, err := l.trySet(c, 1, requestKey(l.name))
		wantErr(t, err, "CROSSSLOT")
		if n := b.rdb.Exists(c, l.name).Val(); n != 0 {
			t.Fatal("a refused trySetCount set N")
		}
		if err := b.rdb.Set(c, l.name, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, err = l.countDown(c, requestKey(l.name))
		wantErr(t, err, "CROSSSLOT")
		if v := get(t, b.rdb, l.name); v != "1" {
			t.Fatalf("N = %q after a refused countDown, want 1", v)
		}
	})
}

// TestLatch_countDownLoad: many goroutines count one latch of C down, each
// call's reply lost once in a while and resent: the latch opens exactly
// when C calls have been made, publishes "0" once, and no call sees a count
// out of order. Bounded: C = 300.
func TestLatch_countDownLoad(t *testing.T) {
	const count, workers = 300, 10
	forEachBackend(t, func(t *testing.T, b backend) {
		c := ctx(t)
		l := newLatch(b, uniqueName(t, false))
		must(t)(l.trySet(c, count, requestKey(l.name)))
		msgs := listen(t, b, l.channel)
		lost := &lostReply{sha: generated.LatchCountDownSHA1}
		b.rdb.AddHook(lost)
		var calls, zeros, resent atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for calls.Add(1) <= count {
					if calls.Load()%7 == 0 {
						lost.armed.Store(true)
					}
					req := requestKey(l.name)
					v, err := l.countDown(c, req)
					for errors.Is(err, errLost) {
						resent.Add(1)
						v, err = l.countDown(c, req)
					}
					if err != nil {
						errs <- err
						return
					}
					if v == 0 {
						zeros.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if resent.Load() == 0 {
			t.Fatal("no reply was lost")
		}
		if zeros.Load() != 1 {
			t.Fatalf("%d calls saw the count reach 0, want exactly 1 (the last)", zeros.Load())
		}
		if m := msgs.next(t, timeout); m != "0" {
			t.Fatalf("published %q, want 0", m)
		}
		msgs.none(t, 50*time.Millisecond)
		if n := b.rdb.Exists(c, l.name).Val(); n != 0 {
			t.Fatal("latch still set")
		}
		t.Logf("%d count downs, %d resent", count, resent.Load())
	})
}
