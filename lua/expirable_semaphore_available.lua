-- Reads a permit-expirable semaphore's permits after giving back the
-- expired ones (Redisson's availablePermits and 4.x's acquiredPermits, in
-- one call). It writes, as Redisson's does: expired permits come back
-- (include/expirable_reclaim.lua) and that is published.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    timeouts   the lease zset sfx(N, "timeout"): permit id -> deadline, epoch ms
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @return []int  {available permits (0 when N is missing), permits held under a lease or without one}
-- @flag   idempotent

local sem = KEYS[1]
local timeouts = KEYS[2]
local channel = KEYS[3]
local publish = ARGV[1]

if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify_value.lua"

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- @include "include/expirable_reclaim.lua"
reclaim()

return { tonumber(redis.call('get', sem) or 0), redis.call('zcard', timeouts) }
