-- Takes a read hold of the read-write lock for one owner: a first hold, a
-- re-entry, or a read hold of the owner that holds the write lock (a
-- downgrade), with Redisson's RReadWriteLock layout.
--
-- The lock hash N has the field mode ("read" or "write"), one field per
-- reader C:H -> its read hold count, and the writer's C:H:write -> its
-- write hold count. Read hold i of owner C:H has a timeout key
-- P:C:H:rwlock_timeout:i (the string 1, PX the hold's lease), and N lives
-- at least as long as its newest hold. A reader enters when the lock is
-- free, in read mode, or in write mode held by the same owner. Readers keep
-- entering while the mode is read: the lock is not fair, and a waiting
-- writer can starve.
--
-- As in lock_acquire, the caller names the read hold count the call should
-- leave, so a call whose reply was lost and that is sent again finds the
-- count reached and does not count the hold twice (it sets that hold's
-- timeout and N's lease again). A re-entry that finds the owner's earlier
-- read holds gone fails with a LOST error and changes nothing. A hash N
-- without a mode field (another kind of lock under the same name) is
-- waited for, never written.
--
-- @key    lock      the lock hash N
-- @key    prefix    timeout prefix P of N: {N}, or N when N has a hash tag (the timeout keys are built from it)
-- @arg    lease_ms  int     lease of this hold, in milliseconds
-- @arg    field     string  owner field C:H
-- @arg    holds     int     read hold count after this call (1 for a first acquisition)
-- @return int   0 when the owner holds that many read holds; otherwise the lock's PTTL in ms, at least 1 (-1: no expiry)
-- @flag   idempotent

local lock = KEYS[1]
local prefix = KEYS[2]
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
-- @include "include/rwlock_timeouts.lua"

-- Sets the timeout of hold i and keeps N alive at least as long (never
-- shorter than it was: another hold may have a longer lease). fresh says N
-- was just created, without an expiry.
local function hold(i, fresh)
  redis.call('set', timeout(field, i), '1', 'px', lease_ms) -- luagen:ignore non-key-argument
  if fresh or redis.call('pttl', lock) < lease then
    redis.call('pexpire', lock, lease_ms)
  end
end

local got = redis.call('hmget', lock, field, 'mode')
local current = tonumber(got[1] or 0)

-- A repeated call: the count is already what the caller asked for.
if current == holds then
  hold(holds)
  return 0
end

if current ~= holds - 1 then
  if current == 0 then
    return redis.error_reply('LOST lualock: the earlier read holds of ' .. field .. ' are gone')
  end
  return redis.error_reply('ERR lualock: read hold count of ' .. field .. ' is ' .. current .. ', caller expected ' .. (holds - 1))
end

local mode = got[2]
if not mode and redis.call('exists', lock) == 0 then
  redis.call('hset', lock, 'mode', 'read', field, '1')
  hold(1, true)
  return 0
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', lock, field .. ':write') == 1) then
  redis.call('hincrby', lock, field, 1)
  hold(holds)
  return 0
end

local pttl = redis.call('pttl', lock)
if pttl == -1 then
  return -1
end
return math.max(pttl, 1)
