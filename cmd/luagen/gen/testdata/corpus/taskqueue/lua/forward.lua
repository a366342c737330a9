-- Moves the scheduled tasks that are due to the pending list, 100 at
-- most per call.
--
-- @key    scheduled  the scheduled zset, by due time
-- @key    pending    the pending list
-- @arg    now        int     unix seconds
-- @arg    prefix     string  the task key prefix ({qname}:t:)
-- @return int        how many were moved
-- @prefix prefix
local ids = redis.call("ZRANGE", KEYS[1], "-inf", ARGV[1], "BYSCORE", "LIMIT", 0, 100)
for _, id in ipairs(ids) do
  redis.call("LPUSH", KEYS[2], id)
  redis.call("ZREM", KEYS[1], id)
  redis.call("HSET", ARGV[2] .. id, "state", "pending")
end
return table.getn(ids)
