package lualock_test

import (
	"errors"
	"testing"

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
