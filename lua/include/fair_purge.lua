-- Included by the fair scripts (luagen's @include). It reads the script's
-- locals queue, timeouts and now (Redis's TIME, in ms), which must be
-- declared before the include. Every function here costs O(1) or O(log N)
-- in the queue's length N, plus O(log N) for each entry it pops; an entry
-- is popped once, so popping is amortised O(1) per entry. (The scripts
-- that add to the queue or take from its middle include fair_trim.lua too.)
--
-- purge(spare) pops the waiters at the head of the queue whose deadline
-- has passed (or that have none; a tombstone, see tomb, always has), but
-- never the waiter spare (nil: none is spared), and reports whether it
-- popped any.
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

-- cut(limit) returns the head of the queue (nil when it is empty) after
-- lowering its deadline to limit when it lies beyond: the head is next, and
-- a dead head must hold the queue up for one budget at most.
local function cut(limit)
  local head = redis.call('lindex', queue, 0)
  if head then
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if not deadline or deadline > limit then
      redis.call('zadd', timeouts, limit, head)
    end
  end
  return head
end
