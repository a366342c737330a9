-- Moves the oldest pending task to active, unless the queue is paused,
-- and returns its message.
--
-- @key    paused   the queue's paused flag
-- @key    pending  the pending list
-- @key    active   the active list
-- @key    lease    the lease zset
-- @arg    expire   int     lease expiry, unix seconds
-- @arg    prefix   string  the task key prefix ({qname}:t:)
-- @return string?  the task message; nil when paused or empty
if redis.call("EXISTS", KEYS[1]) == 0 then
  local id = redis.call("LMOVE", KEYS[2], KEYS[3], "RIGHT", "LEFT")
  if id then
    local key = ARGV[2] .. id -- luagen:ignore non-key-argument
    redis.call("HSET", key, "state", "active") -- luagen:ignore non-key-argument
    redis.call("HDEL", key, "pending_since") -- luagen:ignore non-key-argument
    redis.call("ZADD", KEYS[4], ARGV[1], id)
    return redis.call("HGET", key, "msg") -- luagen:ignore non-key-argument
  end
end
return nil
