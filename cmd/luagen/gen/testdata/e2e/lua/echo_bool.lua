-- Replies with its boolean argument.
--
-- @arg    on  bool  the value
-- @return bool the same value: Lua's true and false
return ARGV[1] == '1'
