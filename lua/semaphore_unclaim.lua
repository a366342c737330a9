-- Gives up a waiter's claim on a semaphore (include/semaphore_claim.lua):
-- deletes the claim key if it is this waiter's, so that the others need
-- not wait for its TTL. A waiter calls it when it stops waiting without
-- the permits (timeout, cancel). Serves both kinds of semaphore.
--
-- @key    claim    the claim tag("lualock_semaphore_claim", N): "n:waiter" with a TTL
-- @arg    waiter   string  the waiting call's id
-- @return int   1 when the waiter's claim was deleted; 0 when it had none
-- @flag   idempotent

local claim = KEYS[1]
local waiter = ARGV[1]

if waiter == '' or string.find(waiter, ':', 1, true) then
  return redis.error_reply('ERR lualock: waiter must be a non-empty id without ":"')
end

local c = redis.call('get', claim)
if not c then
  return 0
end
local sep = string.find(c, ':', 1, true)
if not sep or string.sub(c, sep + 1) ~= waiter then
  return 0
end
redis.call('del', claim)
return 1
