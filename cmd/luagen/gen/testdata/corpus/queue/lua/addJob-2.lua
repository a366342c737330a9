-- Adds a job to the wait list.
-- @key wait the wait list
-- @key job the job hash
-- @arg id string job id
-- @arg data string job payload
-- @return string
local rcall = redis.call
local kv = {}
table.insert(kv, KEYS[2])
table.insert(kv, ARGV[2])
rcall("hset", KEYS[2], "data", ARGV[2])
rcall("lpush", KEYS[1], ARGV[1])
return ARGV[1]
