-- Included by lock_shape.lua and rwlock_shape.lua: what makes a hash a
-- lock's (see shape.lua).
-- @include "shape.lua"

-- Whether v is a hold count as HINCRBY leaves it: a positive whole number.
local function is_count(v)
  return type(v) == 'string' and string.match(v, '^[1-9]%d*$') ~= nil
end

-- What a hash is when it is not a lock's: its field count, or the first
-- field that holds no hold count.
local function hash_view(key, skip)
  local kv = redis.call('hgetall', key)
  for i = 1, #kv, 2 do
    if kv[i] ~= skip and not is_count(kv[i + 1]) then
      return 'a hash whose field ' .. quoted(kv[i]) .. ' holds ' .. quoted(kv[i + 1])
    end
  end
  return 'a hash of ' .. (#kv / 2) .. ' fields'
end
