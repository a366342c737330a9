-- Reads a semaphore's available permits (Redisson's availablePermits).
--
-- @key    sem   the semaphore N: a string integer, the available permits
-- @return int   the available permits; 0 when N is missing; may be negative
-- @flag   read-only
-- @flag   idempotent

return tonumber(redis.call('get', KEYS[1]) or 0)
