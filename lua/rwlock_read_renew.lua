-- Renews the read holds of many read-write locks in one call (the
-- watchdog's batch), the way Redisson 4.x does: only the caller's own
-- holds. Redisson 3.16 renews every reader's timeout keys, so a live
-- reader keeps a dead one's holds alive (Redisson #1458).
--
-- KEYS come in pairs, the lock hash N then its timeout prefix P; ARGV[i+2]
-- is the owner field of pair i. For that owner with k read holds, the
-- timeout keys P:C:H:rwlock_timeout:1..k get the new lease, and so does N.
-- When the owner holds nothing, or one of its timeout keys is gone (a hold
-- whose lease ran out no longer counts as a live reader: another reader's
-- release may delete the lock under it), the hold is lost: nothing of it
-- is renewed. All keys of one call must share a cluster slot. With rearm,
-- the lock hashes are read again after the writes (one EXISTS per 1000),
-- so that the calling connection keeps tracking them (see lock_renew.lua).
--
-- @key    keys...    per lock, the lock hash N, then its timeout prefix P ({N}, or N when N has a hash tag)
-- @arg    lease_ms   int     new lease, in milliseconds
-- @arg    rearm      bool    read the lock hashes again after the writes
-- @arg    fields...  string  owner field C:H of each lock, in the order of the locks
-- @return []int  per lock, 1 when renewed and 0 when the owner's read holds are gone
-- @flag   idempotent

local lease = tonumber(ARGV[1])
if not lease or lease <= 0 or lease % 1 ~= 0 then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer')
end
if ARGV[2] ~= '0' and ARGV[2] ~= '1' then
  return redis.error_reply('ERR lualock: rearm must be 0 or 1')
end
local rearm = ARGV[2] == '1'
if #KEYS % 2 ~= 0 or #ARGV ~= #KEYS / 2 + 2 then
  return redis.error_reply('ERR lualock: a lock and a prefix key per lock, and one field per lock, are required')
end
for i = 3, #ARGV do
  if ARGV[i] == '' then
    return redis.error_reply('ERR lualock: field must not be empty')
  end
end

local renewed = {}
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  local prefix = KEYS[2 * i]
  local field = ARGV[i + 2]
  local function timeout(h)
    return prefix .. ':' .. field .. ':rwlock_timeout:' .. h
  end
  local k = tonumber(redis.call('hget', lock, field) or 0)
  local alive = k > 0
  for h = 1, k do
    if redis.call('exists', timeout(h)) == 0 then -- luagen:ignore non-key-argument
      alive = false
      break
    end
  end
  if alive then
    for h = 1, k do
      redis.call('pexpire', timeout(h), lease) -- luagen:ignore non-key-argument
    end
    redis.call('pexpire', lock, lease)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
if rearm then
  local locks = {}
  for i = 1, #KEYS, 2 do
    locks[#locks + 1] = KEYS[i]
  end
  for i = 1, #locks, 1000 do
    redis.call('exists', unpack(locks, i, math.min(i + 999, #locks))) -- luagen:ignore non-key-argument
  end
end
return renewed
