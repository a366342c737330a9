-- Included by the scripts that hand a whole-number argument on to a Redis
-- command (luagen's @include). whole(s) is the argument s as a number when
-- it is a positive whole number below 10^15 written the way Redis writes
-- integers (digits only: no sign, point, exponent or leading zero), else
-- nil. The script then passes s itself to the command, not the number:
-- Redis 7.0 formats a Lua number again for every command it is given
-- (with %.17g, about 0.3 µs each time), and a string checked here is one
-- the command parses whole, so that no command can fail on it after the
-- script's first write.
local function whole(s)
  if #s < 16 and string.find(s, '^[1-9]%d*$') then
    return tonumber(s)
  end
  return nil
end
