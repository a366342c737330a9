-- Sets a key and reads it back.
--
-- @key    key    the key
-- @arg    value  bytes  the value
-- @return string the value read back
redis.call('SET', KEYS[1], ARGV[1])
return redis.call('GET', KEYS[1])
