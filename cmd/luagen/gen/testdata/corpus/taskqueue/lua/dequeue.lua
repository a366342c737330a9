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
-- @prefix prefix
if redis.call("EXISTS", KEYS[1]) == 0 then
  local id = redis.call("LMOVE", KEYS[2], KEYS[3], "RIGHT", "LEFT")
  if id then
    local key = ARGV[2] .. id
    redis.call("HSET", key, "state", "active")
    redis.call("HDEL", key, "pending_since")
    redis.call("ZADD", KEYS[4], ARGV[1], id)
    return redis.call("HGET", key, "msg")
  end
end
return nil
