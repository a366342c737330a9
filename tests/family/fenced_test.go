package family

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/tests/internal/backends"

	"github.com/lualock/lualock/generated"
)

// TestFencedScripts: fenced_acquire, with lock_release and
// lock_force_release, as the fenced lock uses them.
func TestFencedScripts(t *testing.T) {
	backends.Table(t, []backends.Scenario{
		{Name: "layout", Run: bothNames(fencedLayout)},
		{Name: "lostReply", Run: bothNames(fencedLostReply)},
		{Name: "tokensIncrease", Run: bothNames(fencedTokensIncrease)},
	})
}

// fencedOK returns a check that a fenced acquisition got the lock with
// token want (0: any), and returns the token.
func fencedOK(t *testing.T, what string, want int64) func([]int64, error) int64 {
	return func(got []int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(got) != 2 || got[0] != 0 || got[1] < 1 || (want != 0 && got[1] != want) {
			t.Fatalf("%s = %v, want [0 %d]", what, got, want)
		}
		return got[1]
	}
}

// fencedLayout: the reentrant lock's hash, and the token counter taking one
// step per acquisition (re-entry too), never on a resend, never touched by
// release or force release, with no TTL.
func fencedLayout(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	ch := listen(t, b, rdb, n.channel)
	for _, c := range []struct {
		what         string
		field        string
		holds, lease int64
		want         string
	}{
		{"lease 0", r1, 1, 0, "lease_ms must be a positive integer"},
		{"holds 0", r1, 0, lease, "holds must be a positive integer"},
		{"empty field", "", 1, lease, "field must not be empty"},
	} {
		_, err := fencedAcquire(rdb, n, c.field, c.holds, c.lease)
		scriptErr(t, c.what, err, "fenced_acquire", c.want)
	}
	backends.WantGone(t, rdb, n.name, n.token)

	fencedOK(t, "first", 1)(fencedAcquire(rdb, n, r1, 1, lease))
	backends.WantHash(t, rdb, n.name, map[string]string{r1: "1"})
	backends.WantPTTL(t, rdb, n.name, lease-2000, lease)
	wantString(t, rdb, n.token, "1")
	if p := backends.PTTL(t, rdb, n.token); p != -1 {
		t.Fatalf("token counter PTTL %d, want -1 (no expiry)", p)
	}
	fencedOK(t, "resent first", 1)(fencedAcquire(rdb, n, r1, 1, lease))
	fencedOK(t, "re-entry", 2)(fencedAcquire(rdb, n, r1, 2, lease))
	fencedOK(t, "resent re-entry", 2)(fencedAcquire(rdb, n, r1, 2, lease))
	backends.WantHash(t, rdb, n.name, map[string]string{r1: "2"})
	wantString(t, rdb, n.token, "2")

	got, err := fencedAcquire(rdb, n, r2, 1, lease)
	if err != nil || len(got) != 2 || got[0] < 1 || got[0] > lease || got[1] != 0 {
		t.Fatalf("other owner = %v, %v; want [PTTL 0]", got, err)
	}
	_, err = fencedAcquire(rdb, n, r2, 2, lease)
	scriptErr(t, "re-entry without holds", err, "fenced_acquire", "LOST lualock: the earlier holds of c2:7 are gone")
	_, err = fencedAcquire(rdb, n, r1, 4, lease)
	scriptErr(t, "skipped count", err, "fenced_acquire", "hold count of c1:1 is 2, caller expected 3")
	wantString(t, rdb, n.token, "2")

	// Release is the reentrant lock's: "0" on the lock's channel, and
	// the counter stays.
	released(t, "release 1", 0)(lockRelease(rdb, n, n.latch(), r1, 2, lease, pub(b)))
	released(t, "release 2", 1)(lockRelease(rdb, n, n.latch(), r1, 1, lease, pub(b)))
	backends.WantGone(t, rdb, n.name)
	wantString(t, rdb, n.token, "2")
	ch.want("0")

	fencedOK(t, "next owner", 3)(fencedAcquire(rdb, n, r2, 1, lease))
	if ok, err := lockForceRelease(rdb, n, n.latch(), pub(b)); err != nil || !ok {
		t.Fatalf("force release = %v, %v", ok, err)
	}
	wantString(t, rdb, n.token, "3")
	ch.want("0")

	// A counter deleted by hand (fencing is broken then) starts again
	// on a resend, rather than answering no token.
	fencedOK(t, "r1", 4)(fencedAcquire(rdb, n, r1, 1, lease))
	del(t, rdb, n.token)
	fencedOK(t, "resent after the counter was deleted", 1)(fencedAcquire(rdb, n, r1, 1, lease))
	del(t, rdb, n.name, n.token)
}

