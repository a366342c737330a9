// Package tests holds no code: its subdirectories are the integration
// suites of lualock, one package each, run on miniredis, a real standalone
// redis-server and a real 3-master Redis Cluster that the harness package
// starts (each suite's process starts its own shared servers):
//
//   - scripts: the generated script wrappers, script by script;
//   - reentrant: the reentrant lock (and the auto-pipeliner);
//   - fair: the fair lock;
//   - family: the read-write, fenced and spin locks: their scripts' keys,
//     values, expiries and messages as docs/PROTOCOL-PRIMITIVES.md
//     gives them, on a plain and a hash-tagged name, and the Go API;
//   - sem: the semaphores, the permit-expirable semaphore, the count-down
//     latch and the multi-lock: their scripts on a driven
//     miniredis clock and on real servers, and the Go API;
//   - faults: a lock's promise under faults (Redis down, hung, restarted,
//     a cluster master killed, lost or slow replies, ended contexts);
//   - pubsub: waking waiters and watching holds over pub/sub;
//   - interop: against Redisson itself (Java), when its jars are given,
//     on standalone Redis, a cluster and a Sentinel deployment.
//   - failover: locks of every kind through rounds of failovers of a
//     Sentinel deployment and of a cluster whose masters have replicas
//     (the harness's, with lagging replication links), with replica
//     acknowledgement on and off.
//
// internal/backends is what the suites share: the backends and the
// scenario table that loops over them, the TestMain, client constructors,
// fault-injecting hooks, pub/sub probes and waits. harness starts and stops
// the servers.
package tests
