-- Pushes a job on the wait list of a queue whose keys share the prefix's
-- hash tag.
-- @key queues the set of queues, {q}:queues
-- @arg prefix string the queue's key prefix with its hash tag, {q}:
-- @arg job string the job
-- @return int the wait list's length
redis.call('sadd', KEYS[1], ARGV[1])
return redis.call('rpush', ARGV[1] .. 'wait', ARGV[2])
