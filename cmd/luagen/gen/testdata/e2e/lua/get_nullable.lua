-- Reads a key that may be missing.
--
-- @key    key  the key
-- @return string? the value, nil when the key is missing
-- @flag   read-only
return redis.call('GET', KEYS[1])
