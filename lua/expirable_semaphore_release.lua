-- Gives back permits of a permit-expirable semaphore by id, all or nothing
-- (Redisson 4.x's tryRelease(ids)).
--
-- Expired permits come back first (include/expirable_reclaim.lua), as in
-- 4.x's multi-release; an expired permit named here is then no longer held.
-- If every id is in the lease zset, they are removed, N is increased by
-- their number and the new count is published on the semaphore channel (a
-- positive count wakes Redisson's blocked waiters; they treat the value as
-- a hint). If any id is missing, no permit named here is released. The
-- outcome of a release is kept under the request's latch key for latch_ms,
-- so a call sent again after a lost reply replays it instead of reporting
-- the permits as not held.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    timeouts   the lease zset sfx(N, "timeout"): permit id -> deadline, epoch ms
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    ids...     bytes   the permits' ids, 16 bytes each, distinct
-- @return int   the number of permits released (all the ids); 0 when any id is not held (expired, released, never taken)
-- @flag   idempotent

local sem = KEYS[1]
local timeouts = KEYS[2]
local channel = KEYS[3]
local request = KEYS[4]
local latch_ms = tonumber(ARGV[1])
local publish = ARGV[2]
local n = #ARGV - 2

if not latch_ms or latch_ms <= 0 or latch_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer')
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

local replay = redis.call('get', request)
if replay then
  return tonumber(replay)
end

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- @include "include/expirable_reclaim.lua"
reclaim()

for i = 3, #ARGV do
  if not redis.call('zscore', timeouts, ARGV[i]) then
    return 0
  end
end
for i = 3, #ARGV do
  redis.call('zrem', timeouts, ARGV[i])
end
local v = redis.call('incrby', sem, n)
notify_value(channel, v)
redis.call('set', request, n, 'px', latch_ms)
return n
