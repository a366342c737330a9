#!lua name=kvlib
-- A key-value library: versioned sets and reads.
local function set_versioned(keys, args)
  local v = redis.call('hincrby', keys[1], '_version', 1)
  redis.call('hset', keys[1], args[1], args[2])
  return v
end

local function get_field(keys, args)
  return redis.call('hget', keys[1], args[1])
end

redis.register_function('set_versioned', set_versioned)
redis.register_function{function_name = 'get_field', callback = get_field, flags = {'no-writes'}}
