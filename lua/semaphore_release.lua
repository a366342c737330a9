-- Gives n permits back to a semaphore (Redisson's release(n)).
--
-- INCRBY creates the semaphore key when it is missing, as Redisson's does:
-- a plain semaphore has no owners and no upper bound, so releasing permits
-- that were never taken adds permits. The new count is published on the
-- semaphore channel, which is what Redisson's waiters expect. The new count
-- is kept under the request's latch key for latch_ms, so a call sent again
-- after a lost reply replays it instead of adding n more permits.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    permits    int     permits to give back, 1 or more
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @return int   the available permits after the release
-- @flag   idempotent

local sem = KEYS[1]
local channel = KEYS[2]
local request = KEYS[3]
local latch_ms = ARGV[2]
local publish = ARGV[3]

-- @include "include/whole.lua"
if not whole(ARGV[1]) then
  return redis.error_reply('ERR lualock: permits must be a positive integer, in digits, below 10^15')
end
if not whole(latch_ms) then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer, in digits, below 10^15')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify_value.lua"

local replay = redis.call('get', request)
if replay then
  return tonumber(replay)
end

local v = redis.call('incrby', sem, ARGV[1])
notify_value(channel, v)
redis.call('set', request, v, 'px', latch_ms)
return v
