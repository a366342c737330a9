-- Takes a unique-job lock for a digest.
-- @key digest the lock key
-- @key locked the hash of lock holders
-- @key changelog the changelog list
-- @arg job_id string the holder
-- @arg ttl int lock ttl, ms; 0 keeps it
-- @arg log bool whether to log
-- @return int
local digest, locked, changelog = KEYS[1], KEYS[2], KEYS[3]
local job_id, ttl = ARGV[1], tonumber(ARGV[2])
local function log(msg)
  if ARGV[3] == "1" then
    redis.call("lpush", changelog, msg)
  end
end
if redis.call("hexists", locked, job_id) == 1 then
  log("already locked")
  return 1
end
redis.call("hset", locked, job_id, "1")
if ttl > 0 then
  redis.call("pexpire", digest, ttl)
  redis.call("pexpire", locked, ttl)
end
log("locked")
return 1
