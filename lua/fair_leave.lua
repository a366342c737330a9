-- Takes a waiter out of the fair lock's queue: it stopped waiting (its wait
-- time ran out, its context ended, an error, or its client closed).
--
-- Stale waiters are purged first, by Redis's clock, as in every fair script.
-- Every waiter behind it moves up one place, so their deadlines shrink by
-- one wait budget, but a live one keeps at least three quarters of a budget
-- from now, as in fair_acquire: it is not told of the move. When the leaver
-- was the head of the queue, the new head is woken so that it asks again
-- and learns it is next (stale waiters that the move left at the head are
-- purged first); if the lock is free, its deadline is cut to one wait
-- budget from now (see fair_acquire).
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
-- What a waiter that moves up keeps at least: it is not told, and asks
-- again within half a budget.
local keep = math.floor(wait * 3 / 4)
-- @include "include/fair_purge.lua"

purge()

local pos = redis.call('lpos', queue, field)
redis.call('zrem', timeouts, field)
if not pos then
  return false
end

local behind = redis.call('lrange', queue, pos + 1, -1)
for i = 1, #behind do
  local deadline = tonumber(redis.call('zscore', timeouts, behind[i]))
  if deadline then
    if deadline > now then
      deadline = math.max(deadline - wait, now + keep)
    else
      deadline = deadline - wait
    end
    redis.call('zadd', timeouts, deadline, behind[i])
  end
end
redis.call('lrem', queue, 1, field)

if pos == 0 then
  -- The head changed: wake the first live waiter (stale ones now at the
  -- head are purged first, as after a handoff).
  purge()
  local head = redis.call('lindex', queue, 0)
  if head then
    if redis.call('exists', lock) == 0 then
      local deadline = tonumber(redis.call('zscore', timeouts, head))
      if not deadline or deadline > now + wait then
        redis.call('zadd', timeouts, now + wait, head)
      end
    end
    notify(channel .. ':' .. head)
  end
end
return true
