// Package pubsub is the suite of how waiters are woken over Redis
// pub/sub, on every backend: one shared connection and one
// subscription per lock, none left behind, the fallback timer, reconnects
// (shared_test.go); sharded pub/sub on a cluster, its reconnects and slot
// migrations (sharded_test.go); which kind of release message (PUBLISH,
// SPUBLISH) each Options.PubSub mode hears and sends (kind_test.go). Holds
// are watched by the hold tracker: see the loss suite.
package pubsub
