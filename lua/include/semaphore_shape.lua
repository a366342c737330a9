-- Included by the semaphore's drain (see shape.lua).
-- @include "shape.lua"

-- Nil when key is absent or a semaphore's count: a string holding a whole
-- number (negative after a drain of a negative count, as Redisson allows).
-- Otherwise what key is.
local function semaphore_shape(key)
  local done, what = check_type(key, 'string')
  if done then
    return what
  end
  local v = redis.call('get', key)
  if string.match(v, '^-?%d+$') then
    return nil
  end
  return 'a string holding ' .. quoted(v)
end
