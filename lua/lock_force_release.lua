-- Deletes the reentrant lock whoever holds it, and wakes its waiters.
--
-- @key    lock     the lock hash N
-- @key    channel  release channel of N
-- @arg    publish  string  publishing command: publish or spublish
-- @return bool  true when a lock was deleted
-- @flag   idempotent

local publish = ARGV[1]
if publish ~= 'publish' and publish ~= 'spublish' then
  return redis.error_reply('ERR lualock: publish must be publish or spublish')
end

if redis.call('del', KEYS[1]) == 1 then
  redis.call(publish, KEYS[2], 0)
  return true
end
return false
