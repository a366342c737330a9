-- Reads the state of a lock as one owner sees it, in one round trip.
--
-- @key    lock   the lock hash N
-- @arg    field  string  owner field C:H
-- @return []int  {1 if the lock exists else 0, hold count of the owner, PTTL in ms (-2: no lock, -1: no expiry)}
-- @flag   read-only
-- @flag   idempotent

local lock = KEYS[1]
local holds = tonumber(redis.call('hget', lock, ARGV[1]) or 0)
return { redis.call('exists', lock), holds, redis.call('pttl', lock) }
