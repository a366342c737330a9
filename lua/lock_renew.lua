-- Renews the lease of many locks in one call (the watchdog's batch).
--
-- KEYS[i] is renewed for the owner ARGV[i + 1] when that owner still holds
-- it. A lock whose owner field is gone has been lost: expired, deleted or
-- wiped by a restart. All keys of one call must share a cluster slot.
--
-- @key    locks...   the lock hashes to renew
-- @arg    lease_ms   int     new lease, in milliseconds
-- @arg    fields...  string  owner field of each lock, in the order of the keys
-- @return []int  per lock, 1 when renewed and 0 when the owner no longer holds it
-- @flag   idempotent

local lease = tonumber(ARGV[1])
if not lease or lease <= 0 or lease % 1 ~= 0 then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer')
end
if #ARGV ~= #KEYS + 1 then
  return redis.error_reply('ERR lualock: one field per lock is required')
end

local renewed = {}
for i = 1, #KEYS do
  if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    redis.call('pexpire', KEYS[i], lease)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
