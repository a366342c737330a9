-- Sets a semaphore's permits if it has none yet (Redisson's trySetPermits).
--
-- When the semaphore key N does not exist it is set to permits (with a TTL
-- when ttl_ms > 0, as Redisson 4.x's trySetPermits(p, ttl) does) and permits
-- is published on the semaphore channel; an existing key is left as it is.
-- Serves the plain and the permit-expirable semaphore, which share N and the
-- channel. The outcome is kept under the request's latch key for latch_ms,
-- so a call sent again after a lost reply replays it instead of reporting
-- "already set".
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    permits    int     permits to set, 0 or more
-- @arg    ttl_ms     int     time to live of N in milliseconds; 0: none
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @return int   1 when the permits were set; 0 when N existed already
-- @flag   idempotent

local sem = KEYS[1]
local channel = KEYS[2]
local request = KEYS[3]
local permits = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local latch_ms = tonumber(ARGV[3])
local publish = ARGV[4]

if not permits or permits < 0 or permits % 1 ~= 0 then
  return redis.error_reply('ERR lualock: permits must be a whole number, 0 or more')
end
if not ttl or ttl < 0 or ttl % 1 ~= 0 then
  return redis.error_reply('ERR lualock: ttl_ms must be a whole number, 0 for none')
end
if not latch_ms or latch_ms <= 0 or latch_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify_value.lua"

local replay = redis.call('get', request)
if replay then
  return tonumber(replay)
end

if redis.call('exists', sem) == 1 then
  return 0
end
if ttl > 0 then
  redis.call('set', sem, permits, 'px', ttl)
else
  redis.call('set', sem, permits)
end
notify_value(channel, permits)
redis.call('set', request, 1, 'px', latch_ms)
return 1
