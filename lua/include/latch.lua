-- Included by the release scripts (luagen's @include): the unlock latch of
-- a request, which keeps a release's outcome so that its resend after a
-- lost reply replays it. A caller that names its hold count (before > 0)
-- needs it only for the release that leaves the owner no hold (outcome 1):
-- any other resend finds the count one lower and replays "holds remain"
-- from that. A caller that names no count (0) gets a latch for every
-- release. The script declares latch, latch_ms (the argument as sent,
-- checked with include/whole.lua) and before before the include.

-- replayed returns the outcome the latch keeps, or nil.
local function replayed()
  local r = redis.call('get', latch)
  if r then
    return tonumber(r)
  end
  return nil
end

-- keep latches outcome where a resend would need it.
local function keep(outcome)
  if outcome == 1 or before == 0 then
    redis.call('set', latch, outcome == 1 and '1' or '0', 'px', latch_ms)
  end
end
