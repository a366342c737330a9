-- Takes n permits of a semaphore if that many are available (Redisson's
-- tryAcquire(n)), or takes none.
--
-- A missing semaphore key grants nothing, as in Redisson 3.16 and 4.x. The
-- success is kept under the request's latch key for latch_ms, so a call sent
-- again after a lost reply replays it instead of taking n more permits; past
-- the latch's lifetime a resent call would take them again, so the caller
-- must resend within latch_ms or release what the first call may have taken.
-- A failure changes nothing and needs no latch.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    permits    int     permits to take, 1 or more
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @return int   1 when the permits were taken; 0 when fewer than permits are available (nothing changed)
-- @flag   idempotent

local sem = KEYS[1]
local request = KEYS[2]
local permits = tonumber(ARGV[1])
local latch_ms = tonumber(ARGV[2])

if not permits or permits < 1 or permits % 1 ~= 0 then
  return redis.error_reply('ERR lualock: permits must be a positive integer')
end
if not latch_ms or latch_ms <= 0 or latch_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer')
end

if redis.call('exists', request) == 1 then
  return 1
end

local available = tonumber(redis.call('get', sem))
if not available or available < permits then
  return 0
end
redis.call('decrby', sem, permits)
redis.call('set', request, 1, 'px', latch_ms)
return 1
