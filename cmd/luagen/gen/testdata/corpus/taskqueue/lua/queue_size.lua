-- Sizes of a queue's lists and the memory of its pending tasks, sampled.
--
-- @key    pending  the pending list
-- @key    active   the active list
-- @arg    prefix   string  the task key prefix ({qname}:t:)
-- @arg    sample   int     how many pending tasks to measure
-- @return []int    pending, active, bytes of the sampled tasks
-- @flag   read-only
-- @prefix prefix
local bytes = 0
local ids = redis.call("LRANGE", KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  bytes = bytes + (redis.call("MEMORY", "USAGE", ARGV[1] .. id) or 0)
end
return {redis.call("LLEN", KEYS[1]), redis.call("LLEN", KEYS[2]), bytes}
