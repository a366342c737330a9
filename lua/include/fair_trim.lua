-- Included by the fair scripts that add to the queue or take from its
-- middle (luagen's @include), after include/fair_purge.lua; it reads the
-- same locals (queue, timeouts, now).
--
-- trim() pops the waiters at the back of the queue whose deadline has
-- passed (tombstones, and waiters that stopped asking), so that the last
-- entry, from which Redisson's clients and lualock chain a newcomer's
-- deadline, has a live deadline.
local function trim()
  while true do
    local last = redis.call('lindex', queue, -1)
    if not last then
      return
    end
    local deadline = tonumber(redis.call('zscore', timeouts, last))
    if deadline and deadline > now then
      return
    end
    redis.call('zrem', timeouts, last)
    redis.call('rpop', queue)
  end
end
