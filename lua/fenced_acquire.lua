-- Takes the fenced lock for one owner, or re-enters it, and issues a
-- fencing token, as Redisson 4.x's RFencedLock does: the lock is the
-- reentrant lock's hash N (field C:H -> hold count) and every acquisition,
-- re-entry included, takes the next value of the token counter (INCR; the
-- counter has no TTL and nothing here deletes it). Release, renewal, force
-- release and waiting are the reentrant lock's (lock_release, lock_renew,
-- lock_force_release, the lock's channel).
--
-- As in lock_acquire, the caller names the hold count the call should
-- leave. A repeated call finds the count reached and takes no new token:
-- it answers the counter's value, which is the token the first call took,
-- since no other owner can acquire the lock (and so draw a token) while
-- this owner holds it. A re-entry that finds the owner's earlier holds gone
-- fails with a LOST error and changes nothing.
--
-- @key    lock      the lock hash N: field C:H -> hold count
-- @key    token     the token counter of N
-- @arg    lease_ms  int     lease to set on the lock, in milliseconds
-- @arg    field     string  owner field C:H
-- @arg    holds     int     hold count after this call (1 for a first acquisition)
-- @return []int  {0, token} when the lock is held with that count; otherwise {the lock's PTTL in ms, at least 1 (-1: no expiry), 0}
-- @flag   idempotent

local lock = KEYS[1]
local token = KEYS[2]
local lease_ms = ARGV[1]
local field = ARGV[2]
local holds = tonumber(ARGV[3])

-- @include "include/whole.lua"
if not whole(lease_ms) then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer, in digits, below 10^15')
end
if field == '' then
  return redis.error_reply('ERR lualock: field must not be empty')
end
if not holds or holds < 1 or holds % 1 ~= 0 then
  return redis.error_reply('ERR lualock: holds must be a positive integer')
end

if redis.call('exists', lock) == 0 then
  if holds ~= 1 then
    return redis.error_reply('LOST lualock: the earlier holds of ' .. field .. ' are gone')
  end
  local t = redis.call('incr', token)
  redis.call('hset', lock, field, '1')
  redis.call('pexpire', lock, lease_ms)
  return { 0, t }
end

local current = tonumber(redis.call('hget', lock, field) or 0)

-- A repeated call: the count is already what the caller asked for.
if current == holds then
  redis.call('pexpire', lock, lease_ms)
  local t = tonumber(redis.call('get', token))
  if not t then
    -- The counter was deleted by hand (fencing is broken already): start it again.
    t = redis.call('incr', token)
  end
  return { 0, t }
end

if current ~= holds - 1 then
  if current == 0 then
    return redis.error_reply('LOST lualock: the earlier holds of ' .. field .. ' are gone')
  end
  return redis.error_reply('ERR lualock: hold count of ' .. field .. ' is ' .. current .. ', caller expected ' .. (holds - 1))
end

if current > 0 then
  local t = redis.call('incr', token)
  redis.call('hincrby', lock, field, 1)
  redis.call('pexpire', lock, lease_ms)
  return { 0, t }
end

local pttl = redis.call('pttl', lock)
if pttl == -1 then
  return { -1, 0 }
end
return { math.max(pttl, 1), 0 }
