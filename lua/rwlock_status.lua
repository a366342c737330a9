-- Reads the state of a read-write lock as one owner sees it, in one round
-- trip.
--
-- @key    lock   the lock hash N
-- @arg    field  string  owner field C:H
-- @return []int  {mode: 0 free, 1 read, 2 write; read hold count of the owner; write hold count of the owner; PTTL in ms (-2: no lock, -1: no expiry); fields in the hash (HLEN)}
-- @flag   read-only
-- @flag   idempotent

local lock = KEYS[1]
local field = ARGV[1]
local modes = { read = 1, write = 2 }
local values = redis.call('hmget', lock, 'mode', field, field .. ':write')
return {
  modes[values[1]] or 0,
  tonumber(values[2]) or 0,
  tonumber(values[3]) or 0,
  redis.call('pttl', lock),
  redis.call('hlen', lock),
}
