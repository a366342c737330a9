-- Reads a counter.
-- @key counter the counter
-- @return int? the value, nil when unset
-- @flag read-only
local v = redis.call('get', KEYS[1])
return v and tonumber(v)
