-- Takes the fair (FIFO) lock for one owner, re-enters it, or queues the owner.
--
-- The queue is a list of owner fields, head first; the deadlines are a sorted
-- set of owner field -> ms since the epoch after which the waiter counts as
-- gone. Time is Redis's own (TIME), never the caller's. Every step costs
-- O(1) or O(log N) in the queue's length N (docs/PROTOCOL.md, "The fair
-- queue at any depth"): no LPOS, no LREM but one case below, no ZINCRBY
-- per waiter.
--
-- Stale heads are purged first, but never the caller: a waiter that asks is
-- alive. The lock goes to a caller only when it is free and the queue is
-- empty or headed by the caller; the others keep their deadlines (they are
-- not moved up one budget each, as Redisson does: that is O(N)), and the new
-- head's deadline is cut to the new lease plus one budget, and it is woken.
--
-- A queued caller that asks again renews its own deadline: at the head,
-- one budget past the lock's expiry; elsewhere PTTL + (k + 1) budgets from
-- now, where k counts the live deadlines below its own (the waiters ahead
-- of it, each of which may take one budget off it in a Redisson handoff
-- before it asks again), so a live waiter is never purged (Redisson #3004).
-- A caller whose place is a tombstone (it gave up, see fair_leave) lost that
-- place: the tombstone is removed (an LREM, O(its position), the one step
-- that is not O(log N)) and the caller joins the back. A newcomer chains its
-- deadline on the last waiter's, as Redisson does, once the stale entries
-- at the back are trimmed.
--
-- Whenever the head of the queue changes (the head took the lock, or stale
-- heads were purged), the new head is woken on its own channel, so that it
-- asks again and learns it is next. Whenever the lock is free and the head
-- is not the caller, the head's deadline is cut to one wait budget from
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
local lease_ms = ARGV[1]
local field = ARGV[2]
local wait = tonumber(ARGV[3])
local holds = tonumber(ARGV[4])
local publish = ARGV[5]

-- @include "include/whole.lua"
local lease = whole(lease_ms)
if not lease then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer, in digits, below 10^15')
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

-- Redis's time, in ms, once clock() has read it: only a deadline to judge
-- or to write needs it, and an empty queue taken at once has none.
local now = 0
local function clock()
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local peek = redis.call('lindex', queue, 0)
if peek then
  clock()
end

-- @include "include/fair_purge.lua"
-- @include "include/fair_trim.lua"
-- The caller asks, so it is alive: it is never purged. head is the queue's
-- head from here on (false: the queue is empty), kept as the queue changes,
-- so that the common case, an empty queue, reads it once.
local purged, head = purge(field, peek)

-- A free lock has no holds: no need to read the caller's.
local free = redis.call('exists', lock) == 0
local current = 0
if not free then
  current = tonumber(redis.call('hget', lock, field) or 0)
end
if current == holds then
  redis.call('pexpire', lock, lease_ms)
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
  redis.call('pexpire', lock, lease_ms)
  return 0
end

-- The caller's deadline tells whether it is queued (every entry of the list
-- has one, and only entries of the list have one).
-- A tombstone's deadline has half a millisecond (see fair_leave); lualock's
-- own deadlines are whole milliseconds.
-- On an empty queue a deadline of the caller's has no place (see below).
local mine = head and tonumber(redis.call('zscore', timeouts, field))
if mine and mine % 1 ~= 0 then
  -- The caller gave up this place: it joins the back again, as anyone who
  -- arrives now. (Only the first case changes the head: the caller is not
  -- the head in the others, so it is not the only entry either.)
  if head == field then
    redis.call('lpop', queue)
    purged, head = purge()
    purged = true
  elseif redis.call('lindex', queue, -1) == field then
    redis.call('rpop', queue)
  else
    redis.call('lrem', queue, 1, field)
  end
  redis.call('zrem', timeouts, field)
  mine = nil
end

if mine and not head then
  -- A deadline without a place (not written by these scripts): drop it.
  redis.call('zrem', timeouts, field)
  mine = nil
end
if free and (not head or head == field) then
  if head then
    redis.call('lpop', queue)
  end
  redis.call('zrem', timeouts, field)
  redis.call('hset', lock, field, '1')
  redis.call('pexpire', lock, lease_ms)
  -- Tell the new head it is next (a stale one would not hear it), with one
  -- budget past this lease. (An empty queue stays empty.)
  if head then
    local _, first = purge()
    local next = cut(now + lease + wait, first)
    if next then
      notify(channel .. ':' .. next)
    end
  end
  return 0
end

local pttl = math.max(redis.call('pttl', lock), 0)
-- The lock is free and head is next: it has one wait budget to take it, so
-- a dead head holds the queue up for one budget at most, and it is woken
-- (a waiter that saw the lease run out without a release may be asleep).
-- A head that purged stale ones made next gets one budget past the lease.
local wake = head and purged and head ~= field
if head and head ~= field then
  local limit = now + pttl + wait
  if free then
    limit = now + wait
  end
  local deadline = tonumber(redis.call('zscore', timeouts, head))
  if (free or wake) and (not deadline or deadline > limit) then
    redis.call('zadd', timeouts, limit, head)
    wake = true
  end
end
if wake then
  -- (The caller, when it is the new head, learns it from this reply.)
  notify(channel .. ':' .. head)
end

if mine then
  -- Queued already: renew the deadline (see the header) and wait for the
  -- head's deadline: a live head takes the lock and the next one is woken
  -- then; a dead one is purged at its deadline.
  if head == field then
    redis.call('zadd', timeouts, now + pttl + wait, field)
    return math.max(pttl, 1)
  end
  local ahead = redis.call('zcount', timeouts, '(' .. now, '(' .. mine)
  redis.call('zadd', timeouts, now + pttl + (ahead + 1) * wait, field)
  local first = tonumber(redis.call('zscore', timeouts, head))
  return math.max(math.floor(first or 0) - now, 1)
end

-- Join the back of the queue. As the reference, the deadline is the last
-- waiter's plus one budget, once stale entries (tombstones, waiters gone)
-- are trimmed off the back; on an empty queue, one budget past the lock's
-- expiry.
if now == 0 then
  clock() -- (the queue was empty)
end
local ttl = pttl
local score = now + pttl + wait
local last = false
if head then
  trim()
  last = redis.call('lindex', queue, -1)
end
if last then
  local deadline = tonumber(redis.call('zscore', timeouts, last))
  if deadline then
    deadline = math.floor(deadline)
    ttl = deadline - now
    score = deadline + wait
  else
    score = now + pttl + (redis.call('llen', queue) + 1) * wait
  end
end
redis.call('zadd', timeouts, score, field)
redis.call('rpush', queue, field)
return math.max(ttl, 1)
