-- Takes a waiter out of the fair lock's queue: it stopped waiting (its wait
-- time ran out, its context ended, an error, or its client closed).
--
-- Stale waiters are purged first, by Redis's clock, as in every fair script.
-- It costs O(1) or O(log N) in the queue's length N: a waiter at the head or
-- at the back is popped; one in the middle is left as a tombstone (its
-- deadline becomes a passed one, marked by half a millisecond; see
-- below), which the purge pops once it reaches the head,
-- instead of an LREM, which is O(N). The waiters behind keep their
-- deadlines (Redisson's give-up takes one budget off each: O(N)). When the
-- leaver was the head of the queue, the new head is woken so that it asks
-- again and learns it is next (stale waiters that the move left at the head
-- are purged first), and its deadline is cut to one wait budget from now
-- if the lock is free, or past the lock's expiry if not (see fair_acquire).
-- When it was the last, stale entries now at the back are trimmed off.
--
-- @key    lock      the lock hash N
-- @key    queue     the waiters' queue (list of owner fields)
-- @key    timeouts  the waiters' deadlines (sorted set, ms since the epoch)
-- @key    channel   the lock's channel; a waiter's own channel is channel:field
-- @arg    field     string  owner field C:H of the waiter that leaves
-- @arg    wait_ms   int     wait budget of one waiter, in milliseconds
-- @arg    publish   string  how to publish: publish, spublish or both (publish, then spublish)
-- @return bool  true when the waiter was in the queue
-- @flag   idempotent

local lock = KEYS[1]
local queue = KEYS[2]
local timeouts = KEYS[3]
local channel = KEYS[4]
local field = ARGV[1]
local wait = tonumber(ARGV[2])
local publish = ARGV[3]

if not wait or wait <= 0 or wait % 1 ~= 0 then
  return redis.error_reply('ERR lualock: wait_ms must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify.lua"

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- @include "include/fair_purge.lua"
-- @include "include/fair_trim.lua"

purge()

if not redis.call('zscore', timeouts, field) then
  return false
end
if redis.call('lindex', queue, 0) == field then
  redis.call('lpop', queue)
  redis.call('zrem', timeouts, field)
  -- The head changed: wake the first live waiter (stale ones now at the
  -- head are purged first, as after a handoff).
  purge()
  local limit = now + wait
  if redis.call('exists', lock) == 1 then
    limit = limit + math.max(redis.call('pttl', lock), 0)
  end
  local head = cut(limit)
  if head then
    notify(channel .. ':' .. head)
  end
elseif redis.call('lindex', queue, -1) == field then
  redis.call('rpop', queue)
  redis.call('zrem', timeouts, field)
  trim()
else
  -- A tombstone: the deadline now - 0.5 ms has passed, so the next purge
  -- that meets it at the head pops it, whichever client runs that purge
  -- (Redisson's scripts too). The half millisecond marks it for this
  -- waiter's next fair_acquire: lualock's own deadlines are whole
  -- milliseconds, and Redisson's ZINCRBY by whole budgets keeps the half.
  redis.call('zadd', timeouts, tostring(now - 1) .. '.5', field)
end
return true
