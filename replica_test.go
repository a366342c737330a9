package lualock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// TestReplicaAck_text: the modes' names round-trip, any other text and an
// out-of-range mode are ErrInvalid.
func TestReplicaAck_text(t *testing.T) {
	for text, want := range map[string]lualock.ReplicaAck{"one": lualock.ReplicaAckOne, "ALL": lualock.ReplicaAckAll, "Off": lualock.ReplicaAckOff} {
		var got lualock.ReplicaAck
		if err := got.UnmarshalText([]byte(text)); err != nil || got != want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", text, got, err, want)
		}
		if b, err := want.MarshalText(); err != nil || string(b) != want.String() {
			t.Errorf("%v.MarshalText = %q, %v", want, b, err)
		}
	}
	for _, bad := range []string{"", "1", "none", "one "} {
		var got lualock.ReplicaAck
		if err := got.UnmarshalText([]byte(bad)); !errors.Is(err, lualock.ErrInvalid) {
			t.Errorf("UnmarshalText(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := lualock.ReplicaAck(7).MarshalText(); !errors.Is(err, lualock.ErrInvalid) {
		t.Errorf("ReplicaAck(7).MarshalText = %v, want ErrInvalid", err)
	}
}

// TestReplicaAck_options: New refuses an unknown mode and a timeout under
// 1ms (WAIT counts milliseconds); the zero value is ReplicaAckOne.
func TestReplicaAck_options(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, o := range []lualock.Options{
		{ReplicaAck: lualock.ReplicaAck(-1)},
		{ReplicaAck: lualock.ReplicaAck(3)},
		{ReplicaAckTimeout: -time.Second},
		{ReplicaAckTimeout: time.Microsecond},
	} {
		if c, err := lualock.New(rdb, o); !errors.Is(err, lualock.ErrInvalid) {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("New with %+v: %v, want ErrInvalid", o, err)
		}
	}
	var zero lualock.ReplicaAck
	if zero != lualock.ReplicaAckOne {
		t.Errorf("the zero ReplicaAck is %v, want one (on by default)", zero)
	}
}
