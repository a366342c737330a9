-- Included by the semaphore acquire scripts (luagen's include): the claim
-- that keeps a waiter for many permits from being starved by waiters for
-- fewer. The claim key holds "n:waiter" with a TTL: while it exists, an
-- acquisition by anyone else must leave n permits available; the claimer's
-- own acquisition deletes it. A waiter whose attempt is refused, if it asks
-- to (claim_ms > 0), refreshes its own claim, or takes the claim when there
-- is none or when it holds fewer permits than this waiter wants: the
-- largest request waiting wins it, so no waiter loses forever to waiters
-- for fewer. Redisson's clients do not know the key and ignore it.
--
-- claimed() returns the permits reserved for another waiter (0 when none
-- or when the claim is this waiter's), whether the claim is this waiter's,
-- and the permits the claim holds (0 when none). claim_for(wanted, mine,
-- held) takes or refreshes the claim after a refusal and returns whether
-- the caller holds it now. Both read the
-- script's locals claim (key), waiter and claim_ms.
local function claimed()
  local c = redis.call('get', claim)
  if not c then
    return 0, false, 0
  end
  local sep = string.find(c, ':', 1, true)
  if not sep then
    return 0, false, 0
  end
  local held = tonumber(string.sub(c, 1, sep - 1)) or 0
  if string.sub(c, sep + 1) == waiter then
    return 0, true, held
  end
  return held, false, held
end

local function claim_for(wanted, mine, held)
  if claim_ms > 0 and waiter ~= '' and (mine or held < wanted) then
    redis.call('set', claim, string.format('%d', wanted) .. ':' .. waiter, 'px', claim_ms)
    return true
  end
  return false
end
