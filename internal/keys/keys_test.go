package keys_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lualock/lualock/internal/keys"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want keys.Lock
	}{
		{"a", keys.Lock{Name: "a", Channel: "redisson_lock__channel:{a}",
			Queue: "redisson_lock_queue:{a}", Timeouts: "redisson_lock_timeout:{a}"}},
		{"x{t}y", keys.Lock{Name: "x{t}y", Channel: "redisson_lock__channel:x{t}y",
			Queue: "redisson_lock_queue:x{t}y", Timeouts: "redisson_lock_timeout:x{t}y"}},
	} {
		if got, want := keys.Tag(keys.UnlockLatchPrefix, tc.name), "redisson_unlock_latch:"+tc.want.Channel[len("redisson_lock__channel:"):]; got != want {
			t.Errorf("unlock latch prefix of %q = %q, want %q", tc.name, got, want)
		}
		if got := keys.Of(tc.name); got != tc.want {
			t.Errorf("Of(%q) = %+v, want %+v", tc.name, got, tc.want)
		}
		k := keys.Of(tc.name)
		for _, key := range []string{k.Channel, k.Queue, k.Timeouts, keys.Tag(keys.UnlockLatchPrefix, tc.name) + ":c:1", k.WaiterChannel("c:1"), keys.Holder(tc.name, "c:1")} {
			if keys.Slot(key) != keys.Slot(k.Name) {
				t.Errorf("%q is in slot %d, the lock %q in %d", key, keys.Slot(key), k.Name, keys.Slot(k.Name))
			}
		}
	}
	if got, want := keys.Holder("a", "c:1"), "lualock_holder:{a}:c:1"; got != want {
		t.Errorf("Holder = %q, want %q", got, want)
	}
	if got, want := keys.Of("a").WaiterChannel("c:1"), "redisson_lock__channel:{a}:c:1"; got != want {
		t.Errorf("WaiterChannel = %q, want %q", got, want)
	}
}

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]int{
		"123456789":               12739, // CRC16/XMODEM check value 0x31C3
		"foo":                     12182,
		"{user1000}.following":    keys.Slot("user1000"),
		"foo{}{bar}":              keys.Slot("foo{}{bar}"),
		"redisson_lock_queue:{a}": keys.Slot("a"),
	} {
		if got := keys.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, name := range []string{"a", "x{t}y", strings.Repeat("n", keys.MaxName)} {
		if err := keys.Check(name); err != nil {
			t.Errorf("Check(%.20q) = %v", name, err)
		}
	}
	for name, want := range map[string]string{
		"":                                  "empty lock name",
		strings.Repeat("n", keys.MaxName+1): "at most 65536 allowed",
		"a{}":                               "has a brace but no hash tag",
		"a}b":                               "has a brace but no hash tag",
	} {
		err := keys.Check(name)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, keys.ErrName) {
			t.Errorf("Check(%.20q) = %v, want one saying %q", name, err, want)
		}
	}
}
