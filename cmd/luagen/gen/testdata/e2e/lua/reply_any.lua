-- Replies with a value of the shape its argument names.
--
-- @arg    shape  string  nil, false, int, string, status, array or anything else for an error
-- @return any    the reply, as go-redis decodes it
local shape = ARGV[1]
if shape == 'nil' then
  return nil
elseif shape == 'false' then
  return false
elseif shape == 'int' then
  return 7
elseif shape == 'string' then
  return 'seven'
elseif shape == 'status' then
  return redis.status_reply('FINE')
elseif shape == 'array' then
  return {1, 'two', {3}}
end
return redis.error_reply('ERR unknown shape ' .. shape)
