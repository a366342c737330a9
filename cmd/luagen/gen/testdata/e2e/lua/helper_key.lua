-- Reads two keys through a local helper function: the lint traces the
-- helper's parameter back to KEYS.
--
-- @key    first   a key
-- @key    second  another key
-- @return []string? the two values, nil for a missing key
local function get(key)
  return redis.call('GET', key)
end
return {get(KEYS[1]), get(KEYS[2])}
