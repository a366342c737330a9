-- Included by the fair scripts (luagen's @include): purge(spare) purges the
-- waiters at the head of the queue whose deadline has passed (or that have
-- none), but never the waiter spare (nil: none is spared), and reports
-- whether it purged any. It reads the script's locals queue, timeouts and
-- now (Redis's TIME, in ms), which must be declared before the include.
local function purge(spare)
  local purged = false
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head or head == spare then
      return purged
    end
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > now then
      return purged
    end
    redis.call('zrem', timeouts, head)
    redis.call('lpop', queue)
    purged = true
  end
end
