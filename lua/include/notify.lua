-- Included by the scripts that publish a release (luagen's @include):
-- notify(ch) sends the release message "0" on channel ch as Redisson's
-- clients of each kind listen for it, with the kinds of pub/sub that the
-- script's local publish names: 'publish' (PUBLISH), 'spublish' (SPUBLISH,
-- sharded), 'both' (PUBLISH, then SPUBLISH) or, where a script accepts it,
-- 'none' (nothing: the spin lock). The script declares and checks publish
-- before the include.
local function notify(ch)
  if publish == 'none' then
    return
  end
  if publish ~= 'spublish' then
    redis.call('publish', ch, '0')
  end
  if publish ~= 'publish' then
    redis.call('spublish', ch, '0')
  end
end
