-- Deletes the fair lock whoever holds it, and wakes the head of the queue.
-- It also publishes on the lock's channel, as lock_force_release does
-- (Redisson's own fair force unlock only notifies the head of the queue);
-- a holder learns that its lock is gone from the deletion itself (the
-- hold tracker), whoever deletes it.
--
-- Stale waiters are purged first, by Redis's clock, so the woken head is a
-- live one; its deadline is cut to one wait budget from now (see
-- fair_acquire); O(1) in the queue's length, plus the amortised purge.
-- As lock_force_release, the outcome is latched under the
-- request id, so a repeated call does not delete the next owner's lock.
-- As lock_force_release, a key that is not a lock's hash is left as it is
-- (a WRONGTYPE error), and so are the queue and its deadlines.
--
-- @key    lock      the lock hash N
-- @key    queue     the waiters' queue (list of owner fields)
-- @key    timeouts  the waiters' deadlines (sorted set, ms since the epoch)
-- @key    channel   the lock's channel (holders listen); a waiter's own channel is channel:field
-- @key    latch     unlock latch of N for this request id
-- @arg    latch_ms  int     how long the latch replays the outcome, in milliseconds
-- @arg    wait_ms   int     wait budget of one waiter, in milliseconds
-- @arg    publish   string  how to publish: publish, spublish or both (publish, then spublish)
-- @return bool  true when a lock was deleted; a WRONGTYPE error when N holds something else
-- @flag   idempotent

local lock = KEYS[1]
local queue = KEYS[2]
local timeouts = KEYS[3]
local channel = KEYS[4]
local latch = KEYS[5]
local latch_ms = tonumber(ARGV[1])
local wait = tonumber(ARGV[2])
local publish = ARGV[3]

if not latch_ms or latch_ms <= 0 or latch_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer')
end
if not wait or wait <= 0 or wait % 1 ~= 0 then
  return redis.error_reply('ERR lualock: wait_ms must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify.lua"

local replay = redis.call('get', latch)
if replay then
  return replay == '1'
end

-- @include "include/lock_shape.lua"
local what = lock_shape(lock)
if what then
  return wrong_type(lock, what, 'a lock')
end

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- @include "include/fair_purge.lua"
purge()

local deleted = redis.call('del', lock) == 1
if deleted then
  redis.call(publish, channel, 0)
end
local head = cut(now + wait)
if head then
  notify(channel .. ':' .. head)
end
redis.call('set', latch, deleted and 1 or 0, 'px', latch_ms)
return deleted
