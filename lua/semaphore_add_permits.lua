-- Adds permits to a semaphore, or removes them with a negative delta
-- (Redisson's addPermits).
--
-- N is SET to its value (0 when missing) plus delta, which drops any TTL of
-- N, as Redisson's SET does, and the new count is published on the
-- semaphore channel. The count may go negative. The new count is kept under
-- the request's latch key for latch_ms, so a call sent again after a lost
-- reply replays it instead of adding delta twice. The permit-expirable
-- semaphore's addPermits publishes delta rather than the new count, and
-- only when delta > 0: its waiters treat any message as "retry", so this
-- script serves it as well.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    delta      int     permits to add; negative to remove
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @return int   the available permits after the change
-- @flag   idempotent

local sem = KEYS[1]
local channel = KEYS[2]
local request = KEYS[3]
local delta = tonumber(ARGV[1])
local latch_ms = tonumber(ARGV[2])
local publish = ARGV[3]

if not delta or delta % 1 ~= 0 or math.abs(delta) > 9007199254740991 then
  return redis.error_reply('ERR lualock: delta must be a whole number')
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

local v = tonumber(redis.call('get', sem) or 0) + delta
redis.call('set', sem, string.format('%d', v))
notify_value(channel, v)
redis.call('set', request, string.format('%d', v), 'px', latch_ms)
return v
