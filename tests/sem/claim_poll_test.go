package sem

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// attempts counts the acquire scripts' calls on the semaphore sem per
// waiter id (ARGV[3] of semaphore_acquire and expirable_semaphore_acquire).
type attempts struct {
	sem string
	mu  sync.Mutex
	by  map[string]int
}

func (h *attempts) note(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) < 3 {
		return
	}
	if name := strings.ToLower(fmt.Sprint(a[0])); name != "evalsha" && name != "eval" {
		return
	}
	nk, err := strconv.Atoi(fmt.Sprint(a[2]))
	if err != nil || nk < 1 || len(a) < 3+nk+3 || fmt.Sprint(a[3]) != h.sem {
		return
	}
	h.mu.Lock()
	h.by[fmt.Sprint(a[3+nk+2])]++
	h.mu.Unlock()
}

// reset forgets the attempts counted so far.
func (h *attempts) reset() {
	h.mu.Lock()
	clear(h.by)
	h.mu.Unlock()
}

func (h *attempts) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.by)
}

func (h *attempts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *attempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.note(cmd)
		}
		return next(ctx, cmds)
	}
}
func (h *attempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}

// TestSemaphoreAPI_claimNoPolling: of three idle semaphore waiters (plain:
// for 3, 1 and 2 permits, the one for 3 first; permit-expirable: three for
// one permit), only the one holding the claim (the script's refusal tells
// it) attempts again without a message, at least twice in 2.5 s (every
// second, on its own timer), and the claim stays alive; the others send
// nothing for 2.5 s (their fallback timer is Options.MaxWaitTimer, 20 s).
// Before, every waiter that had been refused retried on the channel's
// shared 1 s timer, which woke one waiter at a time: each of the three
// sent one attempt in 2.5 s, the claimer's refresh included.
// Then one AddPermits message serves them all.
func TestSemaphoreAPI_claimNoPolling(t *testing.T) {
	for _, kind := range []string{"plain", "expirable"} {
		t.Run(kind, func(t *testing.T) {
			if testing.Short() {
				t.Parallel() // the quick loop: each kind waits 3s per backend, on names of its own
			}
			forEachBackend(t, func(t *testing.T, b backend) {
				c := ctx(t)
				name := uniqueName(t, false)
				// Added before the client: the hooks added after it do not
				// see its script calls (they go on its pipelined connection).
				h := &attempts{sem: name, by: map[string]int{}}
				b.rdb.AddHook(h)
				cl := newClient(t, b, lualock.Options{MaxWaitTimer: 20 * time.Second})
				k := newSemKeys(name)
				var add func() error
				var wants []int
				var acquire func(n int) error
				if kind == "plain" {
					s := cl.NewSemaphore(name)
					if ok, err := s.TrySetPermits(c, 0); err != nil || !ok {
						t.Fatalf("TrySetPermits: %v %v", ok, err)
					}
					wants = []int{3, 1, 2}
					acquire = func(n int) error { return s.Acquire(c, n) }
					add = func() error { _, err := s.AddPermits(c, 6); return err }
				} else {
					s := cl.NewPermitExpirableSemaphore(name)
					if ok, err := s.TrySetPermits(c, 0); err != nil || !ok {
						t.Fatalf("TrySetPermits: %v %v", ok, err)
					}
					wants = []int{1, 1, 1}
					acquire = func(int) error {
						p, err := s.Acquire(c)
						if err == nil {
							err = p.Release(c)
						}
						return err
					}
					add = func() error { _, err := s.AddPermits(c, 3); return err }
				}
				done := make(chan error, len(wants))
				for i, n := range wants {
					go func() { done <- acquire(n) }()
					if i == 0 {
						// The first waiter takes the claim before the others come.
						for until := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
							if b.rdb.Exists(c, k.claim).Val() == 1 {
								break
							}
							if time.Now().After(until) {
								t.Fatal("the first waiter took no claim")
							}
						}
					}
				}
				time.Sleep(500 * time.Millisecond) // subscribed, first attempts made
				h.reset()
				time.Sleep(2500 * time.Millisecond)
				got := h.snapshot()
				claim := get(t, b.rdb, k.claim)
				claimer := claim[strings.IndexByte(claim, ':')+1:]
				if len(got) != 1 || got[claimer] < 2 {
					t.Fatalf("attempts per waiter in 2.5 s idle: %v; want only the claimer %q's refreshes, at least 2 (every 1 s; claim %q)", got, claimer, claim)
				}
				if want := fmt.Sprintf("%d:", wants[0]); !strings.HasPrefix(claim, want) {
					t.Fatalf("claim = %q, want the first waiter's %s...", claim, want)
				}
				if d := pttl(t, b.rdb, k.claim); d <= 0 {
					t.Fatalf("claim PTTL %v: not kept alive", d)
				}
				if err := add(); err != nil {
					t.Fatal(err)
				}
				for range wants {
					select {
					case err := <-done:
						if err != nil {
							t.Fatal(err)
						}
					case <-time.After(timeout):
						t.Fatal("a waiter not woken by AddPermits")
					}
				}
			})
		})
	}
}
