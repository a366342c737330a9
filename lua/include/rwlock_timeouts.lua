-- Included by the read-write lock scripts (luagen's @include):
-- timeout(g, i) names the timeout key of read hold i of the owner field g,
-- P:g:rwlock_timeout:i, where P is the script's local prefix (KEYS: the
-- lock's timeout prefix, {N}, or N itself when N has a hash tag). The key
-- is in N's cluster slot, as P is; it is built here because the number of
-- holds, and for the release the other readers, are known only in Redis.
-- Every redis.call given such a key carries luagen:ignore non-key-argument
-- for that reason.
local function timeout(g, i)
  return prefix .. ':' .. g .. ':rwlock_timeout:' .. i
end
