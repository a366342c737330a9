-- Renews the leases of many permits of permit-expirable semaphores in one
-- call (the watchdog's batch for permits taken without a fixed lease).
--
-- Permit i has the three keys KEYS[3i-2] (the semaphore), KEYS[3i-1] (its
-- lease zset) and KEYS[3i] (its channel) and the id ARGV[i + 3]. For each
-- semaphore named, expired permits come back first, once per call
-- (include/expirable_reclaim.lua): an expired permit cannot be revived.
-- Then each permit still in its lease zset gets the deadline now + lease_ms
-- (Redis's TIME, epoch ms). Sending it again sets the same leases again.
-- All keys of one call must share a cluster slot. With rearm, the lease
-- zsets are read again after the writes (one EXISTS per 1000), so that the
-- calling connection keeps tracking them (see lock_renew.lua).
--
-- @key    permits...  per permit three keys: the semaphore N (a string integer, the available permits), its lease zset sfx(N, "timeout") and its channel tag("redisson_sc", N)
-- @arg    lease_ms    int     the new lease of each permit in milliseconds, positive
-- @arg    publish     string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    rearm       bool    read each lease zset again after the writes
-- @arg    ids...      bytes   per permit its id, 16 bytes, in the order of the keys
-- @return []int  per permit, 1 when renewed and 0 when it was not held any more
-- @flag   idempotent

local lease = tonumber(ARGV[1])
local publish = ARGV[2]

if not lease or lease <= 0 or lease % 1 ~= 0 or lease >= 922337203685477 then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
if ARGV[3] ~= '0' and ARGV[3] ~= '1' then
  return redis.error_reply('ERR lualock: rearm must be 0 or 1')
end
local rearm = ARGV[3] == '1'
if #KEYS == 0 or #KEYS % 3 ~= 0 or #ARGV ~= #KEYS / 3 + 3 then
  return redis.error_reply('ERR lualock: three keys and one id per permit are required')
end
for i = 4, #ARGV do
  if #ARGV[i] ~= 16 then
    return redis.error_reply('ERR lualock: a permit id must be 16 bytes')
  end
end
-- @include "include/notify_value.lua"

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- reclaim() reads these; the loop sets them per permit.
local sem, timeouts, channel = KEYS[1], KEYS[2], KEYS[3]
-- @include "include/expirable_reclaim.lua"

local score = string.format('%d', now + lease)
local reclaimed = {}
local renewed = {}
for i = 1, #KEYS / 3 do
  sem, timeouts, channel = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  if not reclaimed[timeouts] then
    reclaimed[timeouts] = true
    reclaim()
  end
  local id = ARGV[i + 3]
  if redis.call('zscore', timeouts, id) then
    redis.call('zadd', timeouts, score, id)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
if rearm then
  local zsets = {}
  for i = 2, #KEYS, 3 do
    if reclaimed[KEYS[i]] then
      reclaimed[KEYS[i]] = nil -- once each
      zsets[#zsets + 1] = KEYS[i]
    end
  end
  for i = 1, #zsets, 1000 do
    redis.call('exists', unpack(zsets, i, math.min(i + 999, #zsets))) -- luagen:ignore non-key-argument
  end
end
return renewed
