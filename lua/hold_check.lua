-- Tells, for many locks at once, whether each owner still holds its lock
-- and how long its lease has left (the hold tracker's verification). Run
-- tracked on a connection with client-side caching on, it also has Redis
-- track every key it reads, so the next change of any of them is
-- announced (the tracker tracks a call of more than a few keys apart).
--
-- @key    locks...   the lock hashes
-- @arg    fields...  string  the counting field of each lock, in the order of the keys
-- @return []int  per lock: -3 when the key is not a hash (overwritten), -2 when the field is gone, -1 when the lock has no expiry, else its PTTL in ms
-- @flag   read-only
-- @flag   idempotent

if #ARGV ~= #KEYS then
  return redis.error_reply('ERR lualock: one field per lock is required')
end

local left = {}
for i = 1, #KEYS do
  local found = redis.pcall('hexists', KEYS[i], ARGV[i])
  if type(found) == 'table' and found.err then
    left[i] = -3 -- WRONGTYPE: not a hash
  elseif found == 1 then
    left[i] = redis.call('pttl', KEYS[i])
  else
    left[i] = -2
  end
end
return left
