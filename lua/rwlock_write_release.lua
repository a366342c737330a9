-- Releases one write hold of the read-write lock.
--
-- A resend after a lost reply is not applied twice: by the hold count the
-- caller names, and for the last write hold by the request's latch (see
-- include/latch.lua), as in lock_release. While write holds remain, N's lease is extended to at least
-- lease_ms. On the last write hold the write field goes: with nothing else
-- in N the lock is deleted; when the owner still has read holds (it took
-- them while writing: a downgrade) N stays with mode "read". Either way "1"
-- is published on the lock's channel, which wakes every waiter: writers
-- when the lock is free, readers in both cases (Redisson publishes nothing
-- after a downgrade, so its waiting readers sleep until their timer).
--
-- @key    lock      the lock hash N
-- @key    channel   the read-write lock's channel: waiters listen here
-- @key    latch     unlock latch of N for this request id
-- @arg    lease_ms  int     lease to keep at least when write holds remain, in milliseconds
-- @arg    field     string  owner field C:H (the write field is C:H:write)
-- @arg    latch_ms  int     how long the latch replays the outcome, in milliseconds
-- @arg    publish   string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    holds     int     the owner's write hold count before this release, as the caller knows it; 0: unknown
-- @return int?  nil when the owner held no write hold; 0 when write holds remain; 1 when the write lock was released
-- @flag   idempotent

local lock = KEYS[1]
local channel = KEYS[2]
local latch = KEYS[3]
local lease_ms = ARGV[1]
local field = ARGV[2]
local latch_ms = ARGV[3]
local publish = ARGV[4]
local before = tonumber(ARGV[5])

-- @include "include/whole.lua"
local lease = whole(lease_ms)
if not lease then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer, in digits, below 10^15')
end
if field == '' then
  return redis.error_reply('ERR lualock: field must not be empty')
end
if not whole(latch_ms) then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer, in digits, below 10^15')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify_value.lua"
if not before or before < 0 or before % 1 ~= 0 then
  return redis.error_reply('ERR lualock: holds must be a whole number, 0 when unknown')
end

-- @include "include/latch.lua"

local replay = before == 0 and replayed()
if replay then
  return replay
end
local writer = field .. ':write'
local got = redis.call('hmget', lock, writer, 'mode')
local holds = tonumber(got[1])
if not holds then
  return before > 0 and replayed() or nil
end
if got[2] ~= 'write' then
  return nil
end
if holds == before - 1 then
  -- Released already by this request: a write hold remains.
  return 0
end

if holds > 1 then
  redis.call('hincrby', lock, writer, -1)
  local pttl = redis.call('pttl', lock)
  if pttl >= 0 and pttl < lease then
    redis.call('pexpire', lock, lease_ms)
  end
  keep(0)
  return 0
end

-- N keeps the writer's own read holds, if any, in read mode.
if redis.call('hlen', lock) == 2 then
  redis.call('del', lock)
else
  redis.call('hdel', lock, writer)
  redis.call('hset', lock, 'mode', 'read')
end
notify_value(channel, 1)
keep(1)
return 1
