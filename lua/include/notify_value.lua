-- Included (luagen's @include) by the semaphore and count-down latch
-- scripts: notify_value(ch, v) publishes the decimal integer v on channel
-- ch with the kinds of pub/sub that the script's local publish names, as
-- notify.lua does for the fixed release message "0": 'publish' (PUBLISH),
-- 'spublish' (SPUBLISH, sharded) or 'both' (PUBLISH, then SPUBLISH). v is
-- sent as whole-number text ("%d"): Redisson decodes every message on these
-- channels as a long, so "1.0" or "1e+15" would break its listener. The
-- script declares and checks publish before the include.
local function notify_value(ch, v)
  local msg = string.format('%d', v)
  if publish ~= 'spublish' then
    redis.call('publish', ch, msg)
  end
  if publish ~= 'publish' then
    redis.call('spublish', ch, msg)
  end
end
