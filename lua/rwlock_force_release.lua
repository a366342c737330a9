-- Deletes the read-write lock whoever holds it, when it is in the mode the
-- caller names, and wakes its waiters, as Redisson's forceUnlock of the
-- read lock (mode "read", message "0") or of the write lock (mode "write",
-- message "1") does. The read holds' timeout keys are left to expire.
--
-- The outcome is kept under a latch key named after the request id, as in
-- lock_force_release: a force release sent again after a lost reply
-- replays it instead of deleting the lock of the next owner.
--
-- A key that is not a read-write lock's hash (mode read or write, every
-- other field a hold count, as lualock and Redisson keep it) is left as it
-- is: the script answers a WRONGTYPE error that says what it is
-- (include/rwlock_shape.lua).
--
-- @key    lock      the lock hash N
-- @key    channel   the read-write lock's channel
-- @key    latch     unlock latch of N for this request id
-- @arg    mode      string  read or write: the mode the lock must be in to be deleted
-- @arg    latch_ms  int     how long the latch replays the outcome, in milliseconds
-- @arg    publish   string  how to publish: publish, spublish or both (publish, then spublish)
-- @return bool  true when a lock was deleted; a WRONGTYPE error when N holds something else
-- @flag   idempotent

local lock = KEYS[1]
local channel = KEYS[2]
local latch = KEYS[3]
local mode = ARGV[1]
local latch_ms = tonumber(ARGV[2])
local publish = ARGV[3]

if mode ~= 'read' and mode ~= 'write' then
  return redis.error_reply('ERR lualock: mode must be read or write')
end
if not latch_ms or latch_ms <= 0 or latch_ms % 1 ~= 0 then
  return redis.error_reply('ERR lualock: latch_ms must be a positive integer')
end
if publish ~= 'publish' and publish ~= 'spublish' and publish ~= 'both' then
  return redis.error_reply('ERR lualock: publish must be publish, spublish or both')
end
-- @include "include/notify.lua"
-- @include "include/notify_value.lua"

local replay = redis.call('get', latch)
if replay then
  return replay == '1'
end

-- @include "include/rwlock_shape.lua"
local what = rwlock_shape(lock)
if what then
  return wrong_type(lock, what, 'a read-write lock')
end

local deleted = false
if redis.call('hget', lock, 'mode') == mode then
  redis.call('del', lock)
  if mode == 'read' then
    notify(channel)
  else
    notify_value(channel, 1)
  end
  deleted = true
end
redis.call('set', latch, deleted and 1 or 0, 'px', latch_ms)
return deleted
