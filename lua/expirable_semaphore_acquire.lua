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
-- earlier call took the permits and this one takes nothing, sets their
-- deadlines again from its own TIME (now + lease_ms, as a first call
-- would) and reports success. The caller counts the lease from the send
-- that reported success, so Redis's deadline must not be the earlier
-- send's. Ids partly present are an error.
--
-- A waiter passes its id and claim_ms to keep waiters for fewer permits
-- from starving it, as semaphore_acquire.lua does with the same claim key
-- (include/semaphore_claim.lua); Redisson's clients ignore the claim. A
-- refusal tells the caller whether it holds the claim (a reply of -2 or
-- less) or not, so that only the claimer polls to refresh it.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    timeouts   the lease zset sfx(N, "timeout"): permit id -> deadline, epoch ms
-- @key    channel    the semaphore channel tag("redisson_sc", N)
-- @key    claim      the claim tag("lualock_semaphore_claim", N): "n:waiter" with a TTL
-- @arg    lease_ms   int     lease of each permit in milliseconds; 0: no lease (never expires)
-- @arg    publish    string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    waiter     string  the waiting call's id, for the claim; "" for a single try that never claims
-- @arg    claim_ms   int     when refused, take or refresh the claim for this long, in milliseconds; 0: do not claim
-- @arg    ids...     bytes   the new permits' ids, 16 bytes each, distinct; one permit per id
-- @return int   0 when the permits were taken; when refused (too few available, or the rest claimed) and this caller does not hold the claim, the ms until the nearest deadline of a held permit, at least 1, or -1 when no held permit expires; when refused and this caller holds the claim, -2 - that ms, or -2 when no held permit expires
-- @flag   idempotent

local sem = KEYS[1]
local timeouts = KEYS[2]
local channel = KEYS[3]
local claim = KEYS[4]
local lease = tonumber(ARGV[1])
local publish = ARGV[2]
local waiter = ARGV[3]
local claim_ms = tonumber(ARGV[4])
local n = #ARGV - 4

local never = 922337203685477

if not lease or lease < 0 or lease % 1 ~= 0 or lease >= never then
  return redis.error_reply('ERR lualock: lease_ms must be a whole number, 0 for no lease')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
if not claim_ms or claim_ms < 0 or claim_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: claim_ms must be a whole number, 0 for no claim')
end
if string.find(waiter, ':', 1, true) then
  return redis.error_reply('ERR lualock: waiter must not contain ":"')
end
-- @include "include/permit_ids.lua"
local bad = bad_ids(5)
if bad then
  return bad
end
-- @include "include/notify_value.lua"
-- @include "include/semaphore_claim.lua"

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- @include "include/expirable_reclaim.lua"
reclaim()

-- Puts every id in the zset with the deadline now + lease (never without
-- a lease), and gives the zset N's TTL.
local function hold()
  local deadline = never
  if lease > 0 then
    deadline = now + lease
  end
  local score = string.format('%d', deadline)
  for i = 5, #ARGV do
    redis.call('zadd', timeouts, score, ARGV[i])
  end
  local ttl = redis.call('pttl', sem)
  if ttl > 0 then
    redis.call('pexpire', timeouts, ttl)
  end
end

local present = 0
for i = 5, #ARGV do
  if redis.call('zscore', timeouts, ARGV[i]) then
    present = present + 1
  end
end
if present == n then
  -- A resend: the permits are this caller's; their leases start again now.
  hold()
  return 0
end
if present > 0 then
  return redis.error_reply('ERR lualock: some of the permit ids are held already')
end

local reserved, mine, held = claimed()
local available = tonumber(redis.call('get', sem))
if available and available - reserved >= n then
  redis.call('decrby', sem, n)
  if mine then
    redis.call('del', claim)
  end
  hold()
  return 0
end

local claimer = claim_for(n, mine, held)
local first = redis.call('zrange', timeouts, 0, 0, 'withscores')
local wait = -1
if #first > 0 and tonumber(first[2]) < never then
  wait = math.max(tonumber(first[2]) - now, 1)
end
if not claimer then
  return wait
end
if wait < 0 then
  return -2
end
return -2 - wait
