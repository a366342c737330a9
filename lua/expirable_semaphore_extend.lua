-- Sets a new lease on held permits of a permit-expirable semaphore
-- (Redisson's updateLeaseTime), for a caller's watchdog.
--
-- Expired permits come back first (include/expirable_reclaim.lua): an
-- expired permit cannot be revived. Every id still in the lease zset gets
-- the deadline now + lease_ms (Redis's TIME, epoch ms), or Redisson's
-- "never" score 922337203685477 when lease_ms is 0. The reply counts them,
-- so a caller that names n ids and gets fewer back has lost the others.
-- Sending it again sets the same lease again.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    timeouts   the lease zset sfx(N, "timeout"): permit id -> deadline, epoch ms
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @arg    lease_ms   int     the new lease of each permit in milliseconds; 0: no lease (never expires)
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    ids...     bytes   the permits' ids, 16 bytes each, distinct
-- @return int   the number of ids that were held and got the new lease
-- @flag   idempotent

local sem = KEYS[1]
local timeouts = KEYS[2]
local channel = KEYS[3]
local lease = tonumber(ARGV[1])
local publish = ARGV[2]

local never = 922337203685477

if not lease or lease < 0 or lease % 1 ~= 0 or lease >= never then
  return redis.error_reply('ERR lualock: lease_ms must be a whole number, 0 for no lease')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/permit_ids.lua"
local bad = bad_ids(3)
if bad then
  return bad
end
-- @include "include/notify_value.lua"

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- @include "include/expirable_reclaim.lua"
reclaim()

local deadline = never
if lease > 0 then
  deadline = now + lease
end
local score = string.format('%d', deadline)
local extended = 0
for i = 3, #ARGV do
  if redis.call('zscore', timeouts, ARGV[i]) then
    redis.call('zadd', timeouts, score, ARGV[i])
    extended = extended + 1
  end
end
return extended
