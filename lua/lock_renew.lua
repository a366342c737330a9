-- Renews the lease of many locks in one call (the watchdog's batch).
--
-- KEYS[i] is renewed for the owner ARGV[i + 2] when that owner still holds
-- it. A lock whose owner field is gone has been lost: expired, deleted or
-- wiped by a restart. All keys of one call must share a cluster slot.
--
-- With rearm, the locks are read again after the writes, one EXISTS per
-- 1000 locks: Redis forgets who tracks a key (client-side caching) when
-- the key changes, the writer included, and a read made by a script is
-- tracked for the connection that called it (Redis 7.0 tracks the call's
-- KEYS, later versions the keys read). The hold tracker renews on its own
-- tracking connection (NOLOOP: its writes announce nothing to it) and so
-- keeps hearing of each lock's next change; for a call of more than a few
-- locks it sends the call untracked and an EXISTS of its own after it, in
-- a MULTI (see docs/ARCHITECTURE.md, the hold tracker).
--
-- @key    locks...   the lock hashes to renew
-- @arg    lease_ms   int     new lease, in milliseconds
-- @arg    rearm      bool    read the locks again after the writes
-- @arg    fields...  string  owner field of each lock, in the order of the keys
-- @return []int  per lock, 1 when renewed and 0 when the owner no longer holds it
-- @flag   idempotent

local lease_ms = ARGV[1]
-- @include "include/whole.lua"
if not whole(lease_ms) then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer, in digits, below 10^15')
end
if ARGV[2] ~= '0' and ARGV[2] ~= '1' then
  return redis.error_reply('ERR lualock: rearm must be 0 or 1')
end
local rearm = ARGV[2] == '1'
if #ARGV ~= #KEYS + 2 then
  return redis.error_reply('ERR lualock: one field per lock is required')
end

local renewed = {}
for i = 1, #KEYS do
  if redis.call('hexists', KEYS[i], ARGV[i + 2]) == 1 then
    redis.call('pexpire', KEYS[i], lease_ms)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
if rearm then
  for i = 1, #KEYS, 1000 do
    redis.call('exists', unpack(KEYS, i, math.min(i + 999, #KEYS)))
  end
end
return renewed
