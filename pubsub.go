package lualock

import (
	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/internal/wake"
)

// newHub returns the client's wake-up hub (see internal/wake): the waiters
// of every lock share one subscription per channel over the pub/sub kind
// of c.cfg.PubSub (resolved). The hub counts as closed as soon as Close closes
// c.closing, so the waiters Close wakes leave without UNSUBSCRIBE.
func newHub(c *Client) *wake.Hub {
	return wake.New(newTransport(c.rdb, c.cfg.PubSub), wake.Config{
		Linger:        c.cfg.SubscriptionLinger,
		MaxTimer:      c.cfg.MaxWaitTimer,
		Closing:       c.closing,
		ErrClosed:     ErrClosed,
		OnResubscribe: c.resubscribed,
	})
}

// newTransport returns the transport of a resolved mode: SUBSCRIBE,
// SSUBSCRIBE, or with PubSubBoth both, each waiter listening on the two.
func newTransport(rdb redis.UniversalClient, mode PubSubMode) wake.Transport {
	switch mode {
	case PubSubSharded:
		return wake.Sharded(rdb)
	case PubSubBoth:
		return wake.Both(wake.Plain(rdb), wake.Sharded(rdb))
	default:
		return wake.Plain(rdb)
	}
}
