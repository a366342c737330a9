-- Archives the active tasks whose lease expired: their ids come from the
-- lease zset, their hashes from the queue's task prefix, and the keys of
-- their unique locks from the "unique_key" field of each hash.
--
-- @key      lease     the lease zset, by expiry
-- @key      active    the active list
-- @key      archived  the archived zset
-- @arg      now       int     unix seconds
-- @arg      prefix    string  the task key prefix ({qname}:t:)
-- @return   int       how many were archived
-- @prefix   prefix
-- @datakeys lease     unique-lock keys carry the queue's {qname} tag
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
for _, id in ipairs(ids) do
  local key = ARGV[2] .. id
  local unique = redis.call("HGET", key, "unique_key")
  if unique then
    redis.call("DEL", unique)
  end
  redis.call("HSET", key, "state", "archived")
  redis.call("LREM", KEYS[2], 0, id)
  redis.call("ZADD", KEYS[3], ARGV[1], id)
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
return #ids
