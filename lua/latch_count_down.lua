-- Counts a count-down latch down by one (Redisson's
-- CountDownLatch.countDown).
--
-- The count is decreased; when it reaches zero the latch key is deleted and
-- "0" is published on the latch channel, which wakes the awaiters. A
-- missing latch is left missing and nothing is published (Redisson creates
-- -1 and deletes it: the same end state). Redisson never resends a count
-- down, since a resent DECR counts twice; here the new count is kept under
-- the request's latch key for latch_ms, so a call sent again after a lost
-- reply replays it instead of counting down again.
--
-- The channel and cluster limit are those of latch_try_set_count.lua: a
-- name with its own hash tag is refused by a cluster (CROSSSLOT).
--
-- @key    latch      the count-down latch N: a string integer, the count
-- @key    channel    the latch channel "redisson_countdownlatch__channel__{" .. N .. "}"
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @return int   the count after this call; 0 when the latch is open (reached zero now, or was missing)
-- @flag   idempotent

local latch = KEYS[1]
local channel = KEYS[2]
local request = KEYS[3]
local latch_ms = tonumber(ARGV[1])
local publish = ARGV[2]

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

if redis.call('exists', latch) == 0 then
  return 0
end
local v = redis.call('decr', latch)
if v <= 0 then
  redis.call('del', latch)
end
if v == 0 then
  notify_value(channel, 0)
end
if v < 0 then
  v = 0
end
redis.call('set', request, v, 'px', latch_ms)
return v