// fencedLostReply: the script ran but its reply was lost; the call sent
// again (by the wrapper's retry, or by the caller) answers the token the
// first run took, and the counter moved once.
func fencedLostReply(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	h := &backends.LoseReplies{SHA: generated.FencedAcquireSHA1}
	hr := backends.Hooked(t, rdb, h)
	fencedOK(t, "warm up", 1)(fencedAcquire(hr, n, r2, 1, lease))
	released(t, "release", 1)(lockRelease(rdb, n, n.latch(), r2, 1, lease, pub(b)))
	for holds := int64(1); holds <= 2; holds++ {
		lost := h.Lost.Load()
		h.Left.Store(1)
		got, err := fencedAcquire(hr, n, r1, holds, lease)
		if err != nil {
			got, err = fencedAcquire(hr, n, r1, holds, lease) // the caller's resend
		}
		if h.Lost.Load() != lost+1 {
			t.Fatal("no reply was dropped")
		}
		fencedOK(t, fmt.Sprintf("acquire to %d holds, reply lost", holds), holds+1)(got, err)
		backends.WantHash(t, rdb, n.name, map[string]string{r1: fmt.Sprint(holds)})
		wantString(t, rdb, n.token, fmt.Sprint(holds+1))
	}
	del(t, rdb, n.name, n.token)
}

// fencedTokensIncrease: owners on separate connections take the lock in
// turn; the tokens of successive holds increase strictly, each hold's token
// is the counter's value while it holds, and no two holds overlap. Bounded:
// 4 owners x 40 holds, 60 s.
func fencedTokensIncrease(t *testing.T, b backends.Backend, rdb redis.UniversalClient, n names) {
	const owners, perOwner = 4, 40
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var tokens []int64
	var inside atomic.Int32
	errs := make(chan error, owners)
	var wg sync.WaitGroup
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			field := fmt.Sprintf("owner%d:%d", o, o)
			for range perOwner {
				var tok int64
				for {
					got, err := fencedAcquire(rdb, n, field, 1, lease)
					if err != nil {
						errs <- err
						return
					}
					if got[0] == 0 {
						tok = got[1]
						break
					}
					select {
					case <-ctx.Done():
						errs <- ctx.Err()
						return
					case <-time.After(time.Millisecond):
					}
				}
				if inside.Add(1) != 1 {
					errs <- fmt.Errorf("two holders at once (token %d)", tok)
				}
				mu.Lock()
				tokens = append(tokens, tok)
				mu.Unlock()
				inside.Add(-1)
				latch := tag("redisson_unlock_latch", n.name) + ":" + fmt.Sprintf("%s-%d", field, tok)
				if _, err := lockRelease(rdb, n, latch, field, 1, lease, pub(b)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(tokens) != owners*perOwner {
		t.Fatalf("%d holds, want %d", len(tokens), owners*perOwner)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("hold %d took token %d after token %d: not strictly increasing", i, tokens[i], tokens[i-1])
		}
	}
	if tokens[len(tokens)-1] != owners*perOwner {
		t.Fatalf("last token %d, want %d (one per acquisition)", tokens[len(tokens)-1], owners*perOwner)
	}
	del(t, rdb, n.token)
}
