-- Moves a job from active to the finished set.
-- @key active the active list
-- @key finished the finished sorted set
-- @key job the job hash
-- @arg id string job id
-- @arg ts int finish time, ms
-- @arg keep int jobs to keep, 0 for none
-- @return int
local rcall = redis.call
--- @include "includes/removeJob"
local removed = rcall("lrem", KEYS[1], -1, ARGV[1])
if removed == 0 then
  return -1
end
if tonumber(ARGV[3]) == 0 then
  removeJob(KEYS[3])
  return 0
end
rcall("zadd", KEYS[2], ARGV[2], ARGV[1])
rcall("hset", KEYS[3], "finishedOn", ARGV[2])
return 0
