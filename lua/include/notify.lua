-- Included by the scripts that publish a release (luagen's @include):
-- notify(ch, msg) sends msg on channel ch, or the release message "0" when
-- msg is left out, as Redisson's clients of each kind listen for it, with
-- the kinds of pub/sub that the script's local publish names: 'publish'
-- (PUBLISH), 'spublish' (SPUBLISH, sharded), 'both' (PUBLISH, then
-- SPUBLISH) or, where a script accepts it, 'none' (nothing: the spin lock).
-- Messages are decimal integers: Java decodes every one as a long. The
-- script declares and checks publish before the include.
local function notify(ch, msg)
  if publish == 'none' then
    return
  end
  msg = msg or 0
  if publish ~= 'spublish' then
    redis.call('publish', ch, msg)
  end
  if publish ~= 'publish' then
    redis.call('spublish', ch, msg)
  end
end
