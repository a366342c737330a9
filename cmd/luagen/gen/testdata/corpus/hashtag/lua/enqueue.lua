-- Pushes a job to a queue whose keys share the prefix's hash tag.
-- @key queues the set of queue names, {app}:queues
-- @arg prefix string the queues' key prefix with a hash tag, {app}:
-- @arg queue string the queue name
-- @arg job string the job payload
-- @return int
local prefix = ARGV[1]
redis.call("sadd", KEYS[1], ARGV[2])
return redis.call("lpush", prefix .. "queue:" .. ARGV[2], ARGV[3])
