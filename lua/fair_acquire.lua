-- Takes the fair (FIFO) lock for one owner, re-enters it, or queues the owner.
--
-- The queue is a list of owner fields, head first; the deadlines are a sorted
-- set of owner field -> ms since the epoch after which the waiter counts as
-- gone. Time is Redis's own (TIME), never the caller's. Stale heads are
-- purged first, but never the caller: a waiter that asks is alive. The lock
-- goes to a caller only when it is free and the queue is empty or headed by
-- the caller; every waiter left then moves up one place, so its deadline
-- shrinks by one wait budget, yet a live one keeps at least three quarters
-- of a budget from now: it is not told of the move, and the runtime asks
-- again within half a budget. A
-- queued caller that asks again renews its own deadline: one budget after
-- the one ahead's, at least one budget past the lock's expiry, so a live
-- waiter is never purged (Redisson #3004).
--
-- Whenever the head of the queue changes (the head took the lock, or stale
-- heads were purged), the new head is woken on its own channel, so that it
-- asks again and learns it is next: it then waits for the lock's PTTL, not for
-- the deadline of a waiter that is gone. Whenever the lock is free and the
-- head is not the caller, the head's deadline is cut to one wait budget from
-- now, and the head is woken: a dead head holds the queue up for one budget
-- at most.
--
-- As in lock_acquire, the caller names the hold count the call should leave,
-- so a repeated call does not count a re-entry twice, and success is 0
-- rather than nil (see lock_acquire).
--
-- @key    lock      the lock hash N: field C:H -> hold count
-- @key    queue     the waiters' queue (list of owner fields)
-- @key    timeouts  the waiters' deadlines (sorted set, ms since the epoch)
-- @key    channel   the lock's channel; a waiter's own channel is channel:field
-- @arg    lease_ms  int     lease to set on the lock, in milliseconds
-- @arg    field     string  owner field C:H
-- @arg    wait_ms   int     wait budget of one waiter, in milliseconds
-- @arg    holds     int     hold count after this call (1 for a first acquisition)
-- @arg    publish   string  how to publish: publish, spublish or both (publish, then spublish)
-- @return int   0 when the lock is held with that count; otherwise ms to wait before asking again, at least 1
-- @flag   idempotent

local lock = KEYS[1]
local queue = KEYS[2]
local timeouts = KEYS[3]
local channel = KEYS[4]
local lease = tonumber(ARGV[1])
local field = ARGV[2]
local wait = tonumber(ARGV[3])
local holds = tonumber(ARGV[4])
local publish = ARGV[5]

if not lease or lease <= 0 or lease % 1 ~= 0 then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer')
end
if not wait or wait <= 0 or wait % 1 ~= 0 then
  return redis.error_reply('ERR lualock: wait_ms must be a positive integer')
end
if field == '' then
  return redis.error_reply('ERR lualock: field must not be empty')
end
if not holds or holds < 1 or holds % 1 ~= 0 then
  return redis.error_reply('ERR lualock: holds must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify.lua"

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- What a waiter that moves up keeps at least: it is not told, and asks
-- again within half a budget.
local keep = math.floor(wait * 3 / 4)

-- @include "include/fair_purge.lua"
-- The caller asks, so it is alive: it is never purged.
local purged = purge(field)

local current = tonumber(redis.call('hget', lock, field) or 0)
if current == holds then
  redis.call('pexpire', lock, lease)
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
  redis.call('pexpire', lock, lease)
  return 0
end

local head = redis.call('lindex', queue, 0)
local free = redis.call('exists', lock) == 0
if free and (not head or head == field) then
  if head then
    redis.call('lpop', queue)
  end
  redis.call('zrem', timeouts, field)
  -- Everyone left moved up one place (see the header), in batched ZADDs.
  local scores = redis.call('zrange', timeouts, 0, -1, 'withscores')
  local batch = {}
  for i = 1, #scores, 2 do
    local deadline = tonumber(scores[i + 1])
    if deadline > now then
      deadline = math.max(deadline - wait, now + keep)
    else
      deadline = deadline - wait
    end
    batch[#batch + 1] = deadline
    batch[#batch + 1] = scores[i]
    if #batch == 1000 then
      redis.call('zadd', timeouts, unpack(batch))
      batch = {}
    end
  end
  if #batch > 0 then
    redis.call('zadd', timeouts, unpack(batch))
  end
  redis.call('hset', lock, field, 1)
  redis.call('pexpire', lock, lease)
  -- Tell the new head it is next; a stale one would not hear it.
  purge()
  local next = redis.call('lindex', queue, 0)
  if next then
    notify(channel .. ':' .. next)
  end
  return 0
end

-- The lock is free and head is next: it has one wait budget to take it, so
-- a dead head holds the queue up for one budget at most, and it is woken
-- (a waiter that saw the lease run out without a release may be asleep).
local wake = head and purged and head ~= field
if head and free and head ~= field then
  local deadline = tonumber(redis.call('zscore', timeouts, head))
  if not deadline or deadline > now + wait then
    redis.call('zadd', timeouts, now + wait, head)
    wake = true
  end
end
if wake then
  -- (The caller, when it is the new head, learns it from this reply.)
  notify(channel .. ':' .. head)
end

local pttl = math.max(redis.call('pttl', lock), 0)
local pos = redis.call('lpos', queue, field)
if pos then
  -- Queued already: renew the deadline and wait for the one ahead. The
  -- deadline chains on the one ahead's, as a newcomer's does, but lies at
  -- least one budget past the lock's expiry, so that a live waiter is never
  -- purged (Redisson #3004), and at most PTTL + (position + 1) x budget from
  -- now. (A full budget for every place ahead would leave it too far out
  -- once a dead waiter ahead is purged at its deadline.) Behind a stale
  -- waiter, which is purged only once it is the head, the caller waits for
  -- the lock's PTTL: a release wakes the first live waiter.
  if pos == 0 then
    redis.call('zadd', timeouts, now + pttl + wait, field)
    return math.max(pttl, 1)
  end
  local ahead = tonumber(redis.call('zscore', timeouts, redis.call('lindex', queue, pos - 1)))
  local deadline = now + pttl + (pos + 1) * wait
  if ahead then
    deadline = math.min(deadline, math.max(ahead + wait, now + pttl + wait))
  end
  redis.call('zadd', timeouts, deadline, field)
  if ahead and ahead > now then
    return math.max(ahead - now, 1)
  end
  return math.max(pttl, 1)
end

-- Join the back of the queue. As the reference, the deadline is the last
-- waiter's plus one budget. But when the last waiter is stale (its deadline
-- passed, not yet purged), chaining on it would leave the newcomer a single
-- budget at a place further back, which a handoff would use up: it takes
-- the deadline a live chain gives its place, PTTL + position x budget. The
-- caller is not in the queue (LPOS said so), so it is pushed even when a
-- deadline of its was left behind.
local ttl = pttl
local score = now + pttl + wait
local last = redis.call('lindex', queue, -1)
if last then
  local deadline = tonumber(redis.call('zscore', timeouts, last))
  if deadline and deadline > now then
    ttl = deadline - now
    score = deadline + wait
  else
    score = now + pttl + (redis.call('llen', queue) + 1) * wait
  end
end
redis.call('zadd', timeouts, score, field)
redis.call('rpush', queue, field)
return math.max(ttl, 1)
