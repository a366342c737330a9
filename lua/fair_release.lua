-- Releases one hold of the fair lock and hands it to the head of the queue.
--
-- As lock_release, a resend after a lost reply is not applied twice: by
-- the hold count the caller names, and for the last hold by the request's
-- latch (see include/latch.lua). Stale waiters are purged first, by Redis's
-- clock. On the last hold the lock is deleted and "0"
-- is published on the queue head's own channel (channel:field) only, so
-- exactly one waiter wakes up. When the lock is already gone the head is
-- woken too, since nothing else would wake it. Either way the head's deadline
-- is cut to one wait budget from now (see fair_acquire). It costs O(1) in
-- the queue's length, plus the amortised purge.
--
-- @key    lock      the lock hash N
-- @key    queue     the waiters' queue (list of owner fields)
-- @key    timeouts  the waiters' deadlines (sorted set, ms since the epoch)
-- @key    channel   the lock's channel; a waiter's own channel is channel:field
-- @key    latch     unlock latch of N for this request id
-- @arg    lease_ms  int     lease to set when holds remain, in milliseconds
-- @arg    field     string  owner field C:H
-- @arg    latch_ms  int     how long the latch replays the outcome, in milliseconds
-- @arg    wait_ms   int     wait budget of one waiter, in milliseconds
-- @arg    publish   string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    holds     int     the owner's hold count before this release, as the caller knows it; 0: unknown
-- @return int?  nil when the owner held nothing; 0 when holds remain; 1 when the lock was released
-- @flag   idempotent

local lock = KEYS[1]
local queue = KEYS[2]
local timeouts = KEYS[3]
local channel = KEYS[4]
local latch = KEYS[5]
local lease_ms = ARGV[1]
local field = ARGV[2]
local latch_ms = ARGV[3]
local wait = tonumber(ARGV[4])
local publish = ARGV[5]
local before = tonumber(ARGV[6])

-- @include "include/whole.lua"
if not whole(lease_ms) then
  return redis.error_reply('ERR lualock: lease_ms must be a positive integer, in digits, below 10^15')
end
if not whole(latch_ms) then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer, in digits, below 10^15')
end
if not wait or wait <= 0 or wait % 1 ~= 0 then
  return redis.error_reply('ERR lualock: wait_ms must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify.lua"
if not before or before < 0 or before % 1 ~= 0 then
  return redis.error_reply('ERR lualock: holds must be a whole number, 0 when unknown')
end

-- @include "include/latch.lua"

local replay = before == 0 and replayed()
if replay then
  return replay
end
local holds = before > 0 and tonumber(redis.call('hget', lock, field))
if before > 0 and not holds then
  replay = replayed()
  if replay then
    return replay
  end
end
if holds and holds == before - 1 then
  -- Released already by this request: a hold remains.
  return 0
end

-- Redis's time, in ms: only the waiters' deadlines need it, so an empty
-- queue does without.
local now = 0
local first = redis.call('lindex', queue, 0)
if first then
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- @include "include/fair_purge.lua"
local _, top = purge(nil, first)

-- The lock is free: the head has one wait budget to take it, and is woken.
local function wake_head()
  local head = cut(now + wait, top)
  if head then
    notify(channel .. ':' .. head)
  end
end

-- (A hold of the caller's, read above, says the lock exists.)
if not holds and redis.call('exists', lock) == 0 then
  wake_head()
  return nil
end
if before == 0 then
  holds = tonumber(redis.call('hget', lock, field))
end
if not holds then
  return nil
end

if holds > 1 then
  redis.call('hincrby', lock, field, -1)
  redis.call('pexpire', lock, lease_ms)
  keep(0)
  return 0
end

redis.call('del', lock)
wake_head()
keep(1)
return 1
