-- Enqueues a task unless its id is taken.
--
-- @key    task     the task hash ({qname}:t:<id>)
-- @key    pending  the queue's pending list
-- @arg    msg      bytes   the encoded task message
-- @arg    id       string  the task id
-- @arg    now_ns   int     enqueue time, in nanoseconds
-- @return int      1 when enqueued, 0 when the id exists
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "pending", "pending_since", ARGV[3])
redis.call("LPUSH", KEYS[2], ARGV[2])
return 1
