-- Included (luagen's @include) by the scripts that delete or reset a
-- primitive whoever holds it (the force releases, the semaphore's drain),
-- through lock_shape.lua, rwlock_shape.lua and semaphore_shape.lua: they
-- check first that the key has the type and shape of that primitive and,
-- when it holds anything else, change nothing and answer a WRONGTYPE error
-- that says what the key is (wrong_type). Redisson keeps its locks and
-- semaphores in the same shapes, so its objects pass.

-- Checks key's Redis type against want ('hash', 'string'): it returns
-- done, what. done is false when key is of type want (its shape is the
-- caller's to check); otherwise the check is over, with what nil when key
-- is absent and 'a T' when it is of another type T ('a list').
local function check_type(key, want)
  local t = redis.call('type', key)
  if type(t) == 'table' then
    t = t['ok']
  end
  if t == want then
    return false, nil
  end
  if t == 'none' then
    return true, nil
  end
  return true, 'a ' .. t
end

-- A short quoted view of a value, for the error.
local function quoted(v)
  if #v > 32 then
    v = string.sub(v, 1, 32) .. '...'
  end
  return string.format('%q', v)
end

-- The error of a script that found key holding what is, not want.
local function wrong_type(key, what, want)
  return redis.error_reply('WRONGTYPE lualock: ' .. key .. ' is ' .. what .. ', not ' .. want .. ': nothing changed')
end

