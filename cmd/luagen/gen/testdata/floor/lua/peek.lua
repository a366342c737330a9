-- Reads a counter without changing it.
-- @key    counter  the counter
-- @return string?  its value, nil when it does not exist
-- @flag   read-only
return redis.call('get', KEYS[1])
