-- Included by the fair scripts (luagen's @include). It reads the script's
-- locals queue, timeouts and now (Redis's TIME, in ms), which must be
-- declared before the include. Every function here costs O(1) or O(log N)
-- in the queue's length N, plus O(log N) for each entry it pops; an entry
-- is popped once, so popping is amortised O(1) per entry. (The scripts
-- that add to the queue or take from its middle include fair_trim.lua too.)
--
-- purge(spare, head) pops the waiters at the head of the queue whose
-- deadline has passed (or that have none; a tombstone, see tomb, always
-- has), but never the waiter spare (nil: none is spared). It returns
-- whether it popped any, and the head it stopped at (false when the queue
-- is empty). head, when not nil, is the queue's head as the caller has
-- just read it (false: empty), so that it is not read twice.
local function purge(spare, head)
  local purged = false
  if head == nil then
    head = redis.call('lindex', queue, 0)
  end
  while true do
    if not head or head == spare then
      return purged, head
    end
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > now then
      return purged, head
    end
    redis.call('zrem', timeouts, head)
    redis.call('lpop', queue)
    purged = true
    head = redis.call('lindex', queue, 0)
  end
end

-- cut(limit, head) returns the head of the queue (false when it is empty)
-- after lowering its deadline to limit when it lies beyond: the head is
-- next, and a dead head must hold the queue up for one budget at most.
-- head is as in purge.
local function cut(limit, head)
  if head == nil then
    head = redis.call('lindex', queue, 0)
  end
  if head then
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if not deadline or deadline > limit then
      redis.call('zadd', timeouts, limit, head)
    end
  end
  return head
end
