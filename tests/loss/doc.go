// Package loss is the suite of how a holder learns that its hold is gone
// and what a release that arrives late or twice says: the hold tracker
// (client-side caching) ends a hold's Context with ErrLockLost for every
// change that ends the hold in Redis (a delete, an expiry, a force unlock,
// FLUSHALL, an overwrite, a restart that lost it), for every kind of hold
// (reentrant, fair, fenced, spin, write, read, fixed lease, permit), on
// the standalone server, the cluster and behind a Sentinel
// (sentinel_test.go), and for no change that leaves it
// (a renewal, a re-entry, another reader) (causes_test.go, holdwatch_test.go);
// the loss latency per cause (bench_test.go); and the outcome of an Unlock
// whose reply was lost, or that the network held up past the lease
// (unlock_test.go). miniredis has no client-side caching: these run on
// the real servers only.
package loss
