-- Included by the permit-expirable semaphore scripts (luagen's include):
-- bad_ids(first) checks the permit ids ARGV[first..], as Redisson 4.x
-- writes them: at least one, each 16 raw bytes, no two alike. It returns
-- the error reply to send back, or nil when the ids are good.
local function bad_ids(first)
  if #ARGV < first then
    return redis.error_reply('ERR lualock: at least one permit id is needed')
  end
  local seen = {}
  for i = first, #ARGV do
    if #ARGV[i] ~= 16 then
      return redis.error_reply('ERR lualock: a permit id must be 16 bytes')
    end
    if seen[ARGV[i]] then
      return redis.error_reply('ERR lualock: permit ids must be distinct')
    end
    seen[ARGV[i]] = true
  end
  return nil
end
