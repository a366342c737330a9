-- Tells, for many permits of permit-expirable semaphores at once, whether
-- each is still held and how long its lease has left (the hold tracker's
-- verification). Run on a connection with client-side caching on, it also
-- has Redis track every lease zset it reads.
--
-- A permit is held while its id is in the semaphore's lease zset with a
-- deadline (epoch ms, Redis's TIME) still ahead: an expired permit cannot
-- be revived (the renewal gives it back first).
--
-- @key    timeouts...  the lease zset sfx(N, "timeout") of each permit's semaphore N
-- @arg    ids...       bytes  the id of each permit (16 bytes), in the order of the keys
-- @return []int  per permit: -3 when the key is not a zset (overwritten), -2 when the permit is not held, else the ms its lease has left
-- @flag   read-only
-- @flag   idempotent

if #ARGV ~= #KEYS then
  return redis.error_reply('ERR lualock: one id per permit is required')
end

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = {}
for i = 1, #KEYS do
  local score = redis.pcall('zscore', KEYS[i], ARGV[i])
  local deadline = nil
  if type(score) ~= 'table' then
    deadline = tonumber(score)
  end
  if type(score) == 'table' and score.err then
    left[i] = -3 -- WRONGTYPE: not a zset
  elseif deadline and deadline > now then
    left[i] = deadline - now
  else
    left[i] = -2
  end
end
return left
