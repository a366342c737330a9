-- Takes n permits of a semaphore if that many are available (Redisson's
-- tryAcquire(n)), or takes none.
--
-- A missing semaphore key grants nothing, as in Redisson 3.16 and 4.x. The
-- success is kept under the request's latch key for latch_ms, so a call sent
-- again after a lost reply replays it instead of taking n more permits; past
-- the latch's lifetime a resent call would take them again, so the caller
-- must resend within latch_ms or release what the first call may have taken.
-- A failure changes nothing but the claim and needs no latch.
--
-- Starvation: Redisson's waiters all retry on every release, so a waiter
-- for many permits can lose forever to waiters for fewer. A lualock waiter
-- passes a waiter id and claim_ms: a refused waiter takes the claim when
-- there is none or it holds fewer permits (include/semaphore_claim.lua),
-- and from then on the others' acquisitions must leave its n permits
-- available, until it gets them, gives up (semaphore_unclaim.lua), loses
-- the claim to a waiter for more, or stops refreshing it for claim_ms.
-- A refusal tells the caller whether it holds the claim (2) or not (0), so
-- that only the claimer polls to refresh it. Redisson's clients ignore the
-- claim.
--
-- @key    sem        the semaphore N: a string integer, the available permits
-- @key    request    the request latch tag("lualock_request", N):ID of this call
-- @key    claim      the claim tag("lualock_semaphore_claim", N): "n:waiter" with a TTL
-- @arg    permits    int     permits to take, 1 or more
-- @arg    latch_ms   int     how long the request latch replays the outcome, in milliseconds
-- @arg    waiter     string  the waiting call's id, for the claim; "" for a single try that never claims
-- @arg    claim_ms   int     when refused, take or refresh the claim for this long, in milliseconds; 0: do not claim
-- @return int   1 when the permits were taken; when refused (fewer than permits available, or the rest claimed; nothing taken), 2 when this caller holds the claim after the refusal, else 0
-- @flag   idempotent

local sem = KEYS[1]
local request = KEYS[2]
local claim = KEYS[3]
local latch_ms = ARGV[2]
local waiter = ARGV[3]
local claim_ms = tonumber(ARGV[4])

-- @include "include/whole.lua"
local permits = whole(ARGV[1])
if not permits then
  return redis.error_reply('ERR lualock: permits must be a positive integer, in digits, below 10^15')
end
if not whole(latch_ms) then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer, in digits, below 10^15')
end
if not claim_ms or claim_ms < 0 or claim_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: claim_ms must be a whole number, 0 for no claim')
end
if string.find(waiter, ':', 1, true) then
  return redis.error_reply('ERR lualock: waiter must not contain ":"')
end
-- @include "include/semaphore_claim.lua"

if redis.call('exists', request) == 1 then
  return 1
end

local reserved, mine, held = claimed()
local available = tonumber(redis.call('get', sem))
if not available or available - reserved < permits then
  if claim_for(permits, mine, held) then
    return 2
  end
  return 0
end
redis.call('decrby', sem, ARGV[1])
if mine then
  redis.call('del', claim)
end
redis.call('set', request, '1', 'px', latch_ms)
return 1
