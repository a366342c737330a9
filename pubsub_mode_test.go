package lualock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
)

// TestPubSubMode_text: every mode's name parses back to it (case ignored),
// and any other text is ErrInvalid, which the CLI's -pubsub relies on.
func TestPubSubMode_text(t *testing.T) {
	for _, m := range []lualock.PubSubMode{lualock.PubSubAuto, lualock.PubSubPlain, lualock.PubSubSharded, lualock.PubSubBoth} {
		b, err := m.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", m, err)
		}
		var got lualock.PubSubMode
		if err := got.UnmarshalText([]byte(string(b))); err != nil || got != m {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, got, err, m)
		}
	}
	for text, want := range map[string]lualock.PubSubMode{"auto": lualock.PubSubAuto, "PLAIN": lualock.PubSubPlain, "Sharded": lualock.PubSubSharded, "both": lualock.PubSubBoth} {
		var got lualock.PubSubMode
		if err := got.UnmarshalText([]byte(text)); err != nil || got != want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "spublish", "shard", "auto "} {
		var got lualock.PubSubMode
		if err := got.UnmarshalText([]byte(bad)); !errors.Is(err, lualock.ErrInvalid) {
			t.Errorf("UnmarshalText(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := lualock.PubSubMode(9).MarshalText(); !errors.Is(err, lualock.ErrInvalid) {
		t.Errorf("PubSubMode(9).MarshalText = %v, want ErrInvalid", err)
	}
	if s := lualock.PubSubMode(9).String(); s != "PubSubMode(9)" {
		t.Errorf("PubSubMode(9).String() = %q", s)
	}
}

// TestOptions_New_shardedPubSubAlias: the deprecated ShardedPubSub still
// asks for sharded pub/sub, alone or with PubSubSharded, and contradicting
// PubSub (plain or both) is ErrInvalid, naming it.
func TestOptions_New_shardedPubSubAlias(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New sends nothing
	defer rdb.Close()
	for _, mode := range []lualock.PubSubMode{lualock.PubSubAuto, lualock.PubSubSharded, lualock.PubSubPlain, lualock.PubSubBoth} {
		c, err := lualock.New(rdb, lualock.Options{ShardedPubSub: true, PubSub: mode})
		ok := mode == lualock.PubSubAuto || mode == lualock.PubSubSharded
		switch {
		case ok && err != nil:
			t.Errorf("ShardedPubSub with PubSub %v: %v", mode, err)
		case !ok && (!errors.Is(err, lualock.ErrInvalid) || !strings.Contains(err.Error(), "ShardedPubSub")):
			t.Errorf("ShardedPubSub with PubSub %v: %v, want ErrInvalid naming ShardedPubSub", mode, err)
		}
		if c != nil {
			_ = c.Close()
		}
	}
}
