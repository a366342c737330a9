-- Reads a count-down latch's count (Redisson's CountDownLatch.getCount).
--
-- @key    latch  the count-down latch N: a string integer, the count
-- @return int   the count; 0 when the latch is open (N missing)
-- @flag   read-only
-- @flag   idempotent

return tonumber(redis.call('get', KEYS[1]) or 0)
