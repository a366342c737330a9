-- Sets a key, or answers a status of its own for an empty value.
--
-- @key    key    the key
-- @arg    value  string  the value
-- @return status OK from SET, or EMPTY
if ARGV[1] == '' then
  return redis.status_reply('EMPTY')
end
return redis.call('SET', KEYS[1], ARGV[1])
