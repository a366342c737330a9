-- Takes permits of a permit-expirable semaphore, each under its own id and
-- lease, in Redisson 4.x's layout (RPermitExpirableSemaphore.tryAcquire).
--
-- Expired permits come back first (include/expirable_reclaim.lua). Then, if
-- N holds at least as many permits as ids were given, N is decreased by that
-- number and every id is added to the lease zset with the deadline now +
-- lease_ms (Redis's TIME, epoch ms), or with Redisson's "never" score
-- 922337203685477 when lease_ms is 0; when N has a TTL the zset gets the
-- same one, as Redisson does. Otherwise nothing is taken.
--
-- Ids are Redisson 4.x's 16 raw bytes (3.16 stored 32 hex characters, so
-- the two cannot release each other's permits). The ids make a resent call
-- idempotent without a latch: when every id is already in the zset, the
-- earlier call took the permits and this one reports success and changes
-- nothing; ids partly present are an error.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    timeouts   the lease zset sfx(N, "timeout"): permit id -> deadline, epoch ms
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @arg    lease_ms   int     lease of each permit in milliseconds; 0: no lease (never expires)
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    ids...     bytes   the new permits' ids, 16 bytes each, distinct; one permit per id
-- @return int   0 when the permits were taken; otherwise ms until the nearest deadline of a held permit, at least 1, or -1 when no held permit expires
-- @flag   idempotent

local sem = KEYS[1]
local timeouts = KEYS[2]
local channel = KEYS[3]
local lease = tonumber(ARGV[1])
local publish = ARGV[2]
local n = #ARGV - 2

local never = 922337203685477

if not lease or lease < 0 or lease % 1 ~= 0 or lease >= never then
  return redis.error_reply('ERR lualock: lease_ms must be a whole number, 0 for no lease')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/permit_ids.lua"
local bad = bad_ids(3)
if bad then
  return bad
end
-- @include "include/notify_value.lua"

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- @include "include/expirable_reclaim.lua"
reclaim()

local present = 0
for i = 3, #ARGV do
  if redis.call('zscore', timeouts, ARGV[i]) then
    present = present + 1
  end
end
if present == n then
  return 0
end
if present > 0 then
  return redis.error_reply('ERR lualock: some of the permit ids are held already')
end

local available = tonumber(redis.call('get', sem))
if available and available >= n then
  redis.call('decrby', sem, n)
  local deadline = never
  if lease > 0 then
    deadline = now + lease
  end
  local score = string.format('%d', deadline)
  for i = 3, #ARGV do
    redis.call('zadd', timeouts, score, ARGV[i])
  end
  local ttl = redis.call('pttl', sem)
  if ttl > 0 then
    redis.call('pexpire', timeouts, ttl)
  end
  return 0
end

local first = redis.call('zrange', timeouts, 0, 0, 'withscores')
if #first == 0 or tonumber(first[2]) >= never then
  return -1
end
return math.max(tonumber(first[2]) - now, 1)
