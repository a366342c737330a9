-- Adds to a counter and returns the new value.
-- @key    counter  the counter
-- @arg    by       int  the step
-- @return int      the counter after the call
-- @flag   idempotent
return redis.call('incrby', KEYS[1], ARGV[1])
