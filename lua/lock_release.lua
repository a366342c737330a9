-- Releases one hold of the reentrant lock.
--
-- A release that is sent again after a lost reply must not release a
-- second hold. The hold count the caller names is what makes that so: a
-- count one lower than it says the release was done already, and the
-- release replays "holds remain". Only the release of the last hold needs
-- more, since it leaves no count behind: it keeps its outcome for a short
-- time under a latch key named after the request id, read only when the
-- owner's field is gone, so that its resend replays "released" instead of
-- "held nothing". A caller that names no count (0) gets a latch for every
-- release, read first. On the last hold the lock is deleted and "0" is
-- published on the release channel, as Redisson does.
--
-- @key    lock       the lock hash N
-- @key    channel    release channel of N: waiters listen here
-- @key    latch      unlock latch of N for this request id
-- @arg    lease_ms   int     lease to set when holds remain, in milliseconds
-- @arg    field      string  owner field C:H
-- @arg    latch_ms   int     how long the latch replays the outcome, in milliseconds
-- @arg    publish    string  how to publish: publish, spublish, both (publish, then spublish) or none (the spin lock)
-- @arg    holds      int     the owner's hold count before this release, as the caller knows it; 0: unknown
-- @return int?  nil when the owner held nothing; 0 when holds remain; 1 when the lock was released
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
if not whole(lease_ms) then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer, in digits, below 10^15')
end
if not whole(latch_ms) then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer, in digits, below 10^15')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' and publish ~= 'none' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both (or none: the spin lock)')
end
-- @include "include/notify.lua"
if not before or before < 0 or before % 1 ~= 0 then
  return redis.error_reply('ERR lualock: holds must be a whole number, 0 when unknown')
end

-- @include "include/latch.lua"

-- Without a count the latch comes first; with one only when the field is
-- gone (the common case reads the field and no latch).
local replay = before == 0 and replayed()
if replay then
  return replay
end
local holds = tonumber(redis.call('hget', lock, field))
if not holds then
  return before > 0 and replayed() or nil
end
if holds == before - 1 then
  -- Released already by this request: a hold remains.
  return 0
end

if holds > 1 then
  redis.call('hincrby', lock, field, -1)
  redis.call('pexpire', lock, lease_ms)
  keep(0)
  return 0
end

redis.call('del', lock)
notify(channel)
keep(1)
return 1
