-- Adds to a counter.
-- @key counter the counter
-- @arg by int the step
-- @return int the new value
return redis.call('incrby', KEYS[1], ARGV[1])
