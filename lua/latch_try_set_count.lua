-- Sets a count-down latch's count if it has none (Redisson's
-- CountDownLatch.trySetCount).
--
-- When the latch key N does not exist it is set to count and "1" is
-- published on the latch channel ("a new count was set"); an existing
-- latch is left as it is. A latch can be set again once it has counted
-- down to zero (its key is gone then). The outcome is kept under the
-- request's latch key for latch_ms, so a call sent again after a lost reply
-- replays it instead of reporting "already set".
--
-- The channel is Redisson's "redisson_countdownlatch__channel__{" .. N ..
-- "}", braces always added. When N holds a hash tag of its own, the channel
-- hashes to another cluster slot than N: a cluster refuses this script
-- (CROSSSLOT), as it refuses Redisson's. Such names work on a single Redis
-- only.
--
-- @key    latch      the count-down latch N: a string integer, the count
-- @key    channel    the latch channel "redisson_countdownlatch__channel__{" .. N .. "}"
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @arg    count      int     the count, 1 or more
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @return int   1 when the count was set; 0 when the latch existed already
-- @flag   idempotent

local latch = KEYS[1]
local channel = KEYS[2]
local request = KEYS[3]
local count = tonumber(ARGV[1])
local latch_ms = tonumber(ARGV[2])
local publish = ARGV[3]

if not count or count < 1 or count % 1 ~= 0 or count > 9007199254740991 then
  return redis.error_reply('ERR lualock: count must be a positive integer')
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

if redis.call('exists', latch) == 1 then
  return 0
end
redis.call('set', latch, string.format('%d', count))
notify_value(channel, 1)
redis.call('set', request, 1, 'px', latch_ms)
return 1
