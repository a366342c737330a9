-- Included by the read-write lock's force release (see shape.lua).
-- @include "hash_shape.lua"

-- Nil when key is absent or a read-write lock's hash (Redisson's
-- RReadWriteLock): mode read or write, every other field a hold count.
-- Otherwise what key is.
local function rwlock_shape(key)
  local done, what = check_type(key, 'hash')
  if done then
    return what
  end
  local m = redis.call('hget', key, 'mode')
  if m ~= 'read' and m ~= 'write' then
    if not m and redis.call('hlen', key) == 1 and is_count(redis.call('hgetall', key)[2]) then
      return 'a lock'
    end
    return hash_view(key, nil)
  end
  local kv = redis.call('hgetall', key)
  for i = 1, #kv, 2 do
    if kv[i] ~= 'mode' and not is_count(kv[i + 1]) then
      return hash_view(key, 'mode')
    end
  end
  return nil
end
