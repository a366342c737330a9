-- Included by the reentrant and fair locks' force releases (see
-- shape.lua).
-- @include "hash_shape.lua"

-- Nil when key is absent or a lock's hash (the reentrant, fair, fenced and
-- spin locks, Redisson's RLock): one owner field with its hold count.
-- Otherwise what key is.
local function lock_shape(key)
  local done, what = check_type(key, 'hash')
  if done then
    return what
  end
  local m = redis.call('hget', key, 'mode')
  if (m == 'read' or m == 'write') and redis.call('hlen', key) > 1 then
    return 'a read-write lock'
  end
  if redis.call('hlen', key) == 1 then
    local kv = redis.call('hgetall', key)
    if is_count(kv[2]) then
      return nil
    end
  end
  return hash_view(key, nil)
end
