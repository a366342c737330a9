-- Takes the reentrant lock for one owner, or re-enters it.
--
-- The owner is the hash field C:H (client id, holder id). The caller says
-- which hold count this call should leave behind, so a call whose reply was
-- lost and that is sent again finds the count already reached and does not
-- count the re-entry twice. A re-entry that finds the owner's earlier holds
-- gone (expired, deleted) fails with a LOST error and changes nothing.
--
-- Success is 0 rather than nil: go-redis turns a nil reply into an error
-- value, which costs every acquisition a dozen allocations.
--
-- @key    lock      the lock hash N: field C:H -> hold count
-- @arg    lease_ms  int     lease to set on the lock, in milliseconds
-- @arg    field     string  owner field C:H
-- @arg    holds     int     hold count after this call (1 for a first acquisition)
-- @return int   0 when the lock is held with that count; otherwise the lock's PTTL in ms, at least 1 (-1: no expiry)
-- @flag   idempotent

local lock = KEYS[1]
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

-- A free lock: the common case, in three calls.
if redis.call('exists', lock) == 0 then
  if holds ~= 1 then
    return redis.error_reply('LOST lualock: the earlier holds of ' .. field .. ' are gone')
  end
  redis.call('hset', lock, field, '1')
  redis.call('pexpire', lock, lease_ms)
  return 0
end

local current = tonumber(redis.call('hget', lock, field) or 0)

-- A repeated call: the count is already what the caller asked for.
if current == holds then
  redis.call('pexpire', lock, lease_ms)
  return 0
end

if current ~= holds - 1 then
  if current == 0 then
    return redis.error_reply('LOST lualock: the earlier holds of ' .. field .. ' are gone')
  end
  return redis.error_reply('ERR lualock: hold count of ' .. field .. ' is ' .. current .. ', caller expected ' .. (holds - 1))
end

if current > 0 then
  redis.call('hincrby', lock, field, 1)
  redis.call('pexpire', lock, lease_ms)
  return 0
end

local pttl = redis.call('pttl', lock)
if pttl == -1 then
  return -1
end
return math.max(pttl, 1)
