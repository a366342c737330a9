-- Releases one read hold of the read-write lock, the newest first.
--
-- A release sent again after a lost reply does not release a second hold:
-- by the hold count the caller names, and for the owner's last read hold by
-- the request's latch (see include/latch.lua), as in lock_release. The owner's count drops by one (its field goes at 0) and
-- the timeout key of the hold released goes.
--
-- The lock then lives as long as its longest live read hold: the largest
-- PTTL of the timeout keys of every reader, P:G:rwlock_timeout:1..count.
-- A reader whose timeout keys have all expired is dead and no longer
-- counts. In read mode with no live hold left the lock is deleted and "0"
-- is published on its channel (a waiting writer may enter), as Redisson
-- does. In write mode (the writer releasing a read hold of its own) the
-- lock stays and its lease is only ever extended, never cut: Redisson sets
-- it to the read holds' PTTL, which can cut the write hold's lease.
--
-- @key    lock      the lock hash N
-- @key    prefix    timeout prefix P of N: {N}, or N when N has a hash tag (the timeout keys are built from it)
-- @key    channel   the read-write lock's channel: waiters listen here
-- @key    latch     unlock latch of N for this request id
-- @arg    field     string  owner field C:H
-- @arg    latch_ms  int     how long the latch replays the outcome, in milliseconds
-- @arg    publish   string  how to publish: publish, spublish or both (publish, then spublish)
-- @arg    holds     int     the owner's read hold count before this release, as the caller knows it; 0: unknown
-- @return int?  nil when the owner held no read hold; 0 when read holds of the owner remain; 1 when its last one was released
-- @flag   idempotent

local lock = KEYS[1]
local prefix = KEYS[2]
local channel = KEYS[3]
local latch = KEYS[4]
local field = ARGV[1]
local latch_ms = ARGV[2]
local publish = ARGV[3]
local before = tonumber(ARGV[4])

if field == '' then
  return redis.error_reply('ERR lualock: field must not be empty')
end
-- @include "include/whole.lua"
if not whole(latch_ms) then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer, in digits, below 10^15')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify.lua"
if not before or before < 0 or before % 1 ~= 0 then
  return redis.error_reply('ERR lualock: holds must be a whole number, 0 when unknown')
end
-- @include "include/rwlock_timeouts.lua"

-- @include "include/latch.lua"

local replay = before == 0 and replayed()
if replay then
  return replay
end
local got = redis.call('hmget', lock, field, 'mode')
local count = tonumber(got[1])
if not count then
  return before > 0 and replayed() or nil
end
local mode = got[2]
if mode ~= 'read' and mode ~= 'write' then
  -- (A hash without a mode is another kind of lock: not ours to change.)
  return nil
end
if count == before - 1 then
  -- Released already by this request: a read hold remains.
  return 0
end

redis.call('del', timeout(field, count)) -- luagen:ignore non-key-argument
if count == 1 and mode == 'read' and redis.call('hlen', lock) == 2 then
  -- The caller's was the last hold, and N has no other field than the
  -- mode: no read hold is left (the walk below would find none).
  redis.call('del', lock)
  notify(channel)
  keep(1)
  return 1
end
if count > 1 then
  redis.call('hincrby', lock, field, -1)
end
if count == 1 then
  redis.call('hdel', lock, field)
end
local outcome = count > 1 and 0 or 1

local hash = redis.call('hgetall', lock)
local longest = -2
for i = 1, #hash, 2 do
  if hash[i] ~= 'mode' then
    local n = tonumber(hash[i + 1])
    if n then
      for h = 1, n do
        longest = math.max(longest, redis.call('pttl', timeout(hash[i], h))) -- luagen:ignore non-key-argument
      end
    end
  end
end

if mode == 'write' then
  -- The writer's own read hold: the write hold keeps the lock.
  local pttl = redis.call('pttl', lock)
  if pttl >= 0 and longest > pttl then
    redis.call('pexpire', lock, longest)
  end
  keep(outcome)
  return outcome
end
if longest > 0 then
  redis.call('pexpire', lock, longest)
  keep(outcome)
  return outcome
end

-- No live read hold is left: the owner's own remaining holds too, if any,
-- had expired.
redis.call('del', lock)
notify(channel)
keep(1)
return 1
