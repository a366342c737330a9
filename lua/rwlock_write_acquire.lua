-- Takes the write lock of the read-write lock for one owner, or re-enters
-- it, with Redisson's RReadWriteLock layout: the hash N gets mode "write"
-- and the field C:H:write -> write hold count.
--
-- The write lock is taken only when N does not exist; re-entry needs the
-- owner's write field. As in lock_acquire, the caller names the hold count
-- the call should leave, so a repeated call does not count a re-entry
-- twice, and a re-entry that finds the earlier holds gone fails with a
-- LOST error. N's lease is only ever extended: re-entry sets it to at least
-- lease_ms (Redisson adds the lease to the remaining TTL at each re-entry).
--
-- There is no upgrade: an owner that holds read holds and asks for the
-- write lock gets an UPGRADE error, and nothing changes (Redisson's writer
-- waits for itself forever).
--
-- @key    lock      the lock hash N
-- @arg    lease_ms  int     lease to set on the lock, in milliseconds
-- @arg    field     string  owner field C:H (the write field is C:H:write)
-- @arg    holds     int     write hold count after this call (1 for a first acquisition)
-- @return int   0 when the owner holds the write lock with that count; otherwise the lock's PTTL in ms, at least 1 (-1: no expiry)
-- @flag   idempotent

local lock = KEYS[1]
local lease_ms = ARGV[1]
local field = ARGV[2]
local holds = tonumber(ARGV[3])

-- @include "include/whole.lua"
local lease = whole(lease_ms)
if not lease then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer, in digits, below 10^15')
end
if field == '' then
  return redis.error_reply('ERR lualock: field must not be empty')
end
if not holds or holds < 1 or holds % 1 ~= 0 then
  return redis.error_reply('ERR lualock: holds must be a positive integer')
end

local writer = field .. ':write'

-- Keeps N alive at least lease_ms from now.
local function extend()
  local pttl = redis.call('pttl', lock)
  if pttl >= 0 and pttl < lease then
    redis.call('pexpire', lock, lease_ms)
  end
end

local current = tonumber(redis.call('hget', lock, writer) or 0)

-- A repeated call: the count is already what the caller asked for.
if current == holds then
  extend()
  return 0
end

if current ~= holds - 1 then
  if current == 0 then
    return redis.error_reply('LOST lualock: the earlier write holds of ' .. field .. ' are gone')
  end
  return redis.error_reply('ERR lualock: write hold count of ' .. field .. ' is ' .. current .. ', caller expected ' .. (holds - 1))
end

if current > 0 then
  redis.call('hincrby', lock, writer, 1)
  extend()
  return 0
end

if redis.call('exists', lock) == 0 then
  redis.call('hset', lock, 'mode', 'write', writer, '1')
  redis.call('pexpire', lock, lease_ms)
  return 0
end

if redis.call('hget', lock, 'mode') == 'read' and redis.call('hexists', lock, field) == 1 then
  return redis.error_reply('UPGRADE lualock: ' .. field .. ' holds read holds of the lock; a read hold cannot be upgraded to the write lock: release the read holds first')
end

local pttl = redis.call('pttl', lock)
if pttl == -1 then
  return -1
end
return math.max(pttl, 1)
