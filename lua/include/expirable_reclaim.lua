-- Included by the permit-expirable semaphore scripts (luagen's include):
-- reclaim() gives back the permits whose deadline has passed, as every
-- Redisson operation on the object does first: it removes the members of the
-- lease zset whose score is at most now, adds their number to the available
-- count and, when that count is then positive, publishes it on the
-- semaphore's channel. At most 1000 permits come back per call (the rest on
-- the next call), which bounds the script's run time. It returns how many
-- came back. It reads the script's locals sem, timeouts, channel, publish
-- and now (Redis's TIME, in ms) and needs include/notify_value.lua.
local function reclaim()
  local expired = redis.call('zrangebyscore', timeouts, '-inf', string.format('%d', now), 'limit', 0, 1000)
  if #expired == 0 then
    return 0
  end
  for i = 1, #expired, 500 do
    redis.call('zrem', timeouts, unpack(expired, i, math.min(i + 499, #expired)))
  end
  local v = redis.call('incrby', sem, #expired)
  if v > 0 then
    notify_value(channel, v)
  end
  return #expired
end
