-- Deletes the reentrant lock whoever holds it, and wakes its waiters.
--
-- The outcome is kept under a latch key named after the request id, as in
-- lock_release: a force release sent again after a lost reply replays it
-- instead of deleting the lock of the next owner.
--
-- A key that is not a lock's hash (one owner field with a hold count, as
-- lualock and Redisson's RLock keep it) is left as it is: the script
-- answers a WRONGTYPE error that says what it is (include/lock_shape.lua).
--
-- @key    lock      the lock hash N
-- @key    channel   release channel of N
-- @key    latch     unlock latch of N for this request id
-- @arg    latch_ms  int     how long the latch replays the outcome, in milliseconds
-- @arg    publish   string  how to publish: publish, spublish, both (publish, then spublish) or none (the spin lock)
-- @return bool  true when a lock was deleted; a WRONGTYPE error when N holds something else
-- @flag   idempotent

local lock = KEYS[1]
local channel = KEYS[2]
local latch = KEYS[3]
local latch_ms = tonumber(ARGV[1])
local publish = ARGV[2]

if not latch_ms or latch_ms <= 0 or latch_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' and publish ~= 'none' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both (or none: the spin lock)')
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

local deleted = redis.call('del', lock) == 1
if deleted then
  notify(channel)
end
redis.call('set', latch, deleted and 1 or 0, 'px', latch_ms)
return deleted
