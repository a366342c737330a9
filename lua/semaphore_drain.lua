-- Takes every available permit of a semaphore (Redisson's drainPermits).
--
-- An existing N is SET to 0, which drops its TTL as Redisson's does, and the
-- old value is returned; a negative count is returned as it is and also
-- reset to 0, as Redisson does. A missing N stays missing. The outcome is
-- kept under the request's latch key for latch_ms, so a call sent again
-- after a lost reply replays the number drained instead of reporting 0
-- while the first call's permits are counted as taken. A key that is not a
-- semaphore's count (a string holding a whole number) is left as it is: the
-- script answers a WRONGTYPE error that says what it is
-- (include/semaphore_shape.lua).
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @return int   the permits drained (the old value; 0 when N was missing); a WRONGTYPE error when N holds something else
-- @flag   idempotent

local sem = KEYS[1]
local request = KEYS[2]
local latch_ms = tonumber(ARGV[1])

if not latch_ms or latch_ms <= 0 or latch_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer')
end

local replay = redis.call('get', request)
if replay then
  return tonumber(replay)
end

-- @include "include/semaphore_shape.lua"
local what = semaphore_shape(sem)
if what then
  return wrong_type(sem, what, 'a semaphore')
end

local old = redis.call('get', sem)
if not old then
  return 0
end
redis.call('set', sem, 0)
redis.call('set', request, old, 'px', latch_ms)
return tonumber(old)
