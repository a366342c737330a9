-- Moves the members of a schedule that are due to a list, as a task
-- queue's scheduler does.
-- @key    scheduled  the zset of members by due time
-- @key    pending    the list the due members go to
-- @arg    now        int  the current time, in the zset's unit
-- @arg    limit      int  how many to move at most
-- @return []string   the members moved
local due = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  redis.call('zrem', KEYS[1], m)
  redis.call('rpush', KEYS[2], m)
end
return due
