// Package luart is the runtime of the Go packages luagen generates: what
// every generated wrapper calls to run its Lua script on Redis, and the one
// retry policy and transient-error classifier of lualock, whose lock
// runtime uses them too.
//
// A generated package holds, for each script, its source, its SHA1 (computed
// by luagen: nothing hashes at run time), typed Keys and Args and a wrapper;
// the wrapper calls [Script.Run], which sends EVALSHA (EVALSHA_RO for a
// read-only script, FCALL or FCALL_RO for a script built into a Redis
// Functions library), loads the script when Redis answers NOSCRIPT and
// calls again, and never sends the source with EVAL.
//
// Idempotent scripts are retried on transient errors ([Transient]) under a
// [Retry] policy: [DefaultRetry] (3 calls in all, 8 ms then 16 ms of
// jittered backoff, capped at 100 ms, never past the context's deadline),
// or the policy [WithRetry] binds to a client. The package has no mutable
// globals: two users of one generated package in one process each bind
// their own policy to their own client.
//
//	c := luart.WithRetry(rdb, luart.Retry{Attempts: 5, Backoff: 10 * time.Millisecond, MaxBackoff: time.Second})
//	n, err := scripts.Incr(ctx, c, scripts.IncrKeys{Counter: "hits"}, scripts.IncrArgs{By: 1})
//
// In a pipeline, which only queues commands, a script is queued with
// [Script.Cmd] (the generated XCmd functions) and its reply read after Exec
// (XResult); [LoadAll] loads the scripts beforehand.
package luart
