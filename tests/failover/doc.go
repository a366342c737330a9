// Package failover is the failover suite: locks of every kind taken on a
// replicated deployment (a Sentinel-managed primary with one or two
// replicas, or a cluster whose masters have a replica each, from the
// harness) whose replication link lags, then the primary crashed and its
// replica promoted, round after round. With replica acknowledgement
// (lualock.Options.ReplicaAck, one or all) no round's second holder
// obtains what the first still holds; without it the rounds show the
// overlaps it prevents. The same rounds check that holders of a lost hold
// are told (and time it), that waiters follow the new primary and are
// woken, and that the watchdog keeps renewing the holds that survived.
package failover
